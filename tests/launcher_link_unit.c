/* launcher_link_unit.c: unit tests of the agents' link (launcher/link/link.c): what a full channel cannot take waits
 * in order and goes when it has room, a closed peer drops the queue, and each message reaches its owner. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/loop.h"
#include "link/link.h"

#include "unit_check.h"

/* Reads what the pipe holds now (non-blocking) into buf at *len. */
static void take(int fd, char *buf, size_t cap, size_t *len)
{
    ssize_t n;
    while (*len < cap && (n = read(fd, buf + *len, cap - *len)) > 0) *len += (size_t)n;
}

static void test_flow(tprun_evloop_t *loop)
{
    int p[2];
    CHECK(pipe2(p, O_NONBLOCK) == 0, "pipe");
    int room = fcntl(p[1], F_GETPIPE_SZ);
    tprun_link_t k;
    tprun_link_init(&k, loop, "unit", p[1]);
    /* More lines than the pipe holds: the rest waits, in order. */
    char line[64];
    int lines = room / 14 + 100;
    for (int i = 0; i < lines; i++) {
        snprintf(line, sizeof(line), "m %011d\n", i); /* 14 bytes */
        tprun_link_send(&k, line);
    }
    CHECK(tprun_link_pending(&k), "a full pipe left nothing queued");
    size_t cap = (size_t)lines * 14 + 1, len = 0;
    char *got = malloc(cap);
    for (int turn = 0; turn < 1000 && len < (size_t)lines * 14; turn++) {
        take(p[0], got, cap, &len);
        tprun_evloop_run_once(loop, 10);
    }
    take(p[0], got, cap, &len);
    CHECK(len == (size_t)lines * 14, "received %zu of %zu bytes", len, (size_t)lines * 14);
    CHECK(!tprun_link_pending(&k), "still queued after the peer read everything");
    int in_order = 1;
    for (int i = 0; i < lines && (size_t)(i + 1) * 14 <= len; i++) {
        snprintf(line, sizeof(line), "m %011d\n", i);
        in_order &= memcmp(got + (size_t)i * 14, line, 14) == 0;
    }
    CHECK(in_order, "lines out of order");
    /* A peer that is gone: the queue is dropped, never written again. */
    close(p[0]);
    for (int i = 0; i < lines; i++) tprun_link_send(&k, "x\n");
    CHECK(!tprun_link_pending(&k), "a closed peer kept a queue");
    tprun_link_close(&k);
    CHECK(k.out_fd < 0, "closed");
    tprun_link_send(&k, "after\n"); /* ignored, no crash */
    tprun_link_free(&k);
    free(got);
}

typedef struct owner {
    int calls;
    char last[64];
    int take;
} owner_t;

static int on_msg(void *arg, char *msg, size_t len)
{
    owner_t *o = arg;
    o->calls++;
    snprintf(o->last, sizeof(o->last), "%.*s", (int)len, msg);
    return o->take;
}

static void test_dispatch(void)
{
    tprun_link_t k;
    owner_t p = {.take = 1}, i = {.take = 0}, p2 = {.take = 1};
    tprun_link_init(&k, NULL, "unit", -1);
    CHECK(tprun_link_route(&k, 'p', on_msg, &p) == 0 && tprun_link_route(&k, 'i', on_msg, &i) == 0, "routes");
    char a[] = "pq 3 4\n", b[] = "ie\n", c[] = "zz\n";
    CHECK(tprun_link_dispatch(&k, a, strlen(a)) == 1, "p taken");
    CHECK(p.calls == 1 && strcmp(p.last, "pq 3 4") == 0, "p got \"%s\"", p.last);
    CHECK(tprun_link_dispatch(&k, b, strlen(b)) == 0 && i.calls == 1, "an owner that declines");
    CHECK(strcmp(b, "ie") == 0, "a declined line is NUL-terminated for its caller");
    CHECK(tprun_link_dispatch(&k, c, strlen(c)) == 0 && p.calls == 1 && i.calls == 1, "no owner for z");
    CHECK(tprun_link_route(&k, 'p', on_msg, &p2) == 0 && tprun_link_dispatch(&k, a, strlen(a)) == 1, "replaced");
    CHECK(p2.calls == 1 && p.calls == 1, "the later route for p did not replace the first");
    for (char t = 'a'; t < 'a' + TPRUN_LINK_ROUTES; t++) tprun_link_route(&k, t, on_msg, &p);
    CHECK(tprun_link_route(&k, 'z', on_msg, &p) == -1, "more routes than TPRUN_LINK_ROUTES accepted");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as in tprun: a peer gone is EPIPE */
    tprun_evloop_t *loop = tprun_evloop_create();
    if (loop == NULL) {
        perror("tprun_evloop_create");
        return 1;
    }
    test_flow(loop);
    test_dispatch();
    tprun_evloop_free(loop);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("launcher_link_unit: flow control and dispatch: all checks passed\n");
    return failures ? 1 : 0;
}
