/* runtime_rank: a rank program for the bootstrap, settings and fate tests (modes chosen by argv). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tp.h>

static long callback_ms; /* --callback-ms: a callback with work to do (ncclCommAbort, say) takes this long */

static void on_failure(const tp_failure_t *f, void *arg)
{
    printf("callback: rank %d saw peer %d (%s) fail: %s\n", *(int *)arg, f->rank, f->host, f->reason);
    fflush(stdout);
    if (callback_ms <= 0) return;
    struct timespec ts = {callback_ms / 1000, callback_ms % 1000 * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    printf("callback done: rank %d\n", *(int *)arg);
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr, "usage: runtime_rank boot|nccl-env|spin|block|die RANK SIG|exit RANK CODE|finalize-die RANK "
                    "[--setting KEY=VALUE]... [--callback-ms MS]\n");
    exit(2);
}

/* This rank as its launcher numbered it, for a callback that runs before tp_init returns (a peer that fails
 * while this rank is still starting); -1 when no launcher variable says. */
static int launcher_rank(void)
{
    static const char *const vars[] = {"TP_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]) != NULL) return atoi(getenv(vars[i]));
    return -1;
}

int main(int argc, char **argv)
{
    static int my_rank = -1;
    my_rank = launcher_rank();
    if (argc < 2) usage();
    const char *mode = argv[1];
    int victim = -1, arg = 0, argi = 2;
    if (strcmp(mode, "die") == 0 || strcmp(mode, "exit") == 0) {
        if (argc < 4) usage();
        victim = atoi(argv[2]);
        arg = atoi(argv[3]);
        argi = 4;
    }
    tp_attr_t *attr;
    if (tp_attr_create(&attr) != TP_OK) return 1;
    for (; argi < argc; argi++) {
        if (strcmp(argv[argi], "--callback-ms") == 0 && argi + 1 < argc) {
            callback_ms = atol(argv[++argi]);
            continue;
        }
        if (strcmp(argv[argi], "--setting") != 0 || argi + 1 >= argc) usage();
        char *kv = argv[++argi], *eq = strchr(kv, '=');
        if (eq == NULL) usage();
        *eq = '\0';
        if (tp_attr_set_setting(attr, kv, eq + 1) != TP_OK) {
            fprintf(stderr, "runtime_rank: bad setting: %s\n", tp_last_error());
            return 3;
        }
    }
    tp_fate_register(on_failure, &my_rank);
    tp_comm_t *world;
    tp_status_t s = tp_init(attr, &world);
    tp_attr_destroy(attr);
    if (s != TP_OK) {
        fprintf(stderr, "runtime_rank: tp_init: %s\n", tp_status_string(s));
        return 1;
    }
    my_rank = tp_comm_rank(world);
    printf("ready rank %d of %d pid %d local %d/%d node %d job %s\n", my_rank, tp_comm_size(world), (int)getpid(),
           tp_comm_local_rank(world), tp_comm_local_size(world), tp_comm_node_rank(world), tp_comm_job_id(world));
    fflush(stdout);
    if (strcmp(mode, "nccl-env") == 0) { /* what tp_init left for NCCL to read */
        const char *h = getenv("NCCL_IB_HCA"), *g = getenv("NCCL_IB_GID_INDEX");
        printf("rank %d env: NCCL_IB_HCA=%s NCCL_IB_GID_INDEX=%s\n", my_rank, h ? h : "(unset)", g ? g : "(unset)");
        fflush(stdout);
    }
    if (strcmp(mode, "boot") == 0 || strcmp(mode, "nccl-env") == 0) return tp_finalize(world) == TP_OK ? 0 : 1;
    if (my_rank == victim && strcmp(mode, "die") == 0) raise(arg);
    if (my_rank == victim && strcmp(mode, "exit") == 0) _exit(arg);
    if (strcmp(mode, "block") == 0 || (victim >= 0 && my_rank != victim)) {
        for (;;) pause(); /* the fate thread ends this rank */
    }
    volatile unsigned long spins = 0;
    for (;;) spins++; /* busy computing: the fate thread must still end this rank */
}
