/*
 * runtime_fate_thread.c: the fate thread: heartbeats over the star around rank 0, peers' messages and ends (their
 * connections and, on this kernel, their pidfds), the finalize handshake, and what turns into a suspicion or verdict.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime_fate.h"
#include "runtime_fate_internal.h"
#include "runtime_log.h"
#include "runtime_proc.h"
#include "runtime_stop.h"

static void decide(int rank, const char *reason) { tp_fate_decide(rank, TP_ERR_PEER_FAILED, reason, 0); }

/* What an event names: rank r's connection is r, its pidfd WATCH_PIDFD + r, the wake fd WATCH_WAKE. */
#define WATCH_PIDFD ((uint64_t)1 << 32)
#define WATCH_WAKE  ((uint64_t)1 << 33)

static int watch_add(int fd, uint64_t what)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = what};
    return epoll_ctl(tp_fate.watch_fd, EPOLL_CTL_ADD, fd, &ev);
}

tp_status_t tp_fate_watch_open(tp_world_t *w)
{
    tp_fate.watch_fd = epoll_create1(EPOLL_CLOEXEC);
    tp_fate.events_len = 2 * w->size + 1;
    tp_fate.events = calloc((size_t)tp_fate.events_len, sizeof(*tp_fate.events));
    int bad = tp_fate.watch_fd < 0 || tp_fate.events == NULL || watch_add(tp_fate.wake_fd, WATCH_WAKE) != 0;
    for (int r = 0; r < w->size && !bad; r++) {
        fate_peer_t *p = &tp_fate.peers[r];
        if (p->fd >= 0) bad = watch_add(p->fd, (uint64_t)r) != 0;
        if (!bad && p->pidfd >= 0) bad = watch_add(p->pidfd, WATCH_PIDFD | (uint64_t)r) != 0;
    }
    if (!bad) return TP_OK;
    tp_log(TP_LOG_ERROR, "fate", "cannot watch the %d peers' connections (epoll: %s)", w->size - 1, strerror(errno));
    return tp_fate.events == NULL ? TP_ERR_NO_MEMORY : TP_ERR_SYSTEM;
}

void tp_fate_watch_close(void)
{
    if (tp_fate.watch_fd >= 0) close(tp_fate.watch_fd);
    tp_fate.watch_fd = -1;
    free(tp_fate.events);
    tp_fate.events = NULL;
}

/* Out of the set before it is closed: a copy a fork left open in a child would keep an ended one readable. */
static void unwatch_close(int *fd)
{
    epoll_ctl(tp_fate.watch_fd, EPOLL_CTL_DEL, *fd, NULL);
    close(*fd);
    *fd = -1;
}

/* A deadline that came nearer than the next scan (a peer now live, or ended): the scan comes forward to it. */
static void scan_by(int64_t when)
{
    if (when < tp_fate.next_scan) tp_fate.next_scan = when;
}

static void send_empty(int fd, tp_msg_type_t type) { tp_wire_send_msg(fd, type, NULL, 0, tp_now_ns() + 100000000); }

static void broadcast(tp_msg_type_t type)
{
    tp_world_t *w = tp_fate.world;
    for (int r = 0; r < w->size; r++)
        if (r != w->rank && tp_fate.peers[r].fd >= 0) send_empty(tp_fate.peers[r].fd, type);
}

void tp_fate_heartbeat_all(void) { broadcast(TP_MSG_HEARTBEAT); }

static int all_bye(int self_finalizing)
{
    tp_world_t *w = tp_fate.world;
    if (!self_finalizing) return 0;
    for (int r = 1; r < w->size; r++)
        if (!tp_fate.peers[r].bye) return 0;
    return 1;
}

/* Rank 0: rank r called tp_finalize with these call counts; the ranks still in their calls hear of it shortly. */
static void on_bye(int r, const char *table, int64_t now)
{
    tp_fate.peers[r].bye = 1;
    tp_stop_relay_add(r, table, tp_fate.world->size); /* out of memory: peers waiting on r wait for the job's end */
    if (tp_fate.relay_at == 0) tp_fate.relay_at = now + STOP_RELAY_NS;
}

/* Rank 0: the finalize news not sent yet goes to every rank that has not called tp_finalize. */
static void relay_stop_news(void)
{
    tp_world_t *w = tp_fate.world;
    size_t len = 0;
    tp_fate.relay_at = 0;
    char *msg = tp_stop_relay_take(&len);
    if (msg == NULL) return; /* nothing new, or out of memory: those ranks wait for the job's end as before */
    for (int x = 1; x < w->size && len > 0; x++)
        if (!tp_fate.peers[x].bye && tp_fate.peers[x].fd >= 0)
            tp_wire_send_msg(tp_fate.peers[x].fd, TP_MSG_STOP, msg, len, tp_now_ns() + 100000000);
    free(msg);
}

/* A rank: rank 0 relays which ranks called tp_finalize, with their call counts. */
static void on_stop_msg(const char *payload)
{
    if (tp_stop_news(payload, tp_fate.world->size) != 0) decide(0, "sent malformed finalize news");
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

static void on_peer_exit(int r, int finalizing, int64_t now)
{
    fate_peer_t *p = &tp_fate.peers[r];
    int st = zombie_status(tp_fate.world->peers[r].pid);
    unwatch_close(&p->pidfd);
    if (finalizing || p->bye) return;
    tp_fate.stage.via = "pidfd";
    if (st < 0 || teardown_signal(st)) {
        p->ended_at = now;
        scan_by(now + tp_fate.timeout_ns);
    } else if (WIFSIGNALED(st)) {
        decide(r, ENDED_WITHOUT_FINALIZE); /* killed: no rank ends so because of another */
    } else if (!(WIFEXITED(st) && WEXITSTATUS(st) == TP_EXIT_PEER_FAILED)) {
        tp_fate_suspect(r, TP_ERR_PEER_FAILED, ENDED_WITHOUT_FINALIZE, now); /* an exit may follow another's failure */
    }
}

static int read_peer(int r, int64_t now)
{
    fate_peer_t *p = &tp_fate.peers[r];
    char why[256], reason[320];
    while (!atomic_load(&tp_fate.verdict)) {
        tp_read_result_t rr = tp_msg_reader_step(&p->reader, p->fd, why, sizeof(why));
        if (rr == TP_READ_MORE) return 0;
        if (rr == TP_READ_EOF) {
            unwatch_close(&p->fd);
            if (p->bye) return 0; /* it finished its work and called tp_finalize */
            tp_fate.stage.via = "eof";
            decide(r, ENDED_WITHOUT_FINALIZE); /* its own connection: nobody else can say more */
            return 0;
        }
        if (rr == TP_READ_ERROR) {
            snprintf(reason, sizeof(reason), "broke the fate protocol: %s", why);
            decide(r, reason);
            return 0;
        }
        p->last_rx = now;
        p->live = 1;
        scan_by(now + tp_fate.timeout_ns + 1); /* live now: TP_HEARTBEAT_TIMEOUT, not the boot's, applies */
        p->wait_tid = 0;                       /* heard: a wait for a CPU it was in is over */
        int to_zero = tp_fate.world->rank == 0;
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
            tp_fate.stage.via = "fail";
            tp_fate_on_fail(r, p->reader.payload, now);
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

int tp_fate_service_peer(int r, int64_t now)
{
    tp_fate.peers[r].servicing = 1;
    int done = read_peer(r, now);
    tp_fate.peers[r].servicing = 0;
    return done;
}

/* The earliest of a and b, where 0 means none. */
static int64_t earliest(int64_t a, int64_t b) { return a == 0 ? b : b == 0 || a < b ? a : b; }

/*
 * Asks for a short EEVDF time slice (Linux 6.12 and later; older kernels ignore it), so that this thread's wake-up
 * preempts a busy engine thread at once instead of waiting out its slice (3 ms on 16 cores) at each hop of a failure.
 */
static void prefer_wakeups(void)
{
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } a = {0};
    if (syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) != 0 || a.policy != SCHED_OTHER) return; /* the engine's */
    a.size = sizeof(a);
    a.runtime = FATE_SLICE_NS;
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0)
        tp_log(TP_LOG_DEBUG, "fate", "sched_setattr (a short time slice for the fate thread): %s", strerror(errno));
}

/* TP_TEST_FATE_BURN: spends this much CPU time, as a heartbeat round among thousands of peers would. */
static void burn_cpu(int64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    int64_t until = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec + ns;
    do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((int64_t)t.tv_sec * 1000000000 + t.tv_nsec < until);
}

/* How long peer p may be silent: TP_HEARTBEAT_TIMEOUT once heard since its fate started, before that (it is still
 * in its tp_init) TP_BOOT_TIMEOUT. */
static int64_t silence_limit(const fate_peer_t *p) { return p->live ? tp_fate.timeout_ns : tp_fate.boot_timeout_ns; }

/*
 * Every peer's silence and unexplained end against its limit, and when the next may be due (tp_fate.next_scan). Done
 * when one is due, not at every wake-up: rank 0 wakes for N heartbeats an interval. Returns 1 when this rank's
 * finalize completed meanwhile.
 */
static int scan_peers(tp_world_t *w, int64_t now, int finalizing)
{
    int64_t next = 0;
    for (int r = 0; r < w->size && !atomic_load(&tp_fate.verdict); r++) {
        fate_peer_t *p = &tp_fate.peers[r];
        if (r == w->rank) continue;
        if (p->ended_at != 0 && !finalizing) {
            if (now - p->ended_at >= tp_fate.timeout_ns)
                tp_fate_suspect(r, TP_ERR_PEER_FAILED, ENDED_WITHOUT_FINALIZE, now);
            else next = earliest(next, p->ended_at + tp_fate.timeout_ns);
        }
        /* what waits in the socket counts: this thread, not the peer, may be the one that did not run */
        if (p->fd >= 0 && now - p->last_rx > silence_limit(p) && tp_fate_service_peer(r, tp_now_ns())) return 1;
        if (p->fd < 0 || atomic_load(&tp_fate.verdict)) continue;
        int64_t limit = silence_limit(p); /* what was just read may have made it live */
        if (now - p->last_rx > limit) {
            char reason[200];
            int64_t again = tp_fate_silence(r, now, reason, sizeof(reason));
            /* What it sent after the socket was read counts: this thread may have waited for a CPU before it read
             * the peer's state, and the peer, starved too, may have sent its heartbeat and gone back to sleep. */
            if (again == 0 && tp_fate_service_peer(r, tp_now_ns())) return 1;
            if (p->fd < 0 || atomic_load(&tp_fate.verdict)) continue;
            if (again == 0 && now - p->last_rx > limit)
                decide(r, reason); /* only rank 0 watches the others, and they watch only rank 0 */
            next = earliest(next, again != 0 ? again : p->last_rx + limit + 1);
        } else {
            next = earliest(next, p->last_rx + limit + 1);
        }
    }
    tp_fate.next_scan = next != 0 ? next : INT64_MAX;
    return 0;
}

/* Until the job is over for this rank: its finalize completed, or (return mode) a verdict. */
void *tp_fate_thread_main(void *arg)
{
    tp_world_t *w = arg;
    prefer_wakeups();
    /* tp_fate_start sent the first round: the next is due an interval after it began, not after this thread started
     * (on a starved host the round and the thread's creation took over 1 s, and the thread, asleep in poll for
     * another interval, was named as hung by the ranks served first) */
    int64_t next_hb = tp_fate.first_hb_at + tp_fate.interval_ns;
    int sent_bye = 0, finalizing = 0;
    struct epoll_event *ev = tp_fate.events;
    tp_fate.next_scan = 0; /* at once: what the main thread's tp_init left unread is looked at first */
    while (!atomic_load(&tp_fate.verdict) && !atomic_load(&tp_fate.quit)) {
        int64_t now = tp_now_ns();
        if (now >= next_hb) {
            if (tp_fate.test_burn_ns > 0) burn_cpu(tp_fate.test_burn_ns);
            broadcast(TP_MSG_HEARTBEAT);
            next_hb = now + tp_fate.interval_ns;
        }
        if (tp_fate.relay_at != 0 && now >= tp_fate.relay_at) relay_stop_news();
        if (tp_fate.suspect >= 0 && now >= tp_fate.suspect_until) {
            char reason[FATE_MSG_MAX + 80];
            snprintf(reason, sizeof(reason), "%s (rank 0 did not confirm it within %g s)", tp_fate.suspect_reason,
                     (double)tp_fate.timeout_ns / 1e9);
            tp_fate_decide(tp_fate.suspect, tp_fate.suspect_status, reason, 0);
            break;
        }
        if (now >= tp_fate.next_scan && scan_peers(w, now, sent_bye || finalizing)) goto finished;
        if (atomic_load(&tp_fate.verdict)) break;
        int64_t until = earliest(earliest(next_hb, tp_fate.relay_at), tp_fate.suspect >= 0 ? tp_fate.suspect_until : 0);
        if (tp_fate.next_scan != INT64_MAX) until = earliest(until, tp_fate.next_scan);
        int ms = until > now ? (int)((until - now + 999999) / 1000000) : 0;
        int n = epoll_wait(tp_fate.watch_fd, ev, tp_fate.events_len, ms);
        if (n < 0 && errno != EINTR) decide(-1, "epoll_wait failed in the fate thread");
        now = tp_fate.stage.woke = tp_now_ns();
        int woken = 0;
        /* Messages first: a FAIL names the cause, and arrives before its sender's own end is visible. */
        for (int i = 0; i < n; i++) {
            uint64_t what = ev[i].data.u64;
            woken |= what == WATCH_WAKE;
            if (what < WATCH_PIDFD && tp_fate.peers[what].fd >= 0 && tp_fate_service_peer((int)what, now))
                goto finished;
        }
        for (int i = 0; i < n && !atomic_load(&tp_fate.verdict); i++) {
            uint64_t what = ev[i].data.u64;
            if ((what & WATCH_PIDFD) && tp_fate.peers[what & ~WATCH_PIDFD].pidfd >= 0)
                on_peer_exit((int)(what & ~WATCH_PIDFD), sent_bye || finalizing, now);
        }
        if (woken && !atomic_load(&tp_fate.verdict)) {
            uint64_t v;
            if (read(tp_fate.wake_fd, &v, sizeof(v)) < 0) { /* nothing pending */
            }
            pthread_mutex_lock(&tp_fate.lock);
            int rank = tp_fate.report_rank, pending = tp_fate.report_pending;
            tp_status_t status = tp_fate.report_status;
            char reason[FATE_MSG_MAX];
            snprintf(reason, sizeof(reason), "%s", tp_fate.report_reason);
            tp_fate.report_pending = 0;
            finalizing = tp_fate.finalize_requested;
            const char *table = tp_fate.finalize_table;
            pthread_mutex_unlock(&tp_fate.lock);
            if (pending) tp_fate_suspect(rank, status, reason, now);
            if (finalizing && w->rank == 0 && !tp_fate.peers[0].bye) on_bye(0, table, now);
            if (finalizing && w->rank != 0 && !sent_bye && !atomic_load(&tp_fate.verdict)) {
                tp_wire_send_msg(tp_fate.peers[0].fd, TP_MSG_BYE, table, table != NULL ? strlen(table) : 0,
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
    pthread_mutex_lock(&tp_fate.lock);
    tp_fate.finished = 1;
    pthread_cond_broadcast(&tp_fate.done_cond);
    pthread_mutex_unlock(&tp_fate.lock);
    return NULL;
}
