/* install_engine: what make installcheck builds against the installed tp.h and libtp (through pkg-config) and runs
 * under the installed tprun: every rank sums rank + 1 and checks the rank-order sum. */
#include <stdio.h>

#include <tp.h>

int main(void)
{
    tp_comm_t *w;
    tp_status_t s = tp_init(NULL, &w);
    if (s != TP_OK) {
        fprintf(stderr, "install_engine: tp_init: %s (%s)\n", tp_status_string(s), tp_last_error());
        return 1;
    }
    int me = tp_comm_rank(w), n = tp_comm_size(w);
    double mine = me + 1, sum = 0;
    s = tp_all_reduce(w, &mine, &sum, 1, TP_F64, TP_SUM, NULL);
    if (s != TP_OK || sum != n * (n + 1) / 2.0) {
        fprintf(stderr, "install_engine: rank %d: all_reduce gave %g (%s), expected %g\n", me, sum, tp_status_string(s),
                n * (n + 1) / 2.0);
        return 1;
    }
    if (me == 0) printf("install_engine: %d ranks, libtp %s: all_reduce sum %g: PASS\n", n, tp_version(), sum);
    return tp_finalize(w) == TP_OK ? 0 : 1;
}
