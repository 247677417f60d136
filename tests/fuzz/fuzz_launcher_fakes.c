/* fuzz_launcher_fakes.c: the job module (launcher/core/job.c, which runs the loop) as the launcher harnesses need it:
 * a rank's end is recorded, nothing is torn down or reaped. */
#include "fuzz_util.h"
#include "core/job.h"

void tprun_loop_rank_ended(tprun_loop_t *L, int r, int wstatus)
{
    FUZZ_ASSERT(r >= 0 && r < L->job->np, "a rank out of range ended");
    FUZZ_ASSERT(L->job->ranks[r].running, "a rank ended twice");
    L->job->ranks[r].running = 0;
    L->job->ranks[r].wstatus = wstatus;
    L->running--;
}

void tprun_loop_teardown(tprun_loop_t *L) { (void)L; }
