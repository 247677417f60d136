/* agent/agent.c: `tprun --agent`, started over ssh: runs one host's ranks (through the local backend) and dies
 * with the job's channel. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_tree.h"
#include "link/link.h"
#include "local/local.h"
#include "runtime_config.h"
#include "runtime_iface.h"
#include "runtime_log.h"
#include "services.h"
#include "slurm/slurm.h"
#include "tprun_exit.h"
#include "tprun_spawn.h"
#include "tprun_wire.h"

typedef struct agent {
    tprun_plan_t plan;
    tprun_job_t job;
    char **args;
    size_t nargs;
    tprun_evloop_t *ev;
    int running;
    int go;
    int lost;               /* the channel to tprun closed or broke: kill everything */
    tprun_link_t link;      /* tprun's commands, to their owners (its messages go out with send_line) */
    tprun_local_t local;    /* starts, reaps and kills this host's ranks */
    tprun_stream_t channel; /* stdin: the plan's remainder and commands */
    tprun_prefix_t *err_prefix;
    char boot_addr[320];
    /* rank 0's stdin, from tprun: bytes received and not yet written into its pipe */
    int stdin_on;
    unsigned char *in_buf;
    size_t in_len, in_cap;
    int in_eof;        /* tprun sent the end of input */
    tprun_ev_t *in_ev; /* the pipe waits for room */
    tprun_subtree_t tree; /* the agents this one starts (a launch tree), and the way down to theirs */
} agent_t;

static agent_t G;

static void rank_done(void *owner, int i, int wstatus);
static void agent_routes(agent_t *A);

static void send_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void send_line(const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    tp_log_write_all(STDOUT_FILENO, line, (size_t)n);
}

/* Refuses the launch with one message that tprun prints naming this host. */
static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...)
{
    char msg[1024], esc[3 * sizeof(msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tprun_wire_escape(msg, esc);
    send_line("error %s", esc);
    return TPRUN_EXIT_LAUNCH;
}

/* Reads the plan (blocking: nothing runs yet) up to its "end" line; a plan over the limit is refused. */
static int read_plan(agent_t *A, char **buf_out)
{
    size_t cap = 65536, len = 0, scanned = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        /* Only the bytes not yet searched are searched (with 5 before them: the marker may span two reads). */
        size_t from = scanned > 5 ? scanned - 5 : 0;
        char *end = len > scanned ? memmem(buf + from, len - from, "\nend \n", 6) : NULL;
        scanned = len;
        if (end != NULL || (len >= 5 && strncmp(buf, "end \n", 5) == 0)) {
            /* Bytes after the plan ("go ...") stay for the channel reader, in a buffer that holds them all. */
            size_t used = end != NULL ? (size_t)(end - buf) + 6 : 5;
            A->channel.cap = len - used + 65536;
            A->channel.buf = malloc(A->channel.cap);
            if (A->channel.buf == NULL) break;
            memcpy(A->channel.buf, buf + used, len - used);
            A->channel.len = len - used;
            buf[used] = '\0';
            *buf_out = buf;
            return 0;
        }
        if (len >= TPRUN_AGENT_PLAN_MAX) {
            free(buf);
            return refuse("the plan from tprun is over %d bytes without its end (too many arguments or -x values?)",
                          TPRUN_AGENT_PLAN_MAX);
        }
        if (len + 4096 >= cap) {
            char *b = realloc(buf, cap *= 2);
            if (b == NULL) break;
            buf = b;
        }
        size_t room = cap - len - 1;
        if (room > TPRUN_AGENT_PLAN_MAX + 1 - len) room = TPRUN_AGENT_PLAN_MAX + 1 - len;
        ssize_t n = read(STDIN_FILENO, buf + len, room);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = '\0';
    }
    free(buf);
    return -1;
}

static int apply_plan(agent_t *A, char *text)
{
    tprun_plan_t *P = &A->plan;
    tprun_job_t *J = &A->job;
    int *ids = NULL, nids = 0, saw_hello = 0, service_line, tree_line;
    char *wdir = NULL;
    P->torch_env = 1;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');
        if (sp == NULL) return refuse("bad plan line \"%.60s\"", line);
        *sp = '\0';
        char *v = sp + 1;
        tprun_wire_unescape(v);
        if (strcmp(line, "hello") == 0) {
            if (strcmp(v, TPRUN_AGENT_HELLO) != 0)
                return refuse("this host's tprun speaks \"%s\", tprun sent \"%s\"", TPRUN_AGENT_HELLO, v);
            saw_hello = 1;
        } else if (strcmp(line, "host") == 0) {
            snprintf(J->host, sizeof(J->host), "%s", v);
            J->host_var = J->host;
        } else if (strcmp(line, "node") == 0) {
            J->node_rank = atoi(v);
        } else if (strcmp(line, "world") == 0) {
            J->world_size = P->np = atoi(v);
        } else if (strcmp(line, "job") == 0) {
            snprintf(J->job_id, sizeof(J->job_id), "%s", v);
        } else if (strcmp(line, "key") == 0) {
            snprintf(J->job_key, sizeof(J->job_key), "%s", v);
        } else if (strcmp(line, "torch") == 0) {
            P->torch_env = atoi(v);
        } else if (strcmp(line, "stdin") == 0) {
            A->stdin_on = atoi(v);
        } else if (strcmp(line, "report") == 0) {
            P->report_bindings = atoi(v);
        } else if (strcmp(line, "prog") == 0) {
            P->program_path = strdup(v);
        } else if (strcmp(line, "wdir") == 0) {
            wdir = v;
        } else if (strcmp(line, "rank") == 0) {
            int *g = realloc(ids, sizeof(int) * (size_t)(nids + 1));
            if (g == NULL) return refuse("out of memory");
            ids = g;
            ids[nids++] = atoi(v);
        } else if (strcmp(line, "arg") == 0) {
            char **g = realloc(A->args, sizeof(char *) * (A->nargs + 2));
            if (g == NULL) return refuse("out of memory");
            A->args = g;
            A->args[A->nargs++] = strdup(v);
            A->args[A->nargs] = NULL;
        } else if (strcmp(line, "env") == 0) {
            char *eq = strchr(v, '=');
            if (eq == NULL) return refuse("bad variable in the plan");
            *eq = '\0';
            setenv(v, eq + 1, 1);
        } else if ((tree_line = tprun_subtree_plan_line(&A->tree, line, v)) != 0) { /* "child ...", "via ..." */
            if (tree_line < 0) return refuse("bad tree line \"%.60s %.60s\" in the plan (or out of memory)", line, v);
        } else if ((service_line = tprun_services_agent_plan_line(P, line, v)) != 0) { /* "pmix ...", "slurm" */
            if (service_line < 0) return refuse("out of memory");
        } else if (strcmp(line, "end") != 0) {
            return refuse("unknown plan line \"%.60s\"", line);
        }
    }
    if (!saw_hello || nids == 0 || P->program_path == NULL || A->args == NULL || J->job_key[0] == '\0')
        return refuse("incomplete plan from tprun");
    int level = tp_log_level_parse(tp_config_value("TP_LOG_LEVEL"));
    if (level >= 0) tp_log_set_level((tp_log_level_t)level);
    if (wdir != NULL && chdir(wdir) != 0)
        return refuse("cannot enter the working directory %s: %s", wdir, strerror(errno));
    char err[512], *found = NULL;
    if (tprun_find_program(P->program_path, NULL, &found, err, sizeof(err)) != TP_OK) return refuse("%s", err);
    free(found);
    P->argv = A->args;
    P->grace_s = 1;
    J->np = J->local_size = nids;
    J->ranks = calloc((size_t)nids, sizeof(*J->ranks));
    A->err_prefix = calloc((size_t)nids, sizeof(*A->err_prefix));
    if (J->ranks == NULL || A->err_prefix == NULL) return refuse("out of memory");
    J->boot_index = J->stdin_index = -1;
    for (int i = 0; i < nids; i++) {
        J->ranks[i].id = ids[i];
        J->ranks[i].local_rank = i;
        J->ranks[i].agent = -1;
        if (ids[i] == 0) J->boot_index = i, J->listen = 1;
    }
    if (A->stdin_on && J->boot_index >= 0) J->stdin_index = J->boot_index, J->stdin_forwarded = 1;
    tprun_local_init(&A->local, NULL, J, rank_done, A); /* its loop comes with the agent's run */
    agent_routes(A);
    A->local.err_prefix = A->err_prefix;
    free(ids);
    return 0;
}

/* Where peers reach this host: its end of the ssh connection, else the interface TP_IFNAME names. */
static void own_addresses(char *server_ip, size_t slen, char *client_ip, size_t clen)
{
    const char *conn = getenv("SSH_CONNECTION"); /* "client_ip client_port server_ip server_port" */
    char c[64] = "", sport[16], s[64] = "";
    if (conn == NULL || sscanf(conn, "%63s %15s %63s", c, sport, s) != 3) s[0] = c[0] = '\0';
    snprintf(client_ip, clen, "%s", c[0] ? c : "-");
    snprintf(server_ip, slen, "%s", s[0] ? s : "127.0.0.1");
}

static void kill_all(agent_t *A, int sig) { tprun_local_signal(&A->local, sig); }

/* Writes what tprun sent into rank 0's stdin, acknowledges it ("ia N"), and closes the pipe at the end of input.
 * A rank 0 that stopped reading (EPIPE) makes the agent say "ie": tprun stops sending. */
static void on_stdin_room(void *arg, unsigned revents);

static void stdin_flush(agent_t *A)
{
    int fd = A->job.stdin_pipe[1];
    size_t done = 0;
    while (fd >= 0 && done < A->in_len) {
        ssize_t w = write(fd, A->in_buf + done, A->in_len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) break;
        if (w < 0) { /* rank 0 closed its stdin or ended: drop the rest */
            tprun_ev_remove(A->in_ev);
            A->in_ev = NULL;
            close(fd);
            A->job.stdin_pipe[1] = fd = -1;
            send_line("ie");
            done = A->in_len;
            break;
        }
        done += (size_t)w;
    }
    if (done > 0) {
        memmove(A->in_buf, A->in_buf + done, A->in_len - done);
        A->in_len -= done;
        if (fd >= 0) send_line("ia %zu", done);
    }
    if (fd < 0) return;
    if (A->in_len == 0 && A->in_eof) {
        tprun_ev_remove(A->in_ev);
        A->in_ev = NULL;
        close(fd);
        A->job.stdin_pipe[1] = -1;
        return;
    }
    if (A->in_len > 0 && A->in_ev == NULL) {
        A->in_ev = tprun_ev_fd(A->ev, fd, EPOLLOUT, 0, on_stdin_room, A);
    } else if (A->in_len == 0 && A->in_ev != NULL) {
        tprun_ev_remove(A->in_ev);
        A->in_ev = NULL;
    }
}

static void on_stdin_room(void *arg, unsigned revents) { (void)revents, stdin_flush(arg); }

/* "i DATA" (base64) or "ie": rank 0's stdin from tprun. */
static void on_stdin_line(agent_t *A, char *line)
{
    if (strcmp(line, "ie") == 0) {
        A->in_eof = 1;
    } else {
        unsigned char *data = NULL;
        size_t len = 0;
        if (tprun_wire_b64_decode(line + 2, &data, &len) != 0) {
            tp_log(TP_LOG_WARN, "agent", "stdin from tprun that is not base64: dropped");
            return;
        }
        if (A->in_len + len > A->in_cap) {
            size_t cap = (A->in_len + len) * 2;
            unsigned char *g = realloc(A->in_buf, cap);
            if (g == NULL) {
                free(data);
                return;
            }
            A->in_buf = g, A->in_cap = cap;
        }
        if (len > 0) memcpy(A->in_buf + A->in_len, data, len);
        A->in_len += len;
        free(data);
    }
    if (A->go) stdin_flush(A); /* before the ranks start, it waits in the buffer */
}

/* "go IP:PORT MASTER_PORT": start the ranks. */
static int on_go(void *arg, char *msg, size_t len)
{
    agent_t *A = arg;
    (void)len;
    if (strncmp(msg, "go ", 3) != 0 || A->go) return 0;
    snprintf(A->boot_addr, sizeof(A->boot_addr), "%s", msg + 3);
    A->go = 1;
    return 1;
}

/* "k SIG": to every rank. */
static int on_kill(void *arg, char *msg, size_t len)
{
    int sig;
    (void)len;
    if (sscanf(msg, "k %d", &sig) != 1 || sig <= 0 || sig >= 65) return 0;
    kill_all(arg, sig);
    return 1;
}

/* "i DATA", "ie": rank 0's stdin, when it is this host's. */
static int on_stdin(void *arg, char *msg, size_t len)
{
    agent_t *A = arg;
    (void)len;
    if (!A->stdin_on || (strcmp(msg, "ie") != 0 && strncmp(msg, "i ", 2) != 0)) return 0;
    on_stdin_line(A, msg);
    return 1;
}

/* A service's command (PMIx's "p..."). */
static int on_service(void *arg, char *msg, size_t len)
{
    return (void)arg, (void)len, tprun_services_agent_command(msg);
}

/* Who takes tprun's commands. */
static void agent_routes(agent_t *A)
{
    tprun_link_init(&A->link, NULL, "tprun", -1);
    tprun_link_route(&A->link, 'g', on_go, A);
    tprun_link_route(&A->link, 'k', on_kill, A);
    tprun_link_route(&A->link, 'i', on_stdin, A);
    tprun_link_route(&A->link, 'c', tprun_subtree_route, &A->tree); /* to an agent below this one */
    for (const char *t = tprun_services_msg_types(); *t != '\0'; t++) tprun_link_route(&A->link, *t, on_service, A);
}

static void on_command(void *ctx, char *line, size_t len)
{
    agent_t *A = ctx;
    if (!tprun_link_dispatch(&A->link, line, len)) {
        tp_log(TP_LOG_WARN, "agent", "unexpected command from tprun: \"%.100s\"", line);
    }
}

/* A rank's end, reported to tprun with the OOM killer's part in it. */
static void rank_done(void *owner, int i, int wstatus)
{
    agent_t *A = owner;
    tprun_rank_t *r = &A->job.ranks[i];
    r->running = 0;
    A->running--;
    tprun_local_drain(&A->local, i);
    send_line("x %d %d %d %d", r->id, wstatus, r->exec_errno, r->oom);
}

static void on_keeper_child(void *arg, pid_t pid, int wstatus)
{
    agent_t *A = arg;
    (void)pid, (void)wstatus;
    A->job.keeper.pid = 0;
}

/* Before the PMIx server's events: the ranks already dying are reported first. */
static void reap_dying(void *ctx)
{
    agent_t *A = ctx;
    tprun_wait_exiting(&A->job);
    tprun_evloop_reap(A->ev);
}

static int start_ranks(agent_t *A)
{
    tprun_job_t *J = &A->job;
    if (!J->listen) { /* "IP:PORT MASTER_PORT" */
        char *space = strchr(A->boot_addr, ' ');
        if (space == NULL) return -1;
        *space = '\0';
        const char *colon = strrchr(A->boot_addr, ':');
        if (colon == NULL || colon - A->boot_addr >= (long)sizeof(J->boot_ip)) return -1;
        snprintf(J->boot_ip, sizeof(J->boot_ip), "%.*s", (int)(colon - A->boot_addr), A->boot_addr);
        J->boot_port = atoi(colon + 1);
        J->master_port = atoi(space + 1);
    }
    if (tprun_job_build_envs(J, environ) != TP_OK || tprun_services_rank_envs(J) != TP_OK) return -1;
    for (int i = 0; i < J->np; i++) {
        tprun_rank_t *r = &J->ranks[i];
        if (tprun_local_start(&A->local, i) != TP_OK) return -1;
        A->running++;
        send_line("s %d %d", r->id, (int)r->pid);
    }
    if (A->stdin_on) stdin_flush(A); /* what tprun sent before "go" */
    return 0;
}

/* tprun's commands; its end (tprun, its ssh or this host's link is gone) ends everything. */
static void on_channel(void *arg, unsigned revents)
{
    agent_t *A = arg;
    int was_go = A->go;
    (void)revents;
    if (tprun_stream_pump(&A->channel, &(tprun_prefix_t){"", 0}) == 0) {
        A->lost = 1;
        tprun_evloop_stop(A->ev);
        return;
    }
    if (A->go && !was_go && start_ranks(A) != 0) {
        tp_log(TP_LOG_ERROR, "agent", "host %s: could not start every rank; ending those started", A->job.host);
        kill_all(A, SIGKILL);
    }
}

/* Fences, data requests and aborts to tprun (PMIx hook). */

/* SIGTERM, SIGHUP or SIGINT to the agent: end the ranks. */
static void on_signal(void *arg, int sig)
{
    agent_t *A = arg;
    (void)sig;
    A->lost = 1;
    tprun_evloop_stop(A->ev);
}

static void loop(agent_t *A)
{
    /* A service may stay until tprun ends the job: under --pmix ranks on other hosts may still want this host's
     * ranks' data after they ended. */
    while (!A->lost && (!A->go || A->running > 0 || A->tree.open > 0 || tprun_services_agent_keeps()))
        if (tprun_evloop_run_once(A->ev, -1) != 0) break;
}

static int agent_run(void)
{
    agent_t *A = &G;
    memset(A, 0, sizeof(*A));
    tp_log_set_program("tprun-agent");
    A->job.keeper.fd = -1;
    tprun_stream_init(&A->channel, STDIN_FILENO, -1);
    signal(SIGPIPE, SIG_IGN); /* a write to a closed channel fails with EPIPE: the job is over */
    char *text = NULL;
    int got = read_plan(A, &text);
    if (got != 0) return got > 0 ? got : TPRUN_EXIT_LAUNCH; /* tprun went away before sending it */
    int st = apply_plan(A, text);
    free(text);
    if (st != 0) return st;
    snprintf(A->job.boot_ip, sizeof(A->job.boot_ip), "127.0.0.1");
    char server_ip[64], client_ip[64];
    own_addresses(server_ip, sizeof(server_ip), client_ip, sizeof(client_ip));
    if (A->plan.slurm && A->job.world_size > A->job.np) tprun_slurm_node_ip(server_ip, sizeof(server_ip)); /* srun */
    if (A->job.listen) {
        /* Rank 0 listens on every interface; the ranks try them in turn: TP_IFNAME's (in order), else the one ssh
         * reached first. A dead interface then costs a fallback, not the job. */
        const char *spec = tp_config_value("TP_IFNAME");
        if (tp_iface_boot_ips(spec, server_ip, A->job.boot_ip, sizeof(A->job.boot_ip)) != TP_OK)
            return refuse("TP_IFNAME=\"%s\": no IPv4 interface of this host matches", spec);
        A->job.boot_bind = "0.0.0.0";
    }
    A->job.reset_sigpipe = 1;
    A->job.defer_envs = 1;
    A->ev = tprun_evloop_create();
    if (A->ev == NULL) return refuse("cannot create a signalfd or epoll: %s", strerror(errno));
    A->job.child_mask = *tprun_evloop_child_mask(A->ev);
    A->local.ev = A->ev;
    static const int ending[] = {SIGTERM, SIGHUP, SIGINT};
    for (size_t i = 0; i < sizeof(ending) / sizeof(ending[0]); i++)
        if (tprun_ev_signal(A->ev, ending[i], on_signal, A) == NULL)
            return refuse("cannot create a signalfd or epoll: %s", strerror(errno));
    char err[1024];
    if (tprun_services_agent_prepare(err, sizeof(err)) != 0) return refuse("%s", err); /* job starting */
    if (tprun_keeper_start(&A->job.keeper, A->job.np + A->tree.n, tprun_services_keeper_cleanup) != TP_OK)
        return refuse("cannot start the keeper");
    tprun_ev_child(A->ev, A->job.keeper.pid, 0, on_keeper_child, A);
    /* The agents below this one start now, beside this host's preparation; they die with it (and its keeper). */
    if (tprun_subtree_start(&A->tree, A->ev, &A->job.keeper, &A->job.child_mask, A->job.host, err, sizeof(err)) != 0) {
        tprun_services_job_over();
        tprun_keeper_finish(&A->job.keeper);
        return refuse("%s", err);
    }
    A->job.child_exec = tprun_services_child_exec;
    if (tprun_job_prepare(&A->job, &A->plan, environ) != TP_OK) {
        tprun_services_job_over();
        tprun_keeper_finish(&A->job.keeper);
        return refuse("cannot prepare the ranks (see the message above)");
    }
    if (tprun_services_agent_start(&A->job, err, sizeof(err)) != TP_OK) {
        tprun_services_job_over();
        tprun_keeper_finish(&A->job.keeper);
        return refuse("%s", err);
    }
    for (int i = 0; i < A->job.np; i++) {
        int id = A->job.ranks[i].id;
        A->job.ranks[i].prefix.len =
            (size_t)snprintf(A->job.ranks[i].prefix.text, sizeof(A->job.ranks[i].prefix.text), "o %d ", id);
        A->err_prefix[i].len = (size_t)snprintf(A->err_prefix[i].text, sizeof(A->err_prefix[i].text), "e %d ", id);
        A->job.ranks[i].err.out_fd = STDOUT_FILENO; /* both streams travel on the channel, tagged o or e */
    }
    fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
    A->channel.on_line = on_command;
    A->channel.ctx = A;
    if (tprun_ev_fd(A->ev, STDIN_FILENO, EPOLLIN, 0, on_channel, A) == NULL) { /* a regular file: never read again */
        int why = errno;
        tprun_services_job_over();
        tprun_keeper_finish(&A->job.keeper);
        return refuse("cannot watch the channel from tprun on stdin: %s", strerror(why));
    }
    tprun_services_agent_watch(A->ev, reap_dying, A);
    send_line("ready %s %d %s %d", A->job.listen ? A->job.boot_ip : server_ip, A->job.boot_port, client_ip,
              A->job.master_port);
    /* Commands sent right behind the plan were read with it: handle them before waiting for more. */
    char *nl;
    while (!A->go && A->channel.len > 0 && (nl = memchr(A->channel.buf, '\n', A->channel.len)) != NULL) {
        size_t l = (size_t)(nl - A->channel.buf) + 1;
        on_command(A, A->channel.buf, l);
        memmove(A->channel.buf, A->channel.buf + l, A->channel.len - l);
        A->channel.len -= l;
    }
    if (A->go && start_ranks(A) != 0) kill_all(A, SIGKILL);
    loop(A);
    if (A->lost) {
        /* The job's channel is gone: nothing may outlive it, on this host or below it. */
        kill_all(A, SIGKILL);
        tprun_subtree_close(&A->tree);
        tprun_local_wait_all(&A->local);
        tprun_services_job_over();
        tprun_keeper_finish(&A->job.keeper);
        return 1;
    }
    send_line("bye");
    tprun_services_job_over();
    tprun_keeper_finish(&A->job.keeper);
    return 0;
}

int tprun_agent_main(void)
{
    int status = agent_run();
    tprun_services_job_over(); /* a refusal after the PMIx tmpdir was made leaves nothing behind */
    return status;
}
