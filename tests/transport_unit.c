/* transport_unit: reach priority picking, the per-pair data's encoding, and what tp_transport_register refuses. */
#include <stdlib.h>
#include <string.h>

#include "runtime_pairs.h"
#include "runtime_transports.h"
#include "unit_check.h"

static void test_pick(void)
{
    int none[3] = {TP_REACH_NO, TP_REACH_NO, TP_REACH_NO}, one[3] = {TP_REACH_NO, 1, TP_REACH_NO};
    int best_last[3] = {1, 2, 7}, tie[3] = {4, 9, 9}, neg[2] = {-3, 2};
    CHECK(tp_transports_pick(none, 3) == -1, "nobody reaches: -1");
    CHECK(tp_transports_pick(one, 3) == 1, "the only one that reaches");
    CHECK(tp_transports_pick(best_last, 3) == 2, "the highest priority wins, wherever it is in the order");
    CHECK(tp_transports_pick(tie, 3) == 1, "equal priorities: the earlier in TP_TRANSPORTS order");
    CHECK(tp_transports_pick(neg, 2) == 1, "a negative answer cannot reach");
    CHECK(tp_transports_pick(one, 0) == -1, "no transports");
}

static void test_pairs(void)
{
    uint8_t *buf = NULL, big[TP_TRANSPORT_PAIR_MAX];
    size_t len = 0, cap = 0;
    for (size_t i = 0; i < sizeof(big); i++) big[i] = (uint8_t)(i * 7);
    tp_pair_blob_t in[3] = {{.from = 2, .to = 0, .len = 3, .data = (const uint8_t *)"a\0b"},
                            {.from = 2, .to = 5, .len = 0, .data = NULL},
                            {.from = 2, .to = 1, .len = TP_TRANSPORT_PAIR_MAX, .data = big}};
    snprintf(in[0].transport, sizeof(in[0].transport), "verbs");
    snprintf(in[1].transport, sizeof(in[1].transport), "shm");
    snprintf(in[2].transport, sizeof(in[2].transport), "x");
    for (int i = 0; i < 3; i++) CHECK(tp_pairs_append(&buf, &len, &cap, &in[i]) == 0, "append %d", i);
    tp_pair_blob_t *out = NULL;
    int n = 0;
    char why[256] = "";
    CHECK(tp_pairs_parse(buf, len, 6, &out, &n, why, sizeof(why)) == TP_OK && n == 3, "round trip: %s", why);
    for (int i = 0; i < n && i < 3; i++)
        CHECK(out[i].from == in[i].from && out[i].to == in[i].to && out[i].len == in[i].len &&
                  strcmp(out[i].transport, in[i].transport) == 0 &&
                  (in[i].len == 0 || memcmp(out[i].data, in[i].data, in[i].len) == 0),
              "blob %d comes back whole", i);
    free(out);
    CHECK(tp_pairs_parse(buf, 0, 6, &out, &n, why, sizeof(why)) == TP_OK && n == 0, "empty: no blobs");
    free(out);
    /* Anything malformed is refused with a reason: a rank outside the world, a cut message, an oversized blob. */
    CHECK(tp_pairs_parse(buf, len, 5, &out, &n, why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, "out of range"),
          "rank 5 in a world of 5: %s", why);
    for (size_t cut = 1; cut < len; cut += cut < 40 ? 1 : 997) {
        why[0] = '\0';
        int ok = tp_pairs_parse(buf, cut, 6, &out, &n, why, sizeof(why)) == TP_OK;
        if (ok) free(out);
        /* a cut at an entry boundary is a shorter valid message */
        CHECK(!ok || cut == 21 || cut == 37, "cut at %zu accepted", cut);
        CHECK(ok || why[0] != '\0', "cut at %zu refused without a reason", cut);
    }
    buf[len - TP_TRANSPORT_PAIR_MAX - 4] = 1; /* the last blob's length (little-endian), one past the maximum */
    CHECK(tp_pairs_parse(buf, len, 6, &out, &n, why, sizeof(why)) == TP_ERR_PROTOCOL, "a blob over the maximum");
    uint8_t noname[13] = {0};
    CHECK(tp_pairs_parse(noname, sizeof(noname), 6, &out, &n, why, sizeof(why)) == TP_ERR_PROTOCOL,
          "a blob without a transport name");
    free(buf);
}

static tp_status_t fake_open(const tp_transport_env_t *env, void **state, char *address, size_t len)
{
    return TP_ERR_UNSUPPORTED;
}

static void test_register(void)
{
    extern const tp_transport_ops_t tp_tcp_ops;
    tp_transport_ops_t ops = tp_tcp_ops;
    CHECK(tp_transport_register(&tp_tcp_ops) == TP_ERR_INVALID, "a second transport named tcp is refused");
    CHECK(tp_transport_register(NULL) == TP_ERR_INVALID, "no table");
    ops.name = "unit";
    ops.event_fds = NULL;
    CHECK(tp_transport_register(&ops) == TP_ERR_INVALID, "a NULL op is refused (unsupported ones use the stubs)");
    ops.event_fds = tp_transport_unsupported_event_fds;
    ops.abi_version = TP_TRANSPORT_ABI - 1;
    CHECK(tp_transport_register(&ops) == TP_ERR_INVALID, "another ABI is refused");
    ops.abi_version = TP_TRANSPORT_ABI;
    ops.name = "un;it";
    CHECK(tp_transport_register(&ops) == TP_ERR_INVALID, "a name with ';' is refused");
    static tp_transport_ops_t good;
    good = tp_tcp_ops;
    good.name = "unit";
    good.open = fake_open;
    CHECK(tp_transport_register(&good) == TP_OK, "a complete table is taken");
}

int main(void)
{
    test_pick();
    test_pairs();
    test_register();
    if (failures == 0) printf("transport_unit: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
