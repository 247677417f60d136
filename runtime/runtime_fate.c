/* runtime_fate.c: any rank's death or silence ends every rank fast, without relying on a launcher. */
#include "runtime_fate.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime_log.h"
#include "runtime_wire.h"

#define FATE_CALLBACKS_MAX 64
#define FATE_MSG_MAX 4096
#define ENDED_WITHOUT_FINALIZE "it ended without tp_finalize (the process died or exited)"

typedef struct fate_peer {
    int fd;
    int pidfd;     /* the peer's process, when it runs on this kernel: its death is seen without a relay */
    int64_t ended_at; /* its process ended and nothing says why yet: blamed if nothing does in time */
    int bye;       /* it called tp_finalize */
    int64_t last_rx;
    tp_msg_reader_t reader;
} fate_peer_t;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    struct {
        tp_fate_fn fn;
        void *arg;
    } callbacks[FATE_CALLBACKS_MAX];
    int num_callbacks;
    tp_world_t *world;
    pthread_t thread;
    int running;
    int wake_fd;
    int report_rank;          /* a failure reported by a transport, -1 when none */
    char report_reason[256];
    int finalize_requested;
    int finished;
    atomic_int dying;
    fate_peer_t *peers;
    int64_t interval_ns, timeout_ns;
} fate = {.lock = PTHREAD_MUTEX_INITIALIZER, .done_cond = PTHREAD_COND_INITIALIZER, .wake_fd = -1,
          .report_rank = -1};

tp_status_t tp_fate_register(tp_fate_fn fn, void *arg)
{
    if (fn == NULL) return TP_ERR_INVALID;
    pthread_mutex_lock(&fate.lock);
    tp_status_t s = TP_ERR_NO_MEMORY;
    if (fate.num_callbacks < FATE_CALLBACKS_MAX) {
        fate.callbacks[fate.num_callbacks].fn = fn;
        fate.callbacks[fate.num_callbacks].arg = arg;
        fate.num_callbacks++;
        s = TP_OK;
    }
    pthread_mutex_unlock(&fate.lock);
    if (s != TP_OK) tp_log(TP_LOG_ERROR, "fate", "at most %d fate callbacks can be registered", FATE_CALLBACKS_MAX);
    return s;
}

static void wake(void)
{
    uint64_t one = 1;
    if (fate.wake_fd >= 0 && write(fate.wake_fd, &one, sizeof(one)) < 0) { /* the counter is already set */
    }
}

void tp_fate_report(int world_rank, const char *reason)
{
    pthread_mutex_lock(&fate.lock);
    if (fate.report_rank < 0 && fate.running) {
        fate.report_rank = world_rank;
        snprintf(fate.report_reason, sizeof(fate.report_reason), "%s", reason);
    }
    pthread_mutex_unlock(&fate.lock);
    wake();
}

static void flush_stream(FILE *f)
{
    /* The main thread may hold the stream's lock mid-printf: flush only if it is free. */
    if (ftrylockfile(f) == 0) {
        fflush_unlocked(f);
        funlockfile(f);
    }
}

/* Ends this rank: logs the cause, runs the engine's callbacks, exits with TP_EXIT_PEER_FAILED. */
static void fate_die(const tp_failure_t *f)
{
    if (atomic_exchange(&fate.dying, 1)) return;
    int n = fate.num_callbacks;
    tp_log(TP_LOG_ERROR, "fate", "peer rank %d (host %s, pid %d) failed: %s; %s%d fate callback%s, then exiting "
           "with status %d", f->rank, f->host, (int)f->pid, f->reason, n ? "running " : "", n, n == 1 ? "" : "s",
           TP_EXIT_PEER_FAILED);
    for (int i = n - 1; i >= 0; i--) fate.callbacks[i].fn(f, fate.callbacks[i].arg);
    flush_stream(stdout);
    flush_stream(stderr);
    _exit(TP_EXIT_PEER_FAILED);
}

static void send_fail(int fd, const tp_failure_t *f)
{
    char buf[FATE_MSG_MAX];
    int n = snprintf(buf, sizeof(buf), "%d\n%d\n%s\n%s", f->rank, (int)f->pid, f->host, f->reason);
    if (n >= (int)sizeof(buf)) n = (int)sizeof(buf) - 1;
    tp_wire_send_msg(fd, TP_MSG_FAIL, buf, (size_t)n, tp_now_ns() + 100000000);
}

/*
 * Ends our side of every fate connection in order: a FIN after the FAIL just sent, and nothing left unread, so
 * exiting does not turn into a reset that would make a peer drop the FAIL before reading it.
 */
static void quiesce_connections(void)
{
    char sink[4096];
    for (int r = 0; r < fate.world->size; r++) {
        int fd = fate.peers[r].fd;
        if (fd < 0) continue;
        shutdown(fd, SHUT_WR);
        while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
        }
    }
}

/* A failure seen here: rank 0 tells everyone, another rank tells rank 0 (unless rank 0 is the one failed). */
static void fail_job(int rank, const char *reason)
{
    tp_world_t *w = fate.world;
    tp_failure_t f = {.rank = rank, .host = "", .pid = 0, .reason = reason};
    if (rank >= 0 && rank < w->size) {
        f.host = w->peers[rank].host;
        f.pid = w->peers[rank].pid;
    }
    if (w->rank == 0) {
        for (int r = 1; r < w->size; r++)
            if (r != rank && fate.peers[r].fd >= 0) send_fail(fate.peers[r].fd, &f);
    } else if (rank != 0 && fate.peers[0].fd >= 0) {
        send_fail(fate.peers[0].fd, &f);
    }
    quiesce_connections();
    fate_die(&f);
}

/* A FAIL message from a peer: rank 0 relays it to the others, then everyone dies. */
static void on_fail_msg(int from, char *payload)
{
    char *save = NULL;
    char *rank_s = strtok_r(payload, "\n", &save), *pid_s = strtok_r(NULL, "\n", &save);
    char *host = strtok_r(NULL, "\n", &save), *reason = strtok_r(NULL, "", &save);
    int rank = rank_s ? atoi(rank_s) : -1;
    if (rank < 0 || rank >= fate.world->size || reason == NULL) {
        fail_job(from, "sent a malformed failure report");
        return;
    }
    (void)pid_s;
    (void)host;
    char why[FATE_MSG_MAX + 64];
    snprintf(why, sizeof(why), "%s (reported by rank %d)", reason, from);
    fail_job(rank, from == rank || fate.world->rank != 0 ? reason : why);
}

static void broadcast(tp_msg_type_t type)
{
    tp_world_t *w = fate.world;
    for (int r = 0; r < w->size; r++)
        if (r != w->rank && fate.peers[r].fd >= 0)
            tp_wire_send_msg(fate.peers[r].fd, type, NULL, 0, tp_now_ns() + 100000000);
}

static int all_bye(int self_finalizing)
{
    tp_world_t *w = fate.world;
    if (!self_finalizing) return 0;
    for (int r = 1; r < w->size; r++)
        if (!fate.peers[r].bye) return 0;
    return 1;
}

/* How a peer process on this kernel ended, from its zombie's /proc entry; -1 once reaped or unreadable. */
static int zombie_status(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (p == NULL || p[1] != ' ' || p[2] != 'Z') return -1;
    int field = 2, status = -1;
    char *save = NULL;
    for (char *tok = strtok_r(p + 1, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save))
        if (++field == 52) status = atoi(tok); /* exit_code, as waitpid reports it */
    return status;
}

/*
 * Peer processes on this host that ended: a failure unless this rank is finalizing or they said BYE. One that
 * ended with TP_EXIT_PEER_FAILED is a consequence. One killed by SIGTERM, SIGINT or SIGHUP may be either: those
 * are what a launcher's teardown sends once it saw the real cause, and on a fast machine it can reach some ranks
 * before they hear of the cause. So may one whose status is gone (its parent reaped it). Either is blamed only if
 * nothing else explains it within the heartbeat timeout: rank 0's FAIL names the cause, and a rank killed alone
 * is named at once by rank 0, whose connection to it ends. Any other end is the cause.
 */
static int teardown_signal(int st)
{
    return WIFSIGNALED(st) && (WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGINT || WTERMSIG(st) == SIGHUP);
}

static void on_peer_exits(const struct pollfd *pfd, const int *who, int n, int finalizing, int64_t now)
{
    for (int i = 1; i < n; i++) {
        if (!pfd[i].revents || who[i] > -2) continue;
        int r = -2 - who[i];
        fate_peer_t *p = &fate.peers[r];
        int st = zombie_status(fate.world->peers[r].pid);
        close(p->pidfd);
        p->pidfd = -1;
        if (finalizing || p->bye) continue;
        if (st < 0 || teardown_signal(st)) p->ended_at = now;
        else if (!(WIFEXITED(st) && WEXITSTATUS(st) == TP_EXIT_PEER_FAILED)) fail_job(r, ENDED_WITHOUT_FINALIZE);
    }
}

/* Reads what a peer sent; returns 1 when this rank's finalize is complete. */
static int service_peer(int r, int64_t now)
{
    fate_peer_t *p = &fate.peers[r];
    char why[256], reason[320];
    for (;;) {
        tp_read_result_t rr = tp_msg_reader_step(&p->reader, p->fd, why, sizeof(why));
        if (rr == TP_READ_MORE) return 0;
        if (rr == TP_READ_EOF) {
            close(p->fd);
            p->fd = -1;
            if (p->bye) return 0; /* it finished its work and called tp_finalize */
            fail_job(r, ENDED_WITHOUT_FINALIZE);
        }
        if (rr == TP_READ_ERROR) {
            snprintf(reason, sizeof(reason), "broke the fate protocol: %s", why);
            fail_job(r, reason);
        }
        p->last_rx = now;
        switch (p->reader.header.type) {
        case TP_MSG_HEARTBEAT: break;
        case TP_MSG_BYE: p->bye = 1; break;
        case TP_MSG_BYE_ACK:
            if (r == 0 && fate.world->rank != 0) return 1;
            fail_job(r, "sent a finalize acknowledgement it may not send");
            break;
        case TP_MSG_FAIL: on_fail_msg(r, p->reader.payload); break;
        default: fail_job(r, "sent a message that does not belong to the fate protocol");
        }
        tp_msg_reader_reset(&p->reader);
    }
}

static void *fate_main(void *arg)
{
    tp_world_t *w = arg;
    struct pollfd *pfd = calloc(2 * (size_t)w->size + 1, sizeof(*pfd));
    int *who = calloc(2 * (size_t)w->size + 1, sizeof(int)); /* rank r's connection is r, its pidfd -2 - r */
    int64_t next_hb = tp_now_ns();
    int sent_bye = 0, finalizing = 0;
    if (pfd == NULL || who == NULL) fail_job(-1, "out of memory in the fate thread");
    for (;;) {
        int64_t now = tp_now_ns();
        if (now >= next_hb) {
            broadcast(TP_MSG_HEARTBEAT);
            next_hb = now + fate.interval_ns;
        }
        int64_t until = next_hb;
        int n = 0;
        pfd[n] = (struct pollfd){.fd = fate.wake_fd, .events = POLLIN};
        who[n++] = -1;
        for (int r = 0; r < w->size; r++) {
            fate_peer_t *p = &fate.peers[r];
            if (r == w->rank) continue;
            if (p->ended_at != 0 && !(sent_bye || finalizing)) {
                if (now - p->ended_at >= fate.timeout_ns) fail_job(r, ENDED_WITHOUT_FINALIZE);
                if (p->ended_at + fate.timeout_ns < until) until = p->ended_at + fate.timeout_ns;
            }
            if (p->pidfd >= 0) {
                pfd[n] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
                who[n++] = -2 - r;
            }
            if (p->fd < 0) continue;
            if (now - p->last_rx > fate.timeout_ns) {
                char reason[128];
                snprintf(reason, sizeof(reason), "sent nothing for %g s (stopped or hung; TP_HEARTBEAT_TIMEOUT)",
                         (double)fate.timeout_ns / 1e9);
                fail_job(r, reason);
            }
            if (p->last_rx + fate.timeout_ns + 1 < until) until = p->last_rx + fate.timeout_ns + 1;
            pfd[n] = (struct pollfd){.fd = p->fd, .events = POLLIN};
            who[n++] = r;
        }
        int ms = until > now ? (int)((until - now + 999999) / 1000000) : 0;
        int rc = poll(pfd, (nfds_t)n, ms);
        if (rc < 0 && errno != EINTR) fail_job(-1, "poll failed in the fate thread");
        now = tp_now_ns();
        /* Messages first: a FAIL names the cause, and arrives before its sender's own end is visible. */
        for (int i = 1; rc > 0 && i < n; i++)
            if (pfd[i].revents && who[i] >= 0 && fate.peers[who[i]].fd >= 0 && service_peer(who[i], now))
                goto finished;
        if (rc > 0) on_peer_exits(pfd, who, n, sent_bye || finalizing, now);
        if (rc > 0 && pfd[0].revents) {
            uint64_t v;
            if (read(fate.wake_fd, &v, sizeof(v)) < 0) { /* nothing pending */
            }
            pthread_mutex_lock(&fate.lock);
            int rank = fate.report_rank;
            char reason[256];
            snprintf(reason, sizeof(reason), "%s", fate.report_reason);
            finalizing = fate.finalize_requested;
            pthread_mutex_unlock(&fate.lock);
            if (rank >= 0) fail_job(rank, reason);
            if (finalizing && w->rank != 0 && !sent_bye) {
                tp_wire_send_msg(fate.peers[0].fd, TP_MSG_BYE, NULL, 0, now + 100000000);
                sent_bye = 1;
            }
        }
        if (w->rank == 0 && all_bye(finalizing)) {
            broadcast(TP_MSG_BYE_ACK);
            goto finished;
        }
    }
finished:
    free(pfd);
    free(who);
    pthread_mutex_lock(&fate.lock);
    fate.finished = 1;
    pthread_cond_broadcast(&fate.done_cond);
    pthread_mutex_unlock(&fate.lock);
    return NULL;
}

tp_status_t tp_fate_start(tp_world_t *w)
{
    if (w->size == 1) return TP_OK;
    fate.world = w;
    fate.timeout_ns = (int64_t)(w->heartbeat_timeout_s * 1e9);
    fate.interval_ns = fate.timeout_ns / 4 > 1000000 ? fate.timeout_ns / 4 : 1000000;
    fate.peers = calloc((size_t)w->size, sizeof(*fate.peers));
    if (fate.peers == NULL) return TP_ERR_NO_MEMORY;
    int64_t now = tp_now_ns();
    const char *kernel = w->peers[w->rank].kernel;
    for (int r = 0; r < w->size; r++) {
        fate.peers[r].fd = w->fate_fds[r];
        fate.peers[r].pidfd = -1;
        if (r != w->rank && kernel[0] != '\0' && strcmp(w->peers[r].kernel, kernel) == 0)
            fate.peers[r].pidfd = (int)syscall(SYS_pidfd_open, w->peers[r].pid, 0); /* -1: the connection alone */
        fate.peers[r].last_rx = now;
        if (fate.peers[r].fd >= 0) tp_fd_set_nonblocking(fate.peers[r].fd);
        tp_msg_reader_init(&fate.peers[r].reader, FATE_MSG_MAX);
    }
    fate.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fate.wake_fd < 0) {
        tp_log(TP_LOG_ERROR, "fate", "eventfd: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    fate.finished = 0;
    fate.finalize_requested = 0;
    fate.report_rank = -1;
    if (pthread_create(&fate.thread, NULL, fate_main, w) != 0) {
        tp_log(TP_LOG_ERROR, "fate", "cannot start the fate thread");
        return TP_ERR_SYSTEM;
    }
    fate.running = 1;
    return TP_OK;
}

tp_status_t tp_fate_finalize(tp_world_t *w)
{
    if (!fate.running) return TP_OK;
    pthread_mutex_lock(&fate.lock);
    fate.finalize_requested = 1;
    pthread_mutex_unlock(&fate.lock);
    wake();
    pthread_mutex_lock(&fate.lock);
    while (!fate.finished) pthread_cond_wait(&fate.done_cond, &fate.lock);
    fate.running = 0;
    pthread_mutex_unlock(&fate.lock);
    pthread_join(fate.thread, NULL);
    for (int r = 0; r < w->size; r++) {
        if (fate.peers[r].fd >= 0) close(fate.peers[r].fd);
        if (fate.peers[r].pidfd >= 0) close(fate.peers[r].pidfd);
        w->fate_fds[r] = -1;
        tp_msg_reader_free(&fate.peers[r].reader);
    }
    free(fate.peers);
    fate.peers = NULL;
    close(fate.wake_fd);
    fate.wake_fd = -1;
    return TP_OK;
}
