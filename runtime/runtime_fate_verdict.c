/*
 * runtime_fate_verdict.c: the verdict, the job's first failure as every rank names it, and how a rank acts on it.
 *
 * Rank 0 is the arbiter: what any other rank suspects (a transport's closed connection, a dead process on its
 * host, a failed call) goes to rank 0, and rank 0's verdict, the first failure it learns of, is what every rank
 * names. A rank that learned of a failure ends (or, with TP_ERRORS=return, returns from its call) only after the
 * verdict reached it, and rank 0 sends the verdict to every rank before any of them acts on it; so a rank that ends
 * because of another's failure is never taken for the cause, whatever order its peers see connections close in.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime_fate.h"
#include "runtime_fate_internal.h"
#include "runtime_log.h"
#include "runtime_stop.h"

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
    for (int i = tp_fate.num_callbacks - 1; i >= 0; i--) tp_fate.callbacks[i].fn(f, tp_fate.callbacks[i].arg);
}

void tp_fate_die(const tp_failure_t *f)
{
    if (atomic_exchange(&tp_fate.dying, 1)) return;
    int n = tp_fate.num_callbacks, own = f->rank == tp_fate.world->rank;
    int status = own ? TP_EXIT_FAILED : TP_EXIT_PEER_FAILED; /* a launcher names the cause, not its consequences */
    char who[TP_HOST_MAX + 64] = "this rank";
    if (!own) snprintf(who, sizeof(who), "peer rank %d (host %s, pid %d)", f->rank, f->host, (int)f->pid);
    tp_log(TP_LOG_ERROR, "fate", "%s failed: %s; %s%d fate callback%s, then exiting with status %d", who, f->reason,
           n ? "running " : "", n, n == 1 ? "" : "s", status);
    tp_fate.stage.logged = tp_now_ns();
    run_callbacks(f);
    flush_stream(stdout);
    flush_stream(stderr);
    tp_fate.stage.called = tp_now_ns();
    tp_log(TP_LOG_DEBUG, "fate",
           "stages (monotonic ns): woke %lld via %s decided %lld sent %lld-%lld quiesced %lld logged %lld "
           "called %lld exit %lld",
           (long long)tp_fate.stage.woke, tp_fate.stage.via ? tp_fate.stage.via : "-", (long long)tp_fate.stage.decided,
           (long long)tp_fate.stage.sent_first, (long long)tp_fate.stage.sent_last, (long long)tp_fate.stage.quiesced,
           (long long)tp_fate.stage.logged, (long long)tp_fate.stage.called, (long long)tp_now_ns());
    _exit(status);
}

/*
 * Ends our side of every fate connection in order: a FIN after the FAIL just sent, and nothing left unread, so
 * exiting does not turn into a reset that would make a peer drop the FAIL before reading it.
 */
static void quiesce_connections(void)
{
    char sink[4096];
    for (int r = 0; r < tp_fate.world->size; r++) {
        int fd = tp_fate.peers[r].fd;
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
void tp_fate_decide(int rank, tp_status_t status, const char *reason, int from_zero)
{
    tp_world_t *w = tp_fate.world;
    if (atomic_load(&tp_fate.verdict) || tp_fate.deciding) return; /* only the fate thread decides */
    tp_fate.deciding = 1;
    tp_fate.stage.decided = tp_now_ns();
    int known = rank >= 0 && rank < w->size;
    snprintf(tp_fate.failure_host, sizeof(tp_fate.failure_host), "%s", known ? w->peers[rank].host : "");
    snprintf(tp_fate.failure_reason, sizeof(tp_fate.failure_reason), "%s", reason);
    tp_fate.failure = (tp_failure_t){.rank = rank,
                                     .host = tp_fate.failure_host,
                                     .pid = known ? w->peers[rank].pid : 0,
                                     .reason = tp_fate.failure_reason};
    tp_fate.failure_status = tp_fate_status(status) ? status : TP_ERR_PEER_FAILED;
    /* Out before this rank can act on it (once its call returns, the engine may exit at once): rank 0 tells every
     * rank; another rank that decided itself tells rank 0, which reads it before this rank's end. */
    tp_fate.stage.sent_first = tp_now_ns();
    if (w->rank == 0) {
        for (int r = 1; r < w->size; r++)
            if (tp_fate.peers[r].fd >= 0)
                tp_wire_send_fail(tp_fate.peers[r].fd, &tp_fate.failure, tp_fate.failure_status);
    } else if (rank != 0 && !from_zero && tp_fate.peers[0].fd >= 0) {
        tp_wire_send_fail(tp_fate.peers[0].fd, &tp_fate.failure, tp_fate.failure_status);
    }
    tp_fate.stage.sent_last = tp_now_ns();
    if (!tp_fate.errors_return) {
        quiesce_connections();
        tp_fate.stage.quiesced = tp_now_ns();
        tp_fate_die(&tp_fate.failure);
    }
    const tp_failure_t *f = &tp_fate.failure;
    int n = tp_fate.num_callbacks;
    tp_log(TP_LOG_ERROR, "fate",
           "peer rank %d (host %s, pid %d) failed: %s; %s%d fate callback%s; calls return "
           "the failure (TP_ERRORS=return)",
           f->rank, f->host, (int)f->pid, f->reason, n ? "running " : "", n, n == 1 ? "" : "s");
    run_callbacks(f);
    pthread_mutex_lock(&tp_fate.lock); /* now calls may return it */
    atomic_store(&tp_fate.verdict, 1);
    pthread_cond_broadcast(&tp_fate.verdict_cond);
    pthread_mutex_unlock(&tp_fate.lock);
    tp_stop_wake_failed();
}

/*
 * Rank 0, before it names a rank on what it or another rank saw (a closed connection): what that rank itself sent
 * is read first. A rank that ended because of another's failure sent its FAIL before its connections closed, so it
 * is here already even when the report of its closed connection came in on an earlier-read socket.
 */
static void arbitrate(int rank, tp_status_t status, const char *reason, int64_t now)
{
    if (rank > 0 && rank < tp_fate.world->size && tp_fate.peers[rank].fd >= 0 && !tp_fate.peers[rank].servicing)
        (void)tp_fate_service_peer(rank, now);
    tp_fate_decide(rank, status, reason, 0);
}

/*
 * What this rank saw: rank 0 decides at once; another rank tells rank 0 and waits for its verdict (which names the
 * first failure rank 0 learned of), deciding itself only if none comes within the heartbeat timeout. A suspicion of
 * rank 0 itself waits for rank 0's connection: a verdict it sent comes before its end.
 */
void tp_fate_suspect(int rank, tp_status_t status, const char *reason, int64_t now)
{
    tp_world_t *w = tp_fate.world;
    if (atomic_load(&tp_fate.verdict)) return;
    if (w->rank == 0) {
        arbitrate(rank, status, reason, now);
        return;
    }
    if (tp_fate.suspect >= 0) return; /* rank 0 has it: its verdict covers this too */
    tp_fate.suspect = rank;
    tp_fate.suspect_status = status;
    snprintf(tp_fate.suspect_reason, sizeof(tp_fate.suspect_reason), "%s", reason);
    tp_fate.suspect_until = now + tp_fate.timeout_ns;
    tp_failure_t f = {.rank = rank, .host = "", .pid = 0, .reason = reason};
    if (rank > 0 && rank < w->size) {
        f.host = w->peers[rank].host;
        f.pid = w->peers[rank].pid;
    }
    if (rank != 0 && tp_fate.peers[0].fd >= 0) tp_wire_send_fail(tp_fate.peers[0].fd, &f, status);
}

void tp_fate_on_fail(int from, char *payload, int64_t now)
{
    int rank;
    tp_status_t status; /* tp_fate_decide keeps only a peer- or job-scope one */
    char *reason;
    if (tp_wire_parse_fail(payload, tp_fate.world->size, &rank, &status, &reason) != 0) {
        tp_fate_suspect(from, TP_ERR_PROTOCOL, "sent a malformed failure report", now);
        return;
    }
    if (tp_fate.world->rank != 0) {
        tp_fate_decide(rank, status, reason, 1);
        return;
    }
    char why[FATE_MSG_MAX + 64];
    snprintf(why, sizeof(why), "%s (reported by rank %d)", reason, from);
    arbitrate(rank, status, from == rank ? reason : why, now);
}
