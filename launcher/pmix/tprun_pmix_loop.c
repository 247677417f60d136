/* tprun_pmix_loop.c: what tprun --pmix adds to a job: the servers' fences, data requests, aborts and deaths,
 * matched across this host's server and the agents' (tprun is the hub; hosts never talk to each other). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "runtime_log.h"
#include "tprun_exit.h"
#include "core/job.h"
#include "tprun_pmix.h"
#include "tprun_pmix_fence.h"
#include "ssh/ssh.h"

/* Survivors get this long after the death notification went out to act on it before tprun's SIGTERM. */
#define TPRUN_PMIX_EVENT_WINDOW_S 0.2
/* If a host never confirms the notification, the teardown starts after this anyway. */
#define TPRUN_PMIX_NOTIFY_LIMIT_S 2.0

/* A rank's data one host asked for, while the rank's host looks it up. */
typedef struct want {
    unsigned hub_id;
    int from_node;
    unsigned from_id;
    int rank;
    int owner_node;
} want_t;

static struct {
    tprun_loop_t *L;
    int num_nodes;
    int *rank_node;     /* world_size entries */
    int *node_agent;    /* per node: -1 for this process's own server, else the agent's index */
    const char **names; /* per node: the host's name */
    int local_node;     /* the node whose ranks this process starts, or -1 */
    tprun_fence_table_t *fences;
    want_t *wants;
    int nwants, cap_wants;
    unsigned next_hub_id;
    int notify_owed;        /* hosts that have not confirmed the death notification */
    double notify_deadline; /* when the teardown starts; 0 when no notification is under way */
} hub = {.local_node = -1};

int tprun_pmix_prepare(const tprun_plan_t *plan)
{
    char err[1024];
    (void)plan;
    if (tprun_pmix_load(err, sizeof(err)) != TP_OK) {
        tprun_say("%s", err);
        return TPRUN_EXIT_USAGE;
    }
    return tprun_pmix_tmpdir_create() == TP_OK ? 0 : TPRUN_EXIT_LAUNCH;
}

static int node_of_host(const tprun_plan_t *plan, int h) { return plan->hosts != NULL ? plan->hosts[h].node : 0; }

/* The server's events come before the other fds of a wake-up: an abort before the exit it causes. */
static void on_pmix_ready(void *arg, unsigned revents) { (void)revents, tprun_pmix_on_ready(arg); }

tp_status_t tprun_pmix_start(tprun_loop_t *L)
{
    const tprun_plan_t *plan = L->plan;
    tprun_job_t *job = L->job;
    char nspace[256];
    tprun_pmix_nspace(job->job_id, nspace, sizeof(nspace));
    hub.L = L;
    hub.num_nodes = 1;
    for (size_t h = 0; plan->hosts != NULL && h < plan->num_hosts; h++)
        if (plan->hosts[h].nranks > 0 && plan->hosts[h].node + 1 > hub.num_nodes)
            hub.num_nodes = plan->hosts[h].node + 1;
    hub.rank_node = calloc((size_t)job->world_size, sizeof(int));
    hub.node_agent = malloc(sizeof(int) * (size_t)hub.num_nodes);
    const char **names = calloc((size_t)hub.num_nodes, sizeof(char *));
    if (hub.rank_node == NULL || hub.node_agent == NULL || names == NULL) {
        free(names);
        return TP_ERR_NO_MEMORY;
    }
    names[0] = job->host;
    for (size_t h = 0; plan->hosts != NULL && h < plan->num_hosts; h++)
        if (plan->hosts[h].nranks > 0)
            names[plan->hosts[h].node] = plan->hosts[h].local ? job->host : plan->hosts[h].name;
    for (int r = 0; r < job->world_size; r++) {
        int node = plan->rank_host != NULL ? node_of_host(plan, plan->rank_host[r]) : 0;
        hub.rank_node[r] = node;
        hub.node_agent[node] = job->ranks[r].agent;
        if (job->ranks[r].agent < 0) hub.local_node = node;
    }
    hub.names = names;
    hub.fences = tprun_fence_table_create(job->world_size, hub.num_nodes, hub.rank_node);
    if (hub.fences == NULL) return TP_ERR_NO_MEMORY;
    tprun_pmix_job_t pj = {.nspace = nspace,
                           .world_size = job->world_size,
                           .num_hosts = hub.num_nodes,
                           .hosts = names,
                           .rank_host = hub.rank_node,
                           .this_host = hub.local_node};
    /* Without ranks here the server only serves as the event fd and timer of the hub. */
    tp_status_t st = tprun_pmix_server_start(&pj);
    if (st != TP_OK) {
        tprun_say("--pmix: could not start the PMIx server (see above); no rank was started");
        return st;
    }
    tprun_ev_fd(L->ev, tprun_pmix_event_fd(), EPOLLIN, TPRUN_EV_FIRST, on_pmix_ready, L);
    tp_log(TP_LOG_DEBUG, "pmix", "PMIx server up for namespace %s, %d ranks on %d hosts", nspace, job->world_size,
           hub.num_nodes);
    return TP_OK;
}

tp_status_t tprun_pmix_describe(char **hosts, char **map)
{
    size_t hlen = 1, mlen = (size_t)hub.L->job->world_size * 11 + 1;
    for (int n = 0; n < hub.num_nodes; n++) hlen += strlen(hub.names[n]) + 1;
    char *h = malloc(hlen), *m = malloc(mlen);
    if (h == NULL || m == NULL) {
        free(h);
        free(m);
        return TP_ERR_NO_MEMORY;
    }
    size_t o = 0;
    for (int n = 0; n < hub.num_nodes; n++) o += (size_t)snprintf(h + o, hlen - o, "%s%s", n ? "," : "", hub.names[n]);
    o = 0;
    m[0] = '\0';
    for (int r = 0; r < hub.L->job->world_size; r++)
        o += (size_t)snprintf(m + o, mlen - o, "%s%d", r ? "," : "", hub.rank_node[r]);
    *hosts = h, *map = m;
    return TP_OK;
}

/* ---- sending to a host: this process's server, or an agent's channel ---- */

static tprun_agent_t *node_agent(int node)
{
    int ai = hub.node_agent[node];
    return ai >= 0 && hub.L->agents != NULL && ai < hub.L->agents->n ? &hub.L->agents->a[ai] : NULL;
}

/* "HEAD B64\n" to node's agent. */
static void send_blob(int node, const char *head, const unsigned char *data, size_t len)
{
    tprun_agent_t *a = node_agent(node);
    char *line = a != NULL ? tprun_wire_b64_line(head, data, len, NULL) : NULL;
    if (line != NULL) tprun_agent_send(a, line);
    free(line);
}

/* ---- fences ---- */

static void timer_update(void)
{
    double next = hub.notify_deadline, f = hub.fences != NULL ? tprun_fence_next_deadline(hub.fences) : 0;
    if (f > 0 && (next == 0 || f < next)) next = f;
    double now = tprun_now_s();
    tprun_pmix_timer_arm(next == 0 ? 0 : next > now ? next - now : 1e-6);
}

static void fence_answer(void *ctx, tprun_fence_result_t *res)
{
    (void)ctx;
    int how = res->status == TPRUN_FENCE_OK            ? TPRUN_PMIX_FENCE_DONE
              : res->status == TPRUN_FENCE_RANK_FAILED ? TPRUN_PMIX_FENCE_PEER_FAILED
                                                       : TPRUN_PMIX_FENCE_TIMED_OUT;
    if (res->status == TPRUN_FENCE_TIMEOUT) {
        char hosts[512] = "";
        size_t o = 0;
        for (char *p = res->missing; *p != '\0' && o < sizeof(hosts) - 1;
             p = strchr(p, ',') ? strchr(p, ',') + 1 : "") {
            int n = atoi(p);
            o += (size_t)snprintf(hosts + o, sizeof(hosts) - o, "%s%s", o ? ", " : "",
                                  n < hub.num_nodes ? hub.names[n] : "?");
        }
        tprun_say("PMIx fence over ranks %s (#%u) timed out: host%s %s never entered it", res->sig, res->seq,
                  strchr(res->missing, ',') ? "s" : "", hosts);
    }
    char head[4200];
    snprintf(head, sizeof(head), "pF %d %u %s", how, res->seq, res->sig);
    for (int i = 0; i < res->nnodes; i++) {
        if (res->nodes[i] == hub.local_node) tprun_pmix_fence_finish(res->sig, res->seq, how, res->data, res->len);
        else send_blob(res->nodes[i], head, res->data, res->len);
    }
}

static void fence_part(int node, const char *sig, unsigned seq, double timeout_s, const unsigned char *data, size_t len)
{
    tprun_fence_result_t res;
    char err[256];
    int rc = tprun_fence_contribute(hub.fences, node, sig, seq, data, len,
                                    timeout_s > 0 ? tprun_now_s() + timeout_s : 0, &res, err, sizeof(err));
    if (rc < 0) {
        tp_log(TP_LOG_ERROR, "pmix", "host %d: %s; answering its fence with an error", node, err);
        char head[4200];
        snprintf(head, sizeof(head), "pF %d %u %s", TPRUN_PMIX_FENCE_PEER_FAILED, seq, sig);
        if (node == hub.local_node) tprun_pmix_fence_finish(sig, seq, TPRUN_PMIX_FENCE_PEER_FAILED, NULL, 0);
        else send_blob(node, head, NULL, 0);
        return;
    }
    if (rc == 1) {
        fence_answer(NULL, &res);
        tprun_fence_result_free(&res);
    }
    timer_update();
}

/* ---- direct modex: a host asks for a rank's data; the rank's host answers once the rank committed it ---- */

static void want_reply(const want_t *w, int found, const unsigned char *data, size_t len)
{
    char head[64];
    if (w->from_node == hub.local_node) {
        tprun_pmix_dmodex_answer(w->from_id, found, data, len);
        return;
    }
    snprintf(head, sizeof(head), "pr %u %d", w->from_id, found);
    send_blob(w->from_node, head, found ? data : NULL, found ? len : 0);
}

static void want_new(int from_node, unsigned from_id, int rank)
{
    want_t w = {.hub_id = hub.next_hub_id++,
                .from_node = from_node,
                .from_id = from_id,
                .rank = rank,
                .owner_node = rank >= 0 && rank < hub.L->job->world_size ? hub.rank_node[rank] : -1};
    /* A rank that ended normally left its data with its host's server; one that failed may never have put it. */
    if (w.owner_node < 0 ||
        (!hub.L->job->ranks[rank].running && tprun_status_failed(hub.L->job->ranks[rank].wstatus))) {
        want_reply(&w, 0, NULL, 0);
        return;
    }
    if (hub.nwants == hub.cap_wants) {
        int cap = hub.cap_wants ? hub.cap_wants * 2 : 16;
        want_t *g = realloc(hub.wants, sizeof(*g) * (size_t)cap);
        if (g == NULL) {
            want_reply(&w, 0, NULL, 0);
            return;
        }
        hub.wants = g, hub.cap_wants = cap;
    }
    hub.wants[hub.nwants++] = w;
    if (w.owner_node == hub.local_node) {
        tprun_pmix_dmodex_fetch(rank, w.hub_id);
    } else {
        char line[64];
        snprintf(line, sizeof(line), "pq %u %d\n", w.hub_id, rank);
        tprun_agent_t *a = node_agent(w.owner_node);
        if (a != NULL) tprun_agent_send(a, line);
    }
}

/* The owner's answer to hub_id: passed on to whoever asked (an answer from any other host is refused). */
static void want_done(int from_node, unsigned hub_id, int found, const unsigned char *data, size_t len)
{
    for (int i = 0; i < hub.nwants; i++) {
        if (hub.wants[i].hub_id != hub_id) continue;
        if (hub.wants[i].owner_node != from_node) break;
        want_t w = hub.wants[i];
        hub.wants[i] = hub.wants[--hub.nwants];
        want_reply(&w, found, data, len);
        return;
    }
    tp_log(TP_LOG_WARN, "pmix", "host %d answered data request %u, which it was not asked", from_node, hub_id);
}

/* Requests whose rank (or whose owner host, rank -1 with node) is gone are answered "not found". */
static void wants_fail(int rank, int node)
{
    for (int i = 0; i < hub.nwants;) {
        if (hub.wants[i].rank == rank || hub.wants[i].owner_node == node) {
            want_t w = hub.wants[i];
            hub.wants[i] = hub.wants[--hub.nwants];
            want_reply(&w, 0, NULL, 0);
        } else {
            i++;
        }
    }
}

/* ---- aborts and deaths ---- */

static int rank_index(const tprun_job_t *job, int id)
{
    for (int i = 0; i < job->np; i++)
        if (job->ranks[i].id == id) return i;
    return -1;
}

/* The job's first failure, unless one was already decided: its status is tprun's (1 when it fits no exit code). */
static void on_abort(tprun_loop_t *L, int rank, int status, const char *msg)
{
    int r = rank_index(L->job, rank);
    if (r < 0 || L->first_failure >= 0 || L->timed_out || L->launch_failed) return;
    L->first_failure = r;
    L->exit_status = status > 0 && status < 256 ? status : 1;
    const char *host =
        L->agents != NULL && L->job->ranks[r].agent >= 0 ? L->agents->a[L->job->ranks[r].agent].name : L->job->host;
    tprun_say("rank %d (host %s, pid %d) called PMIx_Abort(status %d): %s", rank, host, (int)L->job->ranks[r].pid,
              status, msg);
    hub.notify_deadline = 0;
    timer_update();
    tprun_loop_teardown(L);
}

static void host_notified(void)
{
    if (hub.notify_deadline == 0 || hub.notify_owed <= 0) return;
    if (--hub.notify_owed == 0) {
        hub.notify_deadline = tprun_now_s() + TPRUN_PMIX_EVENT_WINDOW_S;
        timer_update();
    }
}

void tprun_pmix_rank_ended(tprun_loop_t *L, int r)
{
    if (hub.fences == NULL) return;
    tprun_fence_fail_rank(hub.fences, L->job->ranks[r].id, fence_answer, NULL);
    if (tprun_status_failed(L->job->ranks[r].wstatus)) wants_fail(L->job->ranks[r].id, -1);
}

int tprun_pmix_rank_failed(tprun_loop_t *L, int r)
{
    tprun_rank_t *rank = &L->job->ranks[r];
    /* A rank tprun itself signalled is part of a teardown already under way. */
    if (rank->ended_by != 0) return 0;
    hub.notify_owed = 0;
    char line[32];
    snprintf(line, sizeof(line), "pn %d\n", rank->id);
    for (int n = 0; n < hub.num_nodes; n++) {
        if (n == hub.local_node) {
            hub.notify_owed += tprun_pmix_notify_aborted(rank->id) == TP_OK;
        } else {
            tprun_agent_t *a = node_agent(n);
            if (a == NULL || a->state != AGENT_RUNNING || a->link.out_fd < 0) continue;
            tprun_agent_send(a, line);
            hub.notify_owed++;
        }
    }
    if (hub.notify_owed == 0) return 0;
    hub.notify_deadline = tprun_now_s() + TPRUN_PMIX_NOTIFY_LIMIT_S;
    timer_update();
    return 1;
}

void tprun_pmix_agent_gone(tprun_loop_t *L, int ai)
{
    (void)L;
    for (int n = 0; n < hub.num_nodes; n++) {
        if (hub.node_agent == NULL || hub.node_agent[n] != ai) continue;
        wants_fail(-2, n);
        host_notified(); /* it will not confirm: do not wait for it */
    }
}

/* ---- the loop's entry points ---- */

static void abort_event(void *ctx, tprun_pmix_event_t *ev) { on_abort(ctx, ev->rank, ev->status, ev->msg); }

void tprun_pmix_on_ready(tprun_loop_t *L)
{
    size_t n;
    tprun_pmix_event_t *evs = tprun_pmix_take_events(abort_event, L, &n);
    if (n > 0) {
        tprun_wait_exiting(L->job);
        tprun_evloop_reap(L->ev);
    }
    for (size_t i = 0; i < n; i++) {
        tprun_pmix_event_t *e = &evs[i];
        switch (e->kind) {
        case TPRUN_PMIX_NOTIFIED: host_notified(); break;
        case TPRUN_PMIX_FENCE: fence_part(hub.local_node, e->sig, e->seq, e->timeout_s, e->data, e->len); break;
        case TPRUN_PMIX_DMODEX_WANT: want_new(hub.local_node, e->id, e->rank); break;
        case TPRUN_PMIX_DMODEX_DATA: want_done(hub.local_node, e->id, e->status == 0, e->data, e->len); break;
        case TPRUN_PMIX_ABORT: break;
        }
        tprun_pmix_event_free(e);
    }
    free(evs);
    if (!tprun_pmix_timer_fired()) return;
    double now = tprun_now_s();
    tprun_fence_expire(hub.fences, now, fence_answer, NULL);
    if (hub.notify_deadline > 0 && now >= hub.notify_deadline) {
        hub.notify_deadline = 0;
        tprun_loop_teardown(L);
    }
    timer_update();
}

/* One PMIx message from agent ai (whose ranks live on one node): "pa", "pf", "pq", "pr" or "pn". */
int tprun_pmix_agent_line(tprun_loop_t *L, int ai, char *line)
{
    int node = -1;
    for (int n = 0; n < hub.num_nodes && hub.node_agent != NULL; n++)
        if (hub.node_agent[n] == ai) node = n;
    if (!L->plan->pmix || node < 0 || line[0] != 'p') return 0;
    char sig[4100];
    unsigned seq, id;
    int a, b, used = 0;
    unsigned char *data = NULL;
    size_t len = 0;
    if (sscanf(line, "pa %d %d %n", &a, &b, &used) == 2 && used > 0) {
        tprun_wire_unescape(line + used);
        if (a >= 0 && a < L->job->np && L->job->ranks[a].agent == ai) on_abort(L, a, b, line + used);
        return 1;
    }
    if (sscanf(line, "pf %u %d %4095s %n", &seq, &a, sig, &used) == 3 && used > 0 &&
        tprun_wire_b64_decode(line + used, &data, &len) == 0) {
        fence_part(node, sig, seq, a / 1000.0, data, len);
    } else if (sscanf(line, "pq %u %d", &id, &a) == 2) {
        want_new(node, id, a);
    } else if (sscanf(line, "pr %u %d %n", &id, &a, &used) == 2 && used > 0 &&
               tprun_wire_b64_decode(line + used, &data, &len) == 0) {
        want_done(node, id, a, data, len);
    } else if (strcmp(line, "pn") == 0) {
        host_notified();
    } else {
        return 0;
    }
    free(data);
    return 1;
}

void tprun_pmix_stop(void)
{
    tprun_pmix_server_stop();
    tprun_fence_table_destroy(hub.fences);
    hub.fences = NULL;
    free(hub.rank_node);
    free(hub.node_agent);
    free(hub.names);
    hub.names = NULL;
    free(hub.wants);
    hub.rank_node = hub.node_agent = NULL;
    hub.wants = NULL;
    hub.nwants = hub.cap_wants = 0;
}
