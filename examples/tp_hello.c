/* tp_hello: the smallest libtp engine: bootstraps, agrees a setting, prints the rank table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tp.h>

static void on_peer_failure(const tp_failure_t *f, void *arg)
{
    (void)arg;
    fprintf(stderr, "tp_hello: peer rank %d failed (%s); nothing to abort here\n", f->rank, f->reason);
}

int main(int argc, char **argv)
{
    tp_attr_t *attr;
    tp_comm_t *world;
    const char *model = "tp_hello-model-v1";
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--model=", 8) == 0) {
            model = argv[i] + 8;
        } else {
            fprintf(stderr, "usage: tp_hello [--model=NAME]   (run it under tprun -n N)\n");
            return 2;
        }
    }
    if (tp_attr_create(&attr) != TP_OK || tp_attr_set_setting(attr, "model", model) != TP_OK) return 1;
    tp_fate_register(on_peer_failure, NULL);
    tp_status_t s = tp_init(attr, &world);
    tp_attr_destroy(attr);
    if (s != TP_OK) {
        fprintf(stderr, "tp_hello: tp_init failed: %s: %s\n", tp_status_string(s), tp_last_error());
        return 1;
    }
    int rank = tp_comm_rank(world), size = tp_comm_size(world);
    if (rank == 0) {
        printf("tp_hello: job %s, %d rank%s, libtp %s, agreed model=%s part_bytes=%s\n", tp_comm_job_id(world),
               size, size == 1 ? "" : "s", tp_version(), tp_comm_setting(world, "model"),
               tp_comm_setting(world, "part_bytes"));
        printf("%5s %-20s %8s %6s %5s %s\n", "rank", "host", "pid", "local", "node", "address");
    }
    int table_ok = 1;
    for (int r = 0; r < size; r++) { /* every rank holds the whole table: one entry per rank, in rank order */
        tp_peer_info_t p;
        if (tp_comm_peer(world, r, &p) != TP_OK || p.rank != r || p.pid <= 0) {
            fprintf(stderr, "tp_hello: rank %d: the rank table's entry %d is wrong\n", rank, r);
            table_ok = 0;
            continue;
        }
        if (rank == 0)
            printf("%5d %-20s %8d %6d %5d %s\n", p.rank, p.host, (int)p.pid, p.local_rank, p.node_rank, p.address);
    }
    fflush(stdout);
    s = tp_finalize(world);
    if (s != TP_OK) {
        fprintf(stderr, "tp_hello: tp_finalize failed: %s\n", tp_status_string(s));
        return 1;
    }
    /* tp_finalize returns on rank 0 only once every rank has finalized, so rank 0 speaks for the job. */
    if (rank == 0)
        printf("tp_hello: %d rank%s: bootstrap, settings agreement, rank table and collective finalize: %s\n", size,
               size == 1 ? "" : "s", table_ok ? "PASS" : "FAIL");
    return table_ok ? 0 : 1;
}
