/* runtime_fate.h: the fate thread: heartbeats with rank 0, failure broadcast, callbacks, fast exit. */
#ifndef RUNTIME_FATE_H
#define RUNTIME_FATE_H

#include "runtime_world.h"

/* How often a rank sends every watched peer a heartbeat: a quarter of TP_HEARTBEAT_TIMEOUT. */
int64_t tp_fate_interval_ns(const tp_world_t *w);
/* Starts watching the job over the bootstrap connections (w->fate_fds); a world of 1 needs nothing. */
tp_status_t tp_fate_start(tp_world_t *w);
/*
 * Leaves the job cleanly: sends this rank's call counts (table, tp_coll_stop_table's text; kept until it returns)
 * with its BYE, waits until every rank is finalizing, then stops the thread and closes the fds. After a failure
 * (TP_ERRORS=return) it returns TP_ERR_PEER_FAILED at once.
 */
tp_status_t tp_fate_finalize(tp_world_t *w, const char *table);
/*
 * The end of a call that failed with a peer- or job-scope status s: waits for the verdict (the failure every rank
 * names), then returns the status for the engine with the verdict as this thread's last error (TP_ERRORS=return),
 * or never returns: the fate path ends the process (fatal).
 */
tp_status_t tp_fate_call_failed(tp_status_t s, const char *fn);
/*
 * The end of fate in a tp_init (fn) that failed with s after tp_fate_start: the failure reaches the job as a failed
 * call's does (a status not of peer or job scope is this rank's own, and goes to rank 0 at once), then the thread
 * is joined and the connections, pidfds and memory fate holds are released, so the world can be freed. Returns
 * the status tp_init returns (TP_ERRORS=return; s when the verdict names this rank), or never returns (fatal).
 */
tp_status_t tp_fate_abandon(tp_world_t *w, tp_status_t s, const char *fn);
/* Whether s is a rank's or the job's failure, the fate path's business (TP_STOPPED is not: peers that called
 * tp_finalize did not fail). */
static inline int tp_fate_status(tp_status_t s) { return tp_status_scope(s) >= TP_SCOPE_PEER && s != TP_STOPPED; }
/* The job's failure status once it has failed (a verdict is in; a waiting call stops at once), else TP_OK. */
tp_status_t tp_fate_failed(void);

#endif
