/* transport_unit: reach priority picking, the per-pair data's encoding, what tp_transport_register refuses, and
 * tp_mem_alloc's memory as a transport finds it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime_pairs.h"
#include "runtime_record.h"
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
    CHECK(tp_pairs_parse(buf, len, 6, &out, &n, why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, "out of range"),
          "a blob over the maximum: %s", why);
    uint8_t noname[13] = {0};
    CHECK(tp_pairs_parse(noname, sizeof(noname), 6, &out, &n, why, sizeof(why)) == TP_ERR_PROTOCOL,
          "a blob without a transport name");
    free(buf);
}

/* "unit": TCP underneath, reaching the odd ranks only, with a priority above TCP's. */
static tp_status_t unit_open(const tp_transport_env_t *env, void **state, char *address, size_t len)
{
    return tp_transport_find("tcp")->open(env, state, address, len);
}

static int unit_reach(void *state, const tp_peer_view_t *peer)
{
    return peer->address != NULL && peer->rank % 2 == 1 ? 3 : TP_REACH_NO;
}

/* unit's post takes every transfer and moves nothing: what reaches it passed the runtime's checks */
static int unit_posts;
static tp_status_t unit_post(void *state, tp_xfer_t *x)
{
    (void)state, (void)x;
    unit_posts++;
    return TP_OK;
}

static void test_register(void)
{
    const tp_transport_ops_t *tcp = tp_transport_find("tcp");
    CHECK(tcp != NULL && tp_transport_find("unit") == NULL && tp_transport_find(NULL) == NULL, "find by name");
    if (tcp == NULL) return;
    tp_transport_ops_t ops = *tcp;
    CHECK(tp_transport_register(tcp) == TP_ERR_INVALID, "a second transport named tcp is refused");
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
    good = *tcp;
    good.name = "unit";
    good.open = unit_open;
    good.reach = unit_reach;
    good.post = unit_post;
    CHECK(tp_transport_register(&good) == TP_OK && tp_transport_find("unit") == &good, "a complete table is taken");
}

/*
 * Rank 0 of 5 with tcp and "unit" open (TP_TRANSPORTS=spec): unit wins the odd ranks (a higher priority), tcp the
 * others. Rank no_tcp (-1: none) published no tcp address.
 */
static tp_status_t lend_none(void *arg, size_t off, const void *bytes, size_t n)
{
    (void)arg, (void)off, (void)bytes, (void)n;
    return TP_OK;
}

static void test_select(const char *spec, int no_tcp, const char *const *want, tp_status_t want_status)
{
    static uint8_t key[TP_JOB_KEY_BYTES];
    tp_world_t *w = calloc(1, sizeof(*w));
    w->rank = 0;
    w->size = 5;
    w->job_key[0] = key[0];
    w->boot_timeout_s = 1;
    snprintf(w->transports, sizeof(w->transports), "%s", spec);
    snprintf(w->boot_host, sizeof(w->boot_host), "127.0.0.1");
    CHECK(tp_transports_open(w) == TP_OK, "%s: open", spec);
    w->peers = calloc(5, sizeof(*w->peers));
    static tp_record_room_t rooms[5];
    for (int r = 0; r < 5; r++) {
        tp_record_room_point(&rooms[r], &w->peers[r]);
        snprintf(rooms[r].host, sizeof(rooms[r].host), "h%d", r);
        snprintf(rooms[r].addresses, sizeof(rooms[r].addresses), "%s",
                 r == no_tcp ? "unit=127.0.0.1:9" : "tcp=127.0.0.1:9;unit=127.0.0.1:9");
    }
    CHECK(tp_transports_select(w) == want_status, "%s: select", spec);
    for (int r = 0; want_status == TP_OK && r < 5; r++) {
        int ip = -1;
        const char *got = tp_transports_name(w, r, &ip);
        CHECK(strcmp(got, want[r]) == 0 && ip == (r != 0), "%s: rank %d over %s, expected %s", spec, r, got, want[r]);
    }
    if (want_status == TP_OK) { /* memory a transport cannot move is refused before it gets there */
        tp_xfer_t x = {.peer = 1, .is_send = 1, .mem = TP_MEM_CUDA};
        CHECK(tp_transports_post(w, &x) == TP_ERR_UNSUPPORTED, "%s: CUDA memory over a host-only transport", spec);
        /* and a lent receive or a mirrored send over a transport whose caps do not offer them (unit's, tcp's) */
        uint8_t bytes[2] = {0};
        tp_xfer_t lend = {.peer = 1, .buf = bytes, .len = 1, .deliver = lend_none};
        tp_xfer_t mirror = {.peer = 1, .is_send = 1, .buf = bytes, .len = 1, .ready = 1, .mirror = bytes + 1};
        tp_xfer_t plain = {.peer = 1, .is_send = 1, .buf = bytes, .len = 1, .ready = 1};
        int posts = unit_posts, over_unit = strcmp(want[1], "unit") == 0;
        CHECK(tp_transports_post(w, &lend) == TP_ERR_INVALID, "%s: a lent receive over %s", spec, want[1]);
        CHECK(tp_transports_post(w, &mirror) == TP_ERR_INVALID, "%s: a mirrored send over %s", spec, want[1]);
        CHECK(!over_unit || (tp_transports_post(w, &plain) == TP_OK && unit_posts == posts + 1),
              "%s: a plain send reaches unit's post, and only it", spec);
    }
    tp_transports_close(w);
    free(w->peers);
    free(w);
}

/* tp_mem_alloc: what it refuses, and what tp_mem_find tells a transport (only whole spans of live allocations) */
static void test_mem(void)
{
    void *a = NULL, *b = NULL, *none = (void *)1;
    tp_mem_ref_t ref = {0};
    CHECK(tp_mem_alloc(0, &none) == TP_ERR_INVALID && none == NULL, "0 bytes refused, *ptr NULL");
    CHECK(tp_mem_alloc(SIZE_MAX - 5, &none) == TP_ERR_INVALID, "a size that cannot be rounded to pages refused");
    CHECK(tp_mem_alloc(100, NULL) == TP_ERR_INVALID, "no place for the address refused");
    CHECK(tp_mem_alloc(10000, &a) == TP_OK && a != NULL && ((uintptr_t)a & 4095) == 0, "10000 bytes, page-aligned");
    CHECK(tp_mem_alloc(4096, &b) == TP_OK && b != NULL, "a second allocation");
    uint8_t *pa = a, stack[64];
    CHECK(pa[0] == 0 && pa[9999] == 0, "zeroed");
    memset(pa, 7, 10000);
    CHECK(tp_mem_find(pa + 100, 9000, &ref) == 1 && ref.offset == 100 && ref.bytes == 12288, "a span inside");
    struct stat st;
    int seals = fcntl(ref.fd, F_GET_SEALS);
    CHECK(fstat(ref.fd, &st) == 0 && (uint64_t)st.st_ino == ref.ino && st.st_size == 12288, "its memfd and inode");
    CHECK(seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_SEAL), "sealed against shrinking");
    CHECK(ftruncate(ref.fd, 0) != 0, "so it cannot be cut short under a reader");
    CHECK(tp_mem_find(pa + 100, 12288, &ref) == 0, "a span running past its end is not found");
    CHECK(tp_mem_find(stack, sizeof(stack), &ref) == 0, "other memory is not found");
    CHECK(tp_mem_find(b, 4096, &ref) == 1 && ref.offset == 0 && ref.bytes == 4096, "the second, whole");
    CHECK(tp_mem_free(pa + 8) == TP_ERR_INVALID, "an address inside refused");
    CHECK(tp_mem_free(stack) == TP_ERR_INVALID, "an address it did not return refused");
    CHECK(tp_mem_free(a) == TP_OK && tp_mem_find(a, 1, &ref) == 0, "freed: not found again");
    CHECK(tp_mem_free(a) == TP_ERR_INVALID, "freed twice refused");
    CHECK(tp_mem_free(NULL) == TP_OK, "NULL: nothing to do");
    CHECK(tp_mem_find(b, 1, &ref) == 1 && tp_mem_free(b) == TP_OK, "the other one still there, then freed");
}

int main(void)
{
    test_mem();
    test_pick();
    test_pairs();
    test_register();
    static const char *const both[] = {"self", "unit", "tcp", "unit", "tcp"};
    static const char *const tcp_only[] = {"self", "tcp", "tcp", "tcp", "tcp"};
    test_select("", -1, both, TP_OK);
    test_select("tcp,unit", -1, both, TP_OK); /* priority, not TP_TRANSPORTS order, decides */
    test_select("^unit", -1, tcp_only, TP_OK);
    test_select("", 3, both, TP_OK);                       /* unit reaches rank 3 anyway */
    test_select("", 2, both, TP_ERR_UNSUPPORTED);          /* nobody reaches rank 2 */
    test_select("^unit", 3, tcp_only, TP_ERR_UNSUPPORTED); /* nor rank 3 without unit */
    if (failures == 0) printf("transport_unit: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
