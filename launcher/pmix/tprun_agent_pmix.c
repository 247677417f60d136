/* tprun_agent_pmix.c: an agent's PMIx server (tprun --pmix across hosts): its ranks' fences, data requests and
 * aborts go to tprun over the channel; tprun's answers and death notifications come back the same way. */
#include "tprun_agent_pmix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_log.h"
#include "tprun_pmix.h"
#include "tprun_wire.h"

static struct {
    int on;
    char *hosts; /* node names, comma-separated, in node order */
    char *map;   /* each rank's node, comma-separated */
} ap;

int tprun_agent_pmix_plan(const char *key, const char *value)
{
    char **slot = strcmp(key, "pmixhosts") == 0 ? &ap.hosts : strcmp(key, "pmixmap") == 0 ? &ap.map : NULL;
    if (strcmp(key, "pmix") == 0) {
        ap.on = atoi(value) != 0;
        return 1;
    }
    if (slot == NULL) return 0;
    free(*slot);
    *slot = strdup(value);
    return *slot != NULL ? 1 : -1;
}

int tprun_agent_pmix_on(void) { return ap.on; }

int tprun_agent_pmix_prepare(char *err, size_t err_len)
{
    if (!ap.on) return 0;
    if (ap.hosts == NULL || ap.map == NULL) {
        snprintf(err, err_len, "incomplete plan from tprun: --pmix without the job's hosts and rank map");
        return -1;
    }
    if (tprun_pmix_load(err, err_len) != TP_OK) return -1;
    if (tprun_pmix_tmpdir_create() != TP_OK) {
        snprintf(err, err_len, "--pmix: cannot create the server's directory (see the message above)");
        return -1;
    }
    return 0;
}

/* Splits "a,b,c" in place; returns the count and fills out (malloc'd array of pointers into s). */
static int split_csv(char *s, char ***out)
{
    int n = 1;
    for (char *c = s; *c; c++) n += *c == ',';
    char **v = malloc(sizeof(char *) * (size_t)n);
    if (v == NULL) return -1;
    int k = 0;
    for (char *tok = s, *next; tok != NULL; tok = next) {
        next = strchr(tok, ',');
        if (next != NULL) *next++ = '\0';
        v[k++] = tok;
    }
    *out = v;
    return k;
}

tp_status_t tprun_agent_pmix_start(const tprun_job_t *J, char *err, size_t err_len)
{
    if (!ap.on) return TP_OK;
    char **names = NULL, **nodes = NULL, nspace[256];
    int *rank_node = malloc(sizeof(int) * (size_t)J->world_size);
    int nhosts = split_csv(ap.hosts, &names), nmap = split_csv(ap.map, &nodes);
    tp_status_t st = TP_ERR_INVALID;
    if (rank_node == NULL || nhosts < 1 || nmap != J->world_size || J->node_rank < 0 || J->node_rank >= nhosts) {
        snprintf(err, err_len, "bad PMIx job description from tprun: %d hosts, %d of %d ranks mapped, this is host %d",
                 nhosts, nmap, J->world_size, J->node_rank);
        goto out;
    }
    for (int r = 0; r < nmap; r++) {
        char *end;
        long v = strtol(nodes[r], &end, 10);
        if (*end != '\0' || end == nodes[r] || v < 0 || v >= nhosts) {
            snprintf(err, err_len, "bad PMIx rank map from tprun: rank %d on host \"%.20s\"", r, nodes[r]);
            goto out;
        }
        rank_node[r] = (int)v;
    }
    tprun_pmix_nspace(J->job_id, nspace, sizeof(nspace));
    tprun_pmix_job_t pj = {.nspace = nspace,
                           .world_size = J->world_size,
                           .num_hosts = nhosts,
                           .hosts = (const char *const *)names,
                           .rank_host = rank_node,
                           .this_host = J->node_rank};
    st = tprun_pmix_server_start(&pj);
    if (st != TP_OK) snprintf(err, err_len, "--pmix: could not start the PMIx server on this host");
out:
    free(names);
    free(nodes);
    free(rank_node);
    return st;
}

tp_status_t tprun_agent_pmix_envs(tprun_job_t *J)
{
    for (int i = 0; ap.on && i < J->np; i++)
        if (tprun_pmix_rank_env(J->ranks[i].id, J->envp[i], &J->envp[i]) != TP_OK) return TP_ERR_SYSTEM;
    return TP_OK;
}

int tprun_agent_pmix_fd(void) { return ap.on ? tprun_pmix_event_fd() : -1; }

/* "HEAD B64\n" on the channel in one write. */
static void send_blob(const char *head, const unsigned char *data, size_t len)
{
    size_t n;
    char *line = tprun_wire_b64_line(head, data, len, &n);
    if (line == NULL) {
        tp_log(TP_LOG_ERROR, "pmix", "out of memory sending \"%s\" to tprun", head);
        return;
    }
    tp_log_write_all(STDOUT_FILENO, line, n);
    free(line);
}

static void forward(tprun_pmix_event_t *ev)
{
    char head[4200];
    if (ev->kind == TPRUN_PMIX_ABORT) {
        char esc[3 * sizeof(ev->msg)];
        tprun_wire_escape(ev->msg, esc);
        char line[sizeof(esc) + 64];
        int n = snprintf(line, sizeof(line), "pa %d %d %s\n", ev->rank, ev->status, esc);
        tp_log_write_all(STDOUT_FILENO, line, (size_t)n);
    } else if (ev->kind == TPRUN_PMIX_NOTIFIED) {
        tp_log_write_all(STDOUT_FILENO, "pn\n", 3);
    } else if (ev->kind == TPRUN_PMIX_FENCE) {
        snprintf(head, sizeof(head), "pf %u %d %s", ev->seq, (int)(ev->timeout_s * 1000), ev->sig);
        send_blob(head, ev->data, ev->len);
    } else if (ev->kind == TPRUN_PMIX_DMODEX_WANT) {
        int n = snprintf(head, sizeof(head), "pq %u %d\n", ev->id, ev->rank);
        tp_log_write_all(STDOUT_FILENO, head, (size_t)n);
    } else if (ev->kind == TPRUN_PMIX_DMODEX_DATA) {
        snprintf(head, sizeof(head), "pr %u %d", ev->id, ev->status == 0);
        send_blob(head, ev->data, ev->len);
    }
}

static void forward_abort(void *ctx, tprun_pmix_event_t *ev)
{
    (void)ctx;
    forward(ev);
}

void tprun_agent_pmix_on_ready(void (*reap)(void *ctx), void *ctx)
{
    size_t n;
    tprun_pmix_event_t *evs = tprun_pmix_take_events(forward_abort, NULL, &n);
    if (n > 0) reap(ctx);
    for (size_t i = 0; i < n; i++) {
        forward(&evs[i]);
        tprun_pmix_event_free(&evs[i]);
    }
    free(evs);
    tprun_pmix_timer_fired();
}

int tprun_agent_pmix_command(char *line)
{
    if (!ap.on || line[0] != 'p') return 0;
    char sig[4100];
    unsigned seq, id;
    int a, b, used = 0;
    unsigned char *data = NULL;
    size_t len = 0;
    if (sscanf(line, "pF %d %u %4095s %n", &a, &seq, sig, &used) == 3 && used > 0 &&
        tprun_wire_b64_decode(line + used, &data, &len) == 0) {
        tprun_pmix_fence_finish(sig, seq, a, data, len);
    } else if (sscanf(line, "pq %u %d", &id, &a) == 2) {
        tprun_pmix_dmodex_fetch(a, id);
    } else if (sscanf(line, "pr %u %d %n", &id, &b, &used) == 2 && used > 0 &&
               tprun_wire_b64_decode(line + used, &data, &len) == 0) {
        tprun_pmix_dmodex_answer(id, b, data, len);
    } else if (sscanf(line, "pn %d", &a) == 1) {
        /* Not confirmed at all when the notification cannot go out: tprun's limit then ends the wait. */
        if (tprun_pmix_notify_aborted(a) != TP_OK) tp_log_write_all(STDOUT_FILENO, "pn\n", 3);
    } else {
        return 0;
    }
    free(data);
    return 1;
}

void tprun_agent_pmix_stop(void)
{
    if (ap.on) tprun_pmix_server_stop();
    free(ap.hosts);
    free(ap.map);
    ap.hosts = ap.map = NULL;
}
