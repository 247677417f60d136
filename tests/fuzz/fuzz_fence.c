/* fuzz_fence.c: the PMIx fence table fed the agents' "pf" lines as tprun_pmix_loop.c parses them, with ranks
 * failing and deadlines passing in between (launcher/tprun_pmix_fence.c, launcher/tprun_wire.c). */
#include <stdio.h>

#include "fuzz_util.h"
#include "tprun_pmix_fence.h"
#include "tprun_wire.h"

static int answers;

static void check_result(const tprun_fence_result_t *res, int num_nodes)
{
    FUZZ_ASSERT(res->nnodes >= 0 && res->nnodes <= num_nodes, "an answer to more hosts than there are");
    for (int i = 0; i < res->nnodes; i++)
        FUZZ_ASSERT(res->nodes[i] >= 0 && res->nodes[i] < num_nodes && (i == 0 || res->nodes[i] > res->nodes[i - 1]),
                    "an answer to a host twice or out of range");
    FUZZ_ASSERT(res->status == TPRUN_FENCE_OK || res->len == 0, "a failed fence with data");
}

static void on_done(void *ctx, tprun_fence_result_t *res)
{
    check_result(res, *(int *)ctx);
    answers++;
}

/* Byte 0: ranks (1 + b % 16); byte 1: hosts (1 + b % 4), rank r on host r % hosts. Then lines: "N pf SEQ MS SIG
 * B64" (host N's part, as an agent sends it), "x RANK" (a rank ended), "t MS" (the clock reached MS). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int world = 1 + data[0] % 16, nodes = 1 + data[1] % 4, rank_node[16];
    for (int r = 0; r < world; r++) rank_node[r] = r % nodes;
    char *text = fuzz_strdup(data + 2, size - 2);
    tprun_fence_table_t *t = tprun_fence_table_create(world, nodes, rank_node);
    if (text == NULL || t == NULL) goto out;
    static char sig[4100];
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        unsigned seq;
        int node, ms, used = 0;
        unsigned char *part = NULL;
        size_t len = 0;
        if (sscanf(line, "%d pf %u %d %4095s %n", &node, &seq, &ms, sig, &used) == 4 && used > 0 &&
            tprun_wire_b64_decode(line + used, &part, &len) == 0) {
            tprun_fence_result_t res;
            char err[256];
            int rc = tprun_fence_contribute(t, node, sig, seq, part, len, ms / 1000.0, &res, err, sizeof(err));
            FUZZ_ASSERT(rc >= -1 && rc <= 1, "contribute returned something else");
            if (rc == 1) {
                check_result(&res, nodes);
                tprun_fence_result_free(&res);
            }
            free(part);
        } else if (sscanf(line, "x %d", &node) == 1) {
            tprun_fence_fail_rank(t, node, on_done, &nodes);
        } else if (sscanf(line, "t %d", &ms) == 1) {
            tprun_fence_expire(t, ms / 1000.0, on_done, &nodes);
            double next = tprun_fence_next_deadline(t);
            FUZZ_ASSERT(next == 0 || next > ms / 1000.0, "a fence past its deadline still pending");
        }
        FUZZ_ASSERT(tprun_fence_pending(t) >= 0, "a negative count of pending fences");
    }
out:
    tprun_fence_table_destroy(t);
    free(text);
    return 0;
}
