/*
 * runtime_fate.c: any rank's death or silence ends every rank fast, without relying on a launcher: the fate path's
 * API (callbacks, reports, a failed call's end), and starting and finishing its thread (runtime_fate_thread.c),
 * whose verdicts runtime_fate_verdict.c makes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_fate.h"
#include "runtime_fate_internal.h"
#include "runtime_log.h"
#include "runtime_stop.h"

tp_fate_state_t tp_fate = {.lock = PTHREAD_MUTEX_INITIALIZER,
                           .done_cond = PTHREAD_COND_INITIALIZER,
                           .verdict_cond = PTHREAD_COND_INITIALIZER,
                           .wake_fd = -1,
                           .watch_fd = -1,
                           .report_rank = -1,
                           .suspect = -1};

tp_status_t tp_fate_register(tp_fate_fn fn, void *arg)
{
    if (fn == NULL) return TP_ERR_INVALID;
    pthread_mutex_lock(&tp_fate.lock);
    tp_status_t s = TP_ERR_NO_MEMORY;
    if (tp_fate.num_callbacks < FATE_CALLBACKS_MAX) {
        tp_fate.callbacks[tp_fate.num_callbacks].fn = fn;
        tp_fate.callbacks[tp_fate.num_callbacks].arg = arg;
        tp_fate.num_callbacks++;
        s = TP_OK;
    }
    pthread_mutex_unlock(&tp_fate.lock);
    if (s != TP_OK) tp_log(TP_LOG_ERROR, "fate", "at most %d fate callbacks can be registered", FATE_CALLBACKS_MAX);
    return s;
}

static void wake(void)
{
    uint64_t one = 1;
    if (tp_fate.wake_fd >= 0 && write(tp_fate.wake_fd, &one, sizeof(one)) < 0) { /* the counter is already set */
    }
}

void tp_fate_report(int world_rank, const char *reason) { tp_fate_blame(world_rank, TP_ERR_PEER_FAILED, reason); }

void tp_fate_blame(int world_rank, tp_status_t status, const char *reason)
{
    pthread_mutex_lock(&tp_fate.lock);
    if (!tp_fate.reported && tp_fate.running) {
        tp_fate.reported = tp_fate.report_pending = 1;
        tp_fate.report_rank = world_rank;
        tp_fate.report_status = status;
        snprintf(tp_fate.report_reason, sizeof(tp_fate.report_reason), "%s", reason);
    }
    pthread_mutex_unlock(&tp_fate.lock);
    wake();
}

int64_t tp_fate_interval_ns(const tp_world_t *w)
{
    int64_t quarter = (int64_t)(w->heartbeat_timeout_s * 1e9) / 4;
    return quarter > 1000000 ? quarter : 1000000;
}

/* Undoes tp_fate_start after its thread ended (or never began); took_fds: fate owned the connections, and closes
 * them (the world's copies go too), else they stay the caller's. */
static void fate_free(tp_world_t *w, int took_fds)
{
    for (int r = 0; tp_fate.peers != NULL && r < w->size; r++) {
        if (took_fds && tp_fate.peers[r].fd >= 0) close(tp_fate.peers[r].fd);
        if (took_fds) w->fate_fds[r] = -1;
        if (tp_fate.peers[r].pidfd >= 0) close(tp_fate.peers[r].pidfd);
        tp_msg_reader_free(&tp_fate.peers[r].reader);
    }
    free(tp_fate.peers);
    tp_fate.peers = NULL;
    tp_fate_watch_close();
    if (tp_fate.wake_fd >= 0) close(tp_fate.wake_fd);
    tp_fate.wake_fd = -1;
    tp_stop_close();
    tp_fate.world = NULL; /* the world is freed next: nothing of fate's may reach it */
}

/*
 * Which same-kernel peers this rank watches through pidfds (their watched flag). Rank 0,
 * the arbiter, watches every one; any other rank rank 0 and the FATE_LOCAL_WATCH nearest same-kernel ranks on each
 * side, in rank order around a ring of them. A local death wakes its neighbours and rank 0 at once and the others
 * through rank 0's verdict, with at most 2 * FATE_LOCAL_WATCH + 1 pidfds a rank instead of one per local peer (N^2
 * system calls on a host of N ranks).
 */
static void mark_local_watched(int me, int n)
{
    for (int d = 0, up = me, down = me; d < FATE_LOCAL_WATCH; d++) {
        do up = (up + 1) % n;
        while (up != me && !tp_fate.peers[up].local);
        do down = (down + n - 1) % n;
        while (down != me && !tp_fate.peers[down].local);
        if (up == me) break; /* fewer local peers than that: every one is marked */
        tp_fate.peers[up].watched = tp_fate.peers[down].watched = 1;
    }
    for (int r = 0; r < n; r++)
        if (tp_fate.peers[r].local && (me == 0 || r == 0)) tp_fate.peers[r].watched = 1;
}

tp_status_t tp_fate_start(tp_world_t *w)
{
    if (w->size == 1) return TP_OK;
    tp_fate.world = w;
    tp_fate.errors_return = w->errors_return;
    tp_fate.timeout_ns = (int64_t)(w->heartbeat_timeout_s * 1e9);
    tp_fate.interval_ns = tp_fate_interval_ns(w);
    tp_fate.boot_timeout_ns = (int64_t)(w->boot_timeout_s * 1e9);
    tp_fate.peers = calloc((size_t)w->size, sizeof(*tp_fate.peers));
    if (tp_fate.peers == NULL) {
        tp_log(TP_LOG_ERROR, "fate", "out of memory for %d peers' fate state", w->size);
        return TP_ERR_NO_MEMORY;
    }
    int64_t now = tp_now_ns();
    const char *kernel = w->peers[w->rank].kernel;
    for (int r = 0; r < w->size; r++) {
        tp_fate.peers[r].pidfd = -1;
        tp_fate.peers[r].local = r != w->rank && kernel[0] != '\0' && strcmp(w->peers[r].kernel, kernel) == 0;
    }
    mark_local_watched(w->rank, w->size);
    for (int r = 0; r < w->size; r++) {
        tp_fate.peers[r].fd = w->fate_fds[r];
        /* here, not in the fate thread: its short slice makes N system calls there span many turns on a busy core */
        if (tp_fate.peers[r].watched)
            tp_fate.peers[r].pidfd = (int)syscall(SYS_pidfd_open, w->peers[r].pid, 0); /* -1: the connection alone */
        tp_fate.peers[r].last_rx = now;
        if (tp_fate.peers[r].fd >= 0) tp_fd_set_nonblocking(tp_fate.peers[r].fd);
        tp_msg_reader_init(&tp_fate.peers[r].reader, FATE_BYE_MAX);
    }
    tp_status_t s = TP_ERR_SYSTEM;
    tp_fate.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (tp_fate.wake_fd < 0) {
        tp_log(TP_LOG_ERROR, "fate", "eventfd: %s", strerror(errno));
        goto err_free;
    }
    if ((s = tp_fate_watch_open(w)) != TP_OK || (s = tp_stop_open()) != TP_OK) goto err_free;
    tp_fate.finished = 0;
    atomic_store(&tp_fate.quit, 0);
    tp_fate.finalize_requested = 0;
    tp_fate.finalize_table = NULL;
    tp_fate.reported = tp_fate.report_pending = 0;
    tp_fate.report_rank = -1;
    tp_fate.suspect = -1;
    tp_fate.relay_at = 0;
    atomic_store(&tp_fate.verdict, 0);
    tp_fate.deciding = 0;
    tp_fate.test_burn_ns = (int64_t)(tp_config_seconds("TP_TEST_FATE_BURN") * 1e9); /* for tests of a starved one */
    tp_fate.first_hb_at = tp_now_ns();
    tp_fate_heartbeat_all(); /* before tp_init returns: peers count this rank's silence from here (it is live) */
    int rc = pthread_create(&tp_fate.thread, NULL, tp_fate_thread_main, w);
    if (rc != 0) {
        tp_log(TP_LOG_ERROR, "fate", "cannot start the fate thread: %s", strerror(rc));
        s = TP_ERR_SYSTEM;
        goto err_free;
    }
    /* named here, not by the thread, which may not run for a while: peers on this kernel look for it by name */
    pthread_setname_np(tp_fate.thread, FATE_THREAD_NAME);
    tp_fate.running = 1;
    return TP_OK;
err_free: /* the connections stay the caller's: closing them is how peers learn this rank failed */
    fate_free(w, 0);
    return s;
}

tp_status_t tp_fate_failed(void) { return atomic_load(&tp_fate.verdict) ? tp_fate.failure_status : TP_OK; }

int tp_fate_failure(tp_failure_t *out)
{
    if (!atomic_load(&tp_fate.verdict)) return 0;
    if (out != NULL) *out = tp_fate.failure; /* set once, before the flag */
    return 1;
}

/* Whether the verdict came within two heartbeat timeouts. */
static int wait_verdict(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + 2 * tp_fate.timeout_ns + 100000000;
    until.tv_sec += ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&tp_fate.lock);
    while (!atomic_load(&tp_fate.verdict))
        if (pthread_cond_timedwait(&tp_fate.verdict_cond, &tp_fate.lock, &until) != 0) break;
    pthread_mutex_unlock(&tp_fate.lock);
    return atomic_load(&tp_fate.verdict);
}

/* The verdict on a failure seen here; own: it is this rank's (tp_init's), so it goes to rank 0 at once, without
 * first waiting for a peer's failure to explain it. Returns only in return mode. */
static tp_status_t await_verdict(tp_status_t s, const char *fn, int own)
{
    /* The cause reaches rank 0 and comes back as the verdict; a call that failed without a report (its peer
     * reported instead) waits for it too. When none comes, nobody explains the failure: it is this rank's own, and
     * it goes to rank 0 like any report, so every rank names the same one (two ranks whose calls failed alike, each
     * deciding alone, named each other's exit). */
    int have = !own && wait_verdict();
    if (!have) {
        char reason[600];
        snprintf(reason, sizeof(reason), "%s failed (%s)", fn, tp_last_error());
        tp_fate_blame(tp_fate.world->rank, s, reason);
        have = wait_verdict();
    }
    if (!tp_fate.errors_return) {
        if (!have) {
            char reason[600];
            snprintf(reason, sizeof(reason), "%s failed (%s) and no peer's failure explains it", fn, tp_last_error());
            const tp_peer_record_t *me = &tp_fate.world->peers[tp_fate.world->rank];
            tp_failure_t own_failure = {
                .rank = tp_fate.world->rank, .host = me->host, .pid = me->pid, .reason = reason};
            tp_fate_die(&own_failure);
        }
        for (;;) pause(); /* the fate thread is ending this process */
    }
    if (!have || (own && tp_fate.failure.rank == tp_fate.world->rank)) return s; /* its own message stands */
    const tp_failure_t *f = &tp_fate.failure;
    tp_log_status(TP_LOG_DEBUG, "fate", "%s: peer rank %d (host %s, pid %d) failed: %s", fn, f->rank, f->host,
                  (int)f->pid, f->reason);
    return tp_fate.failure_status;
}

tp_status_t tp_fate_call_failed(tp_status_t s, const char *fn)
{
    if (!tp_fate.running) return s;
    return await_verdict(s, fn, 0);
}

/* Waits for the thread to end (quit: now, without a BYE), then frees what fate made. */
static void fate_stop(tp_world_t *w, int quit)
{
    pthread_mutex_lock(&tp_fate.lock);
    if (quit) atomic_store(&tp_fate.quit, 1);
    pthread_mutex_unlock(&tp_fate.lock);
    wake();
    pthread_mutex_lock(&tp_fate.lock);
    while (!tp_fate.finished) pthread_cond_wait(&tp_fate.done_cond, &tp_fate.lock);
    tp_fate.running = 0;
    pthread_mutex_unlock(&tp_fate.lock);
    pthread_join(tp_fate.thread, NULL);
    fate_free(w, 1);
}

tp_status_t tp_fate_abandon(tp_world_t *w, tp_status_t s, const char *fn)
{
    if (!tp_fate.running) return s;
    /* a peer- or job-scope status has a cause elsewhere, which the verdict names; any other is this rank's own */
    s = await_verdict(s, fn, !tp_fate_status(s));
    fate_stop(w, 1);
    return s;
}

tp_status_t tp_fate_finalize(tp_world_t *w, const char *table)
{
    if (!tp_fate.running) return TP_OK;
    pthread_mutex_lock(&tp_fate.lock);
    tp_fate.finalize_requested = 1;
    tp_fate.finalize_table = table;
    pthread_mutex_unlock(&tp_fate.lock);
    fate_stop(w, 0);
    if (!atomic_load(&tp_fate.verdict)) return TP_OK;
    const tp_failure_t *f = &tp_fate.failure;
    tp_log_status(TP_LOG_DEBUG, "fate", "tp_finalize: peer rank %d (host %s, pid %d) failed: %s", f->rank, f->host,
                  (int)f->pid, f->reason);
    return TP_ERR_PEER_FAILED;
}
