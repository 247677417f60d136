/* runtime_fate.h: the fate thread: heartbeats with rank 0, failure broadcast, callbacks, fast exit. */
#ifndef RUNTIME_FATE_H
#define RUNTIME_FATE_H

#include "runtime_world.h"

/* Starts watching the job over the bootstrap connections (w->fate_fds); a world of 1 needs nothing. */
tp_status_t tp_fate_start(tp_world_t *w);
/* Leaves the job cleanly: waits until every rank is finalizing, then stops the thread and closes the fds. */
tp_status_t tp_fate_finalize(tp_world_t *w);

#endif
