/* launcher_pmix_unit.c: unit tests of the agent channel's base64 and of the cross-host PMIx fence table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tprun_pmix_fence.h"
#include "tprun_wire.h"

#include "unit_check.h"

static void test_base64(void)
{
    /* RFC 4648's test vectors, then every length of binary data round-tripped. */
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"-", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[64];
    for (size_t i = 0; i < 7; i++) {
        tprun_wire_b64_encode(plain[i], strlen(plain[i]), out);
        CHECK(strcmp(out, coded[i]) == 0, "encode \"%s\": %s", plain[i], out);
        CHECK(strlen(out) == tprun_wire_b64_len(strlen(plain[i])), "length of \"%s\"", plain[i]);
        unsigned char *back = NULL;
        size_t len = 99;
        CHECK(tprun_wire_b64_decode(coded[i], &back, &len) == 0 && len == strlen(plain[i]) &&
                  (len == 0 || memcmp(back, plain[i], len) == 0),
              "decode %s", coded[i]);
        free(back);
    }
    unsigned char bin[300];
    for (size_t i = 0; i < sizeof(bin); i++) bin[i] = (unsigned char)(i * 97 + 13);
    char *text = malloc(tprun_wire_b64_len(sizeof(bin)) + 1);
    for (size_t n = 1; n <= sizeof(bin); n++) {
        tprun_wire_b64_encode(bin, n, text);
        unsigned char *back = NULL;
        size_t len = 0;
        int ok = tprun_wire_b64_decode(text, &back, &len) == 0 && len == n && memcmp(back, bin, n) == 0;
        CHECK(ok, "round trip of %zu bytes", n);
        free(back);
    }
    free(text);
    /* Not base64: refused, nothing allocated. */
    static const char *const bad[] = {"", "Zg=", "Zm9", "Zm9v!", "Z===", "=Zm9", "Zg==Zg==", "Zm 9", "Zm9v\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned char *back = (unsigned char *)"untouched";
        size_t len = 7;
        CHECK(tprun_wire_b64_decode(bad[i], &back, &len) == -1 && len == 7, "\"%s\" accepted", bad[i]);
    }
}

/* Escaped values round-trip; a '%' without two hex digits stays as it is; a value of '%'s takes linear time. */
static void test_escape(void)
{
    char in[] = "a%b\nc\r%%\x01", esc[3 * sizeof(in)];
    tprun_wire_escape(in, esc);
    CHECK(strcmp(esc, "a%25b%0Ac%0D%25%25\x01") == 0, "%s", esc);
    tprun_wire_unescape(esc);
    CHECK(strcmp(esc, in) == 0, "round trip: %s", esc);
    static const char *const raw[] = {"%", "%4", "%4g", "%zz", "% 4", "%+1", "%-1", "100%", "%41%42%4", "%6a%6A"};
    static const char *const back[] = {"%", "%4", "%4g", "%zz", "% 4", "%+1", "%-1", "100%", "AB%4", "jj"};
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
        char buf[32];
        strcpy(buf, raw[i]);
        tprun_wire_unescape(buf);
        CHECK(strcmp(buf, back[i]) == 0, "\"%s\" unescaped to \"%s\", expected \"%s\"", raw[i], buf, back[i]);
    }
    size_t n = 512 << 10;
    char *big = malloc(3 * n + 1), *all = malloc(n + 1);
    memset(all, '%', n);
    all[n] = '\0';
    tprun_wire_escape(all, big);
    clock_t t0 = clock();
    tprun_wire_unescape(big);
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(strcmp(big, all) == 0 && cpu < 1, "512 KiB of '%%' unescaped in %.2f s of CPU", cpu);
    memset(big, '%', n); /* bare '%'s, each looked at once */
    big[n] = '\0';
    t0 = clock();
    tprun_wire_unescape(big);
    cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(strlen(big) == n && cpu < 1, "512 KiB of bare '%%' in %.2f s of CPU", cpu);
    free(big);
    free(all);
}

/* A number field of an agent's message is read within its line only, digits then a space or the end. */
static void test_number_field(void)
{
    static const struct {
        const char *text;
        size_t len; /* bytes of the line the field may use */
        long want;
        size_t used;
    } cases[] = {
        {"0 hi", 4, 0, 2}, {"7", 1, 7, 1},    {"12 3", 4, 12, 3},
        {"99", 2, 99, 2},  {"100", 3, -1, 0}, {"", 0, -1, 0},
        {" 1", 2, -1, 0},  {"+1", 2, -1, 0},  {"-1 x", 4, -1, 0},
        {"01", 2, -1, 0},  {"1x", 2, -1, 0},  {"\n0 hi", 5, -1, 0},
        {"5\n", 2, -1, 0}, {"123", 2, 12, 2}, {"99999999999999999999", 20, -1, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t used = 77;
        long got = tprun_wire_parse_uint(cases[i].text, cases[i].len, 99, &used);
        CHECK(got == cases[i].want && (got < 0 ? used == 77 : used == cases[i].used), "\"%s\"/%zu: %ld used %zu",
              cases[i].text, cases[i].len, got, used);
    }
    /* "o " and a line of blanks: nothing is read past the field's bytes (ASan reports a read beyond them). */
    size_t n = 65533;
    char *blanks = malloc(n);
    memset(blanks, ' ', n);
    size_t used = 0;
    CHECK(tprun_wire_parse_uint(blanks, n, 99, &used) == -1, "blanks");
    free(blanks);
}

/* What the done callback saw, for the fail and expire paths. */
static struct {
    int calls;
    tprun_fence_status_t status;
    int nnodes, node0, failed_rank;
    char missing[256];
} seen;

static void on_done(void *ctx, tprun_fence_result_t *res)
{
    (void)ctx;
    seen.calls++;
    seen.status = res->status;
    seen.nnodes = res->nnodes;
    seen.node0 = res->nnodes > 0 ? res->nodes[0] : -1;
    seen.failed_rank = res->failed_rank;
    snprintf(seen.missing, sizeof(seen.missing), "%s", res->missing);
}

static int part(tprun_fence_table_t *t, int node, const char *sig, unsigned seq, const char *data,
                tprun_fence_result_t *res, char *err)
{
    memset(res, 0, sizeof(*res));
    return tprun_fence_contribute(t, node, sig, seq, data, strlen(data), 0, res, err, 256);
}

static void test_fences(void)
{
    /* Ranks 0,1 on host 0; 2,3 on host 1; 4 on host 2. */
    const int rank_node[] = {0, 0, 1, 1, 2};
    tprun_fence_table_t *t = tprun_fence_table_create(5, 3, rank_node);
    tprun_fence_result_t res;
    char err[256];

    /* Complete when every host with a participant sent its part; data in host order, whatever the arrival. */
    CHECK(part(t, 2, "*", 0, "C", &res, err) == 0, "host 2 first: pending");
    CHECK(part(t, 0, "*", 0, "AA", &res, err) == 0, "host 0: pending");
    CHECK(part(t, 1, "*", 0, "B", &res, err) == 1, "host 1 completes it");
    CHECK(res.status == TPRUN_FENCE_OK && res.len == 4 && memcmp(res.data, "AABC", 4) == 0 && res.nnodes == 3,
          "result %d len %zu nodes %d", res.status, res.len, res.nnodes);
    tprun_fence_result_free(&res);
    CHECK(tprun_fence_pending(t) == 0, "nothing pending after completion");

    /* A subset waits only for its ranks' hosts; fences over other sets or numbers stay apart. */
    CHECK(part(t, 0, "1,2", 0, "x", &res, err) == 0, "subset: host 0 pending");
    CHECK(part(t, 0, "*", 1, "y", &res, err) == 0, "* #1: pending beside the subset");
    CHECK(part(t, 1, "1,2", 0, "z", &res, err) == 1 && res.nnodes == 2 && res.len == 2 &&
              memcmp(res.data, "xz", 2) == 0,
          "subset 1,2 completes with hosts 0 and 1 alone");
    tprun_fence_result_free(&res);
    CHECK(part(t, 1, "*", 2, "w", &res, err) == 0, "* #2 does not complete * #1");
    CHECK(tprun_fence_pending(t) == 2, "two pending: %d", tprun_fence_pending(t));

    /* What a host of ours never sends: refused with the reason. */
    CHECK(part(t, 2, "1,2", 5, "q", &res, err) == -1 && strstr(err, "has none of its ranks"), "host 2 in 1,2: %s", err);
    CHECK(part(t, 0, "*", 1, "y", &res, err) == -1 && strstr(err, "twice"), "second part: %s", err);
    static const char *const bad_sigs[] = {"2,1", "1,1", "0,5", "-1", "", "1,", ",1", "a", "1;2", "**"};
    for (size_t i = 0; i < sizeof(bad_sigs) / sizeof(bad_sigs[0]); i++)
        CHECK(part(t, 0, bad_sigs[i], 0, "", &res, err) == -1 && strstr(err, "ascending"), "signature \"%s\": %s",
              bad_sigs[i], err);
    CHECK(part(t, 3, "*", 9, "", &res, err) == -1, "host 3 of 3 accepted");

    /* A rank's failure ends the fences it is in: the hosts whose part is in hear now, the others on arrival. */
    memset(&seen, 0, sizeof(seen));
    tprun_fence_fail_rank(t, 4, on_done, NULL);
    CHECK(seen.calls == 2, "fences with rank 4: %d answered", seen.calls);
    CHECK(seen.status == TPRUN_FENCE_RANK_FAILED && seen.failed_rank == 4, "status %d rank %d", seen.status,
          seen.failed_rank);
    CHECK(tprun_fence_pending(t) == 0, "pending after the failure: %d", tprun_fence_pending(t));
    CHECK(part(t, 2, "*", 1, "late", &res, err) == 1 && res.status == TPRUN_FENCE_RANK_FAILED && res.nnodes == 1 &&
              res.nodes[0] == 2 && res.len == 0,
          "a part arriving after the failure gets the failure, to its host alone");
    tprun_fence_result_free(&res);
    memset(&seen, 0, sizeof(seen));
    tprun_fence_fail_rank(t, 0, on_done, NULL);
    CHECK(seen.calls == 0, "no pending fence has rank 0 any more: %d", seen.calls);
    /* A fence over a rank that already ended fails at its first part; one without it still works. */
    CHECK(part(t, 1, "2,4", 7, "n", &res, err) == 1 && res.status == TPRUN_FENCE_RANK_FAILED && res.failed_rank == 4 &&
              res.nnodes == 1 && res.nodes[0] == 1,
          "fence over gone rank 4: rc status %d", res.status);
    tprun_fence_result_free(&res);
    CHECK(part(t, 1, "2,3", 7, "n", &res, err) == 1 && res.status == TPRUN_FENCE_OK, "fence without the gone ranks");
    tprun_fence_result_free(&res);
    tprun_fence_table_destroy(t);
    t = tprun_fence_table_create(5, 3, rank_node);

    /* A deadline: the earliest one counts; expiry names the hosts that never sent a part. */
    memset(&res, 0, sizeof(res));
    CHECK(tprun_fence_contribute(t, 1, "2,4", 0, "d", 1, 10.0, &res, err, sizeof(err)) == 0, "deadline part");
    CHECK(tprun_fence_next_deadline(t) == 10.0, "next deadline %g", tprun_fence_next_deadline(t));
    memset(&seen, 0, sizeof(seen));
    tprun_fence_expire(t, 9.9, on_done, NULL);
    CHECK(seen.calls == 0, "expired early");
    tprun_fence_expire(t, 10.0, on_done, NULL);
    CHECK(seen.calls == 1 && seen.status == TPRUN_FENCE_TIMEOUT && seen.node0 == 1 && strcmp(seen.missing, "2") == 0,
          "timeout: calls %d status %d node %d missing \"%s\"", seen.calls, seen.status, seen.node0, seen.missing);
    CHECK(tprun_fence_next_deadline(t) == 0, "deadline left after expiry");
    tprun_fence_table_destroy(t);

    /* One host: its part completes the fence at once. */
    const int one[] = {0, 0};
    t = tprun_fence_table_create(2, 1, one);
    CHECK(part(t, 0, "*", 0, "solo", &res, err) == 1 && res.len == 4, "single host");
    tprun_fence_result_free(&res);
    tprun_fence_table_destroy(t);
}

int main(void)
{
    test_base64();
    test_escape();
    test_number_field();
    test_fences();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("launcher_pmix_unit: base64 and the fence table: all checks passed\n");
    return failures ? 1 : 0;
}
