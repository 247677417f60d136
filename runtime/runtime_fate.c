/*
 * runtime_fate.c: any rank's death or silence ends every rank fast, without relying on a launcher.
 *
 * Rank 0 is the arbiter: what any other rank suspects (a transport's closed connection, a dead process on its
 * host, a failed call) goes to rank 0, and rank 0's verdict, the first failure it learns of, is what every rank
 * names. A rank that learned of a failure ends (or, with TP_ERRORS=return, returns from its call) only after the
 * verdict reached it, and rank 0 sends the verdict to every rank before any of them acts on it; so a rank that ends
 * because of another's failure is never taken for the cause, whatever order its peers see connections close in.
 */
#include "runtime_fate.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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
#include "runtime_proc.h"
#include "runtime_stop.h"
#include "runtime_wire.h"

#define FATE_CALLBACKS_MAX 64
#define FATE_MSG_MAX       TP_FAIL_MSG_MAX
#define FATE_BYE_MAX       (256 * 1024) /* a BYE carries the rank's call counts per comm (tp_coll_stop_table) */
/* Rank 0 sends finalize news this long after it changed, so a clean finalize (every rank at once) sends none. */
#define STOP_RELAY_NS          1000000
#define ENDED_WITHOUT_FINALIZE "it ended without tp_finalize (the process died or exited)"

typedef struct fate_peer {
    int fd;
    int pidfd;        /* the peer's process, when it runs on this kernel: its death is seen without a relay */
    int64_t ended_at; /* its process ended and nothing says why yet: blamed if nothing does in time */
    int bye;          /* it called tp_finalize */
    int servicing;    /* its messages are being read (arbitrate reads them early, never twice at once) */
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
    int reported, report_pending; /* a transport or a call reported a failure (the first report is the one taken) */
    int report_rank;
    tp_status_t report_status;
    char report_reason[FATE_MSG_MAX];
    int finalize_requested;
    const char *finalize_table; /* this rank's call counts, sent with its BYE */
    int finished;
    atomic_int dying;
    fate_peer_t *peers;
    int64_t interval_ns, timeout_ns;
    int errors_return; /* TP_ERRORS=return: calls return the failure instead of the process exiting */
    /* the verdict: the job's first failure as rank 0 decided it (under lock; verdict set once) */
    atomic_int verdict;
    int deciding; /* the fate thread is making the verdict */
    tp_failure_t failure;
    tp_status_t failure_status; /* what calls return: TP_ERR_PEER_FAILED, or TP_ERR_DESYNC / TP_ERR_PROTOCOL */
    char failure_host[TP_HOST_MAX];
    char failure_reason[FATE_MSG_MAX];
    pthread_cond_t verdict_cond;
    int suspect; /* a non-zero rank: the rank it reported to rank 0, -1 when none */
    tp_status_t suspect_status;
    char suspect_reason[FATE_MSG_MAX];
    int64_t suspect_until; /* when it stops waiting for rank 0's verdict and decides itself */
    int64_t relay_at;      /* rank 0: when finalize news goes out, 0 when none is due */
    /* TP_LOG_LEVEL=debug: when each stage of ending on a failure ran here (CLOCK_MONOTONIC ns), for benchmarks */
    struct {
        int64_t woke, decided, sent_first, sent_last, quiesced, logged, called;
        const char *via;
    } stage;
} fate = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .done_cond = PTHREAD_COND_INITIALIZER,
          .verdict_cond = PTHREAD_COND_INITIALIZER,
          .wake_fd = -1,
          .report_rank = -1,
          .suspect = -1};

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

void tp_fate_report(int world_rank, const char *reason) { tp_fate_blame(world_rank, TP_ERR_PEER_FAILED, reason); }

void tp_fate_blame(int world_rank, tp_status_t status, const char *reason)
{
    pthread_mutex_lock(&fate.lock);
    if (!fate.reported && fate.running) {
        fate.reported = fate.report_pending = 1;
        fate.report_rank = world_rank;
        fate.report_status = status;
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

static void run_callbacks(const tp_failure_t *f)
{
    for (int i = fate.num_callbacks - 1; i >= 0; i--) fate.callbacks[i].fn(f, fate.callbacks[i].arg);
}

/* Ends this rank (TP_ERRORS=fatal): logs the cause, runs the engine's callbacks, exits with TP_EXIT_PEER_FAILED. */
static void fate_die(const tp_failure_t *f)
{
    if (atomic_exchange(&fate.dying, 1)) return;
    int n = fate.num_callbacks;
    tp_log(TP_LOG_ERROR, "fate",
           "peer rank %d (host %s, pid %d) failed: %s; %s%d fate callback%s, then exiting "
           "with status %d",
           f->rank, f->host, (int)f->pid, f->reason, n ? "running " : "", n, n == 1 ? "" : "s", TP_EXIT_PEER_FAILED);
    fate.stage.logged = tp_now_ns();
    run_callbacks(f);
    flush_stream(stdout);
    flush_stream(stderr);
    fate.stage.called = tp_now_ns();
    tp_log(TP_LOG_DEBUG, "fate",
           "stages (monotonic ns): woke %lld via %s decided %lld sent %lld-%lld quiesced %lld logged %lld "
           "called %lld exit %lld",
           (long long)fate.stage.woke, fate.stage.via ? fate.stage.via : "-", (long long)fate.stage.decided,
           (long long)fate.stage.sent_first, (long long)fate.stage.sent_last, (long long)fate.stage.quiesced,
           (long long)fate.stage.logged, (long long)fate.stage.called, (long long)tp_now_ns());
    _exit(TP_EXIT_PEER_FAILED);
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

/*
 * The verdict: the job's first failure as every rank names it. Rank 0 sends it to every other rank before acting
 * on it; then this rank exits (fatal) or runs the callbacks and lets its calls return it (TP_ERRORS=return).
 * Returns only in return mode.
 */
static void decide_status(int rank, tp_status_t status, const char *reason)
{
    tp_world_t *w = fate.world;
    if (atomic_load(&fate.verdict) || fate.deciding) return; /* only the fate thread decides */
    fate.deciding = 1;
    fate.stage.decided = tp_now_ns();
    int known = rank >= 0 && rank < w->size;
    snprintf(fate.failure_host, sizeof(fate.failure_host), "%s", known ? w->peers[rank].host : "");
    snprintf(fate.failure_reason, sizeof(fate.failure_reason), "%s", reason);
    fate.failure = (tp_failure_t){
        .rank = rank, .host = fate.failure_host, .pid = known ? w->peers[rank].pid : 0, .reason = fate.failure_reason};
    fate.failure_status = tp_fate_status(status) ? status : TP_ERR_PEER_FAILED;
    /* Out before this rank can act on it (once its call returns, the engine may exit at once): rank 0 tells every
     * rank; another rank that decided itself tells rank 0, which reads it before this rank's end. */
    fate.stage.sent_first = tp_now_ns();
    if (w->rank == 0) {
        for (int r = 1; r < w->size; r++)
            if (fate.peers[r].fd >= 0) tp_wire_send_fail(fate.peers[r].fd, &fate.failure, fate.failure_status);
    } else if (rank != 0 && fate.peers[0].fd >= 0) {
        tp_wire_send_fail(fate.peers[0].fd, &fate.failure, fate.failure_status);
    }
    fate.stage.sent_last = tp_now_ns();
    if (!fate.errors_return) {
        quiesce_connections();
        fate.stage.quiesced = tp_now_ns();
        fate_die(&fate.failure);
    }
    const tp_failure_t *f = &fate.failure;
    int n = fate.num_callbacks;
    tp_log(TP_LOG_ERROR, "fate",
           "peer rank %d (host %s, pid %d) failed: %s; %s%d fate callback%s; calls return "
           "the failure (TP_ERRORS=return)",
           f->rank, f->host, (int)f->pid, f->reason, n ? "running " : "", n, n == 1 ? "" : "s");
    run_callbacks(f);
    pthread_mutex_lock(&fate.lock); /* now calls may return it */
    atomic_store(&fate.verdict, 1);
    pthread_cond_broadcast(&fate.verdict_cond);
    pthread_mutex_unlock(&fate.lock);
    tp_stop_wake_failed();
}

static void decide(int rank, const char *reason) { decide_status(rank, TP_ERR_PEER_FAILED, reason); }

/*
 * What this rank saw: rank 0 decides at once; another rank tells rank 0 and waits for its verdict (which names the
 * first failure rank 0 learned of), deciding itself only if none comes within the heartbeat timeout. A suspicion of
 * rank 0 itself waits for rank 0's connection: a verdict it sent comes before its end.
 */
static int service_peer(int r, int64_t now);

/*
 * Rank 0, before it names a rank on what it or another rank saw (a closed connection): what that rank itself sent
 * is read first. A rank that ended because of another's failure sent its FAIL before its connections closed, so it
 * is here already even when the report of its closed connection came in on an earlier-read socket.
 */
static void arbitrate(int rank, tp_status_t status, const char *reason, int64_t now)
{
    if (rank > 0 && rank < fate.world->size && fate.peers[rank].fd >= 0 && !fate.peers[rank].servicing)
        (void)service_peer(rank, now);
    decide_status(rank, status, reason);
}

static void suspect(int rank, tp_status_t status, const char *reason, int64_t now)
{
    tp_world_t *w = fate.world;
    if (atomic_load(&fate.verdict)) return;
    if (w->rank == 0) {
        arbitrate(rank, status, reason, now);
        return;
    }
    if (fate.suspect >= 0) return; /* rank 0 has it: its verdict covers this too */
    fate.suspect = rank;
    fate.suspect_status = status;
    snprintf(fate.suspect_reason, sizeof(fate.suspect_reason), "%s", reason);
    fate.suspect_until = now + fate.timeout_ns;
    tp_failure_t f = {.rank = rank, .host = "", .pid = 0, .reason = reason};
    if (rank > 0 && rank < w->size) {
        f.host = w->peers[rank].host;
        f.pid = w->peers[rank].pid;
    }
    if (rank != 0 && fate.peers[0].fd >= 0) tp_wire_send_fail(fate.peers[0].fd, &f, status);
}

/* A FAIL message: from rank 0 it is the verdict; at rank 0, another rank's suspicion. */
static void on_fail_msg(int from, char *payload, int64_t now)
{
    int rank;
    tp_status_t status; /* decide_status keeps only a peer- or job-scope one */
    char *reason;
    if (tp_wire_parse_fail(payload, fate.world->size, &rank, &status, &reason) != 0) {
        suspect(from, TP_ERR_PROTOCOL, "sent a malformed failure report", now);
        return;
    }
    if (fate.world->rank != 0) {
        decide_status(rank, status, reason);
        return;
    }
    char why[FATE_MSG_MAX + 64];
    snprintf(why, sizeof(why), "%s (reported by rank %d)", reason, from);
    arbitrate(rank, status, from == rank ? reason : why, now);
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

/* Rank 0: rank r called tp_finalize with these call counts; the ranks still in their calls hear of it shortly. */
static void on_bye(int r, const char *table, int64_t now)
{
    fate.peers[r].bye = 1;
    tp_stop_relay_add(r, table, fate.world->size); /* out of memory: peers waiting on r wait for the job's end */
    if (fate.relay_at == 0) fate.relay_at = now + STOP_RELAY_NS;
}

/* Rank 0: the finalize news not sent yet goes to every rank that has not called tp_finalize. */
static void relay_stop_news(void)
{
    tp_world_t *w = fate.world;
    size_t len = 0;
    fate.relay_at = 0;
    char *msg = tp_stop_relay_take(&len);
    if (msg == NULL) return; /* nothing new, or out of memory: those ranks wait for the job's end as before */
    for (int x = 1; x < w->size && len > 0; x++)
        if (!fate.peers[x].bye && fate.peers[x].fd >= 0)
            tp_wire_send_msg(fate.peers[x].fd, TP_MSG_STOP, msg, len, tp_now_ns() + 100000000);
    free(msg);
}

/* A rank: rank 0 relays which ranks called tp_finalize, with their call counts. */
static void on_stop_msg(const char *payload)
{
    if (tp_stop_news(payload, fate.world->size) != 0) decide(0, "sent malformed finalize news");
}

/* How a peer process on this kernel ended, from its zombie's /proc entry; -1 once reaped or unreadable. */
static int zombie_status(pid_t pid)
{
    tp_proc_stat_t ps;
    return tp_proc_stat(pid, &ps) == 0 && ps.state == 'Z' ? ps.exit_code : -1;
}

/*
 * Peer processes on this host that ended: a failure unless this rank is finalizing or they said BYE. One that
 * ended with TP_EXIT_PEER_FAILED is a consequence. One killed by SIGTERM, SIGINT or SIGHUP may be either: those
 * are what a launcher's teardown sends once it saw the real cause, and on a fast machine it can reach some ranks
 * before they hear of the cause. So may one whose status is gone (its parent reaped it). Either is blamed only if
 * nothing else explains it within the heartbeat timeout: rank 0's FAIL names the cause, and a rank killed alone
 * is named at once by rank 0, whose connection to it ends. Another signal (SIGKILL, SIGSEGV, the OOM killer) is
 * the cause, decided here without waiting for rank 0 (no rank ends so because another failed); any other exit may
 * be an engine ending on a failure it was told of (TP_ERRORS=return), so it goes to rank 0 like any suspicion.
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
        fate.stage.via = "pidfd";
        if (st < 0 || teardown_signal(st)) p->ended_at = now;
        else if (WIFSIGNALED(st)) decide(r, ENDED_WITHOUT_FINALIZE); /* killed: no rank ends so because of another */
        else if (!(WIFEXITED(st) && WEXITSTATUS(st) == TP_EXIT_PEER_FAILED))
            suspect(r, TP_ERR_PEER_FAILED, ENDED_WITHOUT_FINALIZE, now); /* an exit may follow another's failure */
    }
}

/* Reads what a peer sent; returns 1 when this rank's finalize is complete. */
static int read_peer(int r, int64_t now)
{
    fate_peer_t *p = &fate.peers[r];
    char why[256], reason[320];
    while (!atomic_load(&fate.verdict)) {
        tp_read_result_t rr = tp_msg_reader_step(&p->reader, p->fd, why, sizeof(why));
        if (rr == TP_READ_MORE) return 0;
        if (rr == TP_READ_EOF) {
            close(p->fd);
            p->fd = -1;
            if (p->bye) return 0;              /* it finished its work and called tp_finalize */
            fate.stage.via = "eof";
            decide(r, ENDED_WITHOUT_FINALIZE); /* its own connection: nobody else can say more */
            return 0;
        }
        if (rr == TP_READ_ERROR) {
            snprintf(reason, sizeof(reason), "broke the fate protocol: %s", why);
            decide(r, reason);
            return 0;
        }
        p->last_rx = now;
        int to_zero = fate.world->rank == 0;
        switch (p->reader.header.type) {
        case TP_MSG_HEARTBEAT: break;
        case TP_MSG_BYE:
            if (to_zero) on_bye(r, p->reader.payload, now);
            else decide(r, "sent a finalize message only rank 0 may receive");
            break;
        case TP_MSG_BYE_ACK:
            if (r == 0 && !to_zero) return 1;
            decide(r, "sent a finalize acknowledgement it may not send");
            break;
        case TP_MSG_FAIL:
            fate.stage.via = "fail";
            on_fail_msg(r, p->reader.payload, now);
            break;
        case TP_MSG_STOP:
            if (r == 0 && !to_zero) on_stop_msg(p->reader.payload);
            else decide(r, "sent finalize news only rank 0 may send");
            break;
        default: decide(r, "sent a message that does not belong to the fate protocol");
        }
        tp_msg_reader_reset(&p->reader);
    }
    return 0;
}

static int service_peer(int r, int64_t now)
{
    fate.peers[r].servicing = 1;
    int done = read_peer(r, now);
    fate.peers[r].servicing = 0;
    return done;
}

/* The earliest of a and b, where 0 means none. */
static int64_t earliest(int64_t a, int64_t b) { return a == 0 ? b : b == 0 || a < b ? a : b; }

/* Watches every peer until the job is over for this rank: its finalize completed, or (return mode) a verdict. */
static void *fate_main(void *arg)
{
    tp_world_t *w = arg;
    struct pollfd *pfd = calloc(2 * (size_t)w->size + 1, sizeof(*pfd));
    int *who = calloc(2 * (size_t)w->size + 1, sizeof(int)); /* rank r's connection is r, its pidfd -2 - r */
    int64_t next_hb = tp_now_ns();
    int sent_bye = 0, finalizing = 0;
    if (pfd == NULL || who == NULL) decide(-1, "out of memory in the fate thread");
    while (!atomic_load(&fate.verdict)) {
        int64_t now = tp_now_ns();
        if (now >= next_hb) {
            broadcast(TP_MSG_HEARTBEAT);
            next_hb = now + fate.interval_ns;
        }
        if (fate.relay_at != 0 && now >= fate.relay_at) relay_stop_news();
        if (fate.suspect >= 0 && now >= fate.suspect_until) {
            char reason[FATE_MSG_MAX + 80];
            snprintf(reason, sizeof(reason), "%s (rank 0 did not confirm it within %g s)", fate.suspect_reason,
                     (double)fate.timeout_ns / 1e9);
            decide_status(fate.suspect, fate.suspect_status, reason);
            break;
        }
        int64_t until = earliest(earliest(next_hb, fate.relay_at), fate.suspect >= 0 ? fate.suspect_until : 0);
        int n = 0;
        pfd[n] = (struct pollfd){.fd = fate.wake_fd, .events = POLLIN};
        who[n++] = -1;
        for (int r = 0; r < w->size && !atomic_load(&fate.verdict); r++) {
            fate_peer_t *p = &fate.peers[r];
            if (r == w->rank) continue;
            if (p->ended_at != 0 && !(sent_bye || finalizing)) {
                if (now - p->ended_at >= fate.timeout_ns) suspect(r, TP_ERR_PEER_FAILED, ENDED_WITHOUT_FINALIZE, now);
                until = earliest(until, p->ended_at + fate.timeout_ns);
            }
            if (p->pidfd >= 0) {
                pfd[n] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
                who[n++] = -2 - r;
            }
            /* what waits in the socket counts: this thread, not the peer, may be the one that did not run */
            if (p->fd >= 0 && now - p->last_rx > fate.timeout_ns && service_peer(r, tp_now_ns())) goto finished;
            if (p->fd < 0 || atomic_load(&fate.verdict)) continue;
            if (now - p->last_rx > fate.timeout_ns) {
                char reason[128];
                snprintf(reason, sizeof(reason), "sent nothing for %g s (stopped or hung; TP_HEARTBEAT_TIMEOUT)",
                         (double)fate.timeout_ns / 1e9);
                decide(r, reason); /* only rank 0 watches the others, and they watch only rank 0 */
            }
            until = earliest(until, p->last_rx + fate.timeout_ns + 1);
            pfd[n] = (struct pollfd){.fd = p->fd, .events = POLLIN};
            who[n++] = r;
        }
        if (atomic_load(&fate.verdict)) break;
        int ms = until > now ? (int)((until - now + 999999) / 1000000) : 0;
        int rc = poll(pfd, (nfds_t)n, ms);
        if (rc < 0 && errno != EINTR) decide(-1, "poll failed in the fate thread");
        now = fate.stage.woke = tp_now_ns();
        /* Messages first: a FAIL names the cause, and arrives before its sender's own end is visible. */
        for (int i = 1; rc > 0 && i < n; i++)
            if (pfd[i].revents && who[i] >= 0 && fate.peers[who[i]].fd >= 0 && service_peer(who[i], now)) goto finished;
        if (rc > 0 && !atomic_load(&fate.verdict)) on_peer_exits(pfd, who, n, sent_bye || finalizing, now);
        if (rc > 0 && pfd[0].revents && !atomic_load(&fate.verdict)) {
            uint64_t v;
            if (read(fate.wake_fd, &v, sizeof(v)) < 0) { /* nothing pending */
            }
            pthread_mutex_lock(&fate.lock);
            int rank = fate.report_rank, pending = fate.report_pending;
            tp_status_t status = fate.report_status;
            char reason[FATE_MSG_MAX];
            snprintf(reason, sizeof(reason), "%s", fate.report_reason);
            fate.report_pending = 0;
            finalizing = fate.finalize_requested;
            const char *table = fate.finalize_table;
            pthread_mutex_unlock(&fate.lock);
            if (pending) suspect(rank, status, reason, now);
            if (finalizing && w->rank == 0 && !fate.peers[0].bye) on_bye(0, table, now);
            if (finalizing && w->rank != 0 && !sent_bye && !atomic_load(&fate.verdict)) {
                tp_wire_send_msg(fate.peers[0].fd, TP_MSG_BYE, table, table != NULL ? strlen(table) : 0,
                                 now + 100000000);
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
    fate.errors_return = w->errors_return;
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
        tp_msg_reader_init(&fate.peers[r].reader, FATE_BYE_MAX);
    }
    fate.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fate.wake_fd < 0) {
        tp_log(TP_LOG_ERROR, "fate", "eventfd: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    tp_status_t s = tp_stop_open();
    if (s != TP_OK) return s;
    fate.finished = 0;
    fate.finalize_requested = 0;
    fate.finalize_table = NULL;
    fate.reported = fate.report_pending = 0;
    fate.report_rank = -1;
    fate.suspect = -1;
    fate.relay_at = 0;
    atomic_store(&fate.verdict, 0);
    fate.deciding = 0;
    if (pthread_create(&fate.thread, NULL, fate_main, w) != 0) {
        tp_log(TP_LOG_ERROR, "fate", "cannot start the fate thread");
        return TP_ERR_SYSTEM;
    }
    fate.running = 1;
    return TP_OK;
}

tp_status_t tp_fate_failed(void) { return atomic_load(&fate.verdict) ? fate.failure_status : TP_OK; }

int tp_fate_failure(tp_failure_t *out)
{
    if (!atomic_load(&fate.verdict)) return 0;
    if (out != NULL) *out = fate.failure; /* set once, before the flag */
    return 1;
}

/* Whether the verdict came within two heartbeat timeouts. */
static int wait_verdict(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + 2 * fate.timeout_ns + 100000000;
    until.tv_sec += ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&fate.lock);
    while (!atomic_load(&fate.verdict))
        if (pthread_cond_timedwait(&fate.verdict_cond, &fate.lock, &until) != 0) break;
    pthread_mutex_unlock(&fate.lock);
    return atomic_load(&fate.verdict);
}

tp_status_t tp_fate_call_failed(tp_status_t s, const char *fn)
{
    if (!fate.running) return s;
    /* The cause reaches rank 0 and comes back as the verdict; a call that failed without a report (its peer
     * reported instead) waits for it too. When none comes, nobody explains the failure: it is this rank's own, and
     * it goes to rank 0 like any report, so every rank names the same one (two ranks whose calls failed alike, each
     * deciding alone, named each other's exit). */
    int have = wait_verdict();
    if (!have) {
        char reason[600];
        snprintf(reason, sizeof(reason), "%s failed (%s)", fn, tp_last_error());
        tp_fate_blame(fate.world->rank, s, reason);
        have = wait_verdict();
    }
    if (!fate.errors_return) {
        if (!have) {
            char reason[600];
            snprintf(reason, sizeof(reason), "%s failed (%s) and no peer's failure explains it", fn, tp_last_error());
            tp_failure_t own = {.rank = -1, .host = "", .pid = 0, .reason = reason};
            fate_die(&own);
        }
        for (;;) pause(); /* the fate thread is ending this process */
    }
    if (!have) return s;
    const tp_failure_t *f = &fate.failure;
    tp_log_status(TP_LOG_DEBUG, "fate", "%s: peer rank %d (host %s, pid %d) failed: %s", fn, f->rank, f->host,
                  (int)f->pid, f->reason);
    return fate.failure_status;
}

tp_status_t tp_fate_finalize(tp_world_t *w, const char *table)
{
    if (!fate.running) return TP_OK;
    pthread_mutex_lock(&fate.lock);
    fate.finalize_requested = 1;
    fate.finalize_table = table;
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
    tp_stop_close();
    if (!atomic_load(&fate.verdict)) return TP_OK;
    const tp_failure_t *f = &fate.failure;
    tp_log_status(TP_LOG_DEBUG, "fate", "tp_finalize: peer rank %d (host %s, pid %d) failed: %s", f->rank, f->host,
                  (int)f->pid, f->reason);
    return TP_ERR_PEER_FAILED;
}
