/*
 * transport_pairs: a second transport ("pairtest", TCP underneath) beside the built-in one, registered through
 * tp_provider.h. It reaches only the peers whose rank has this rank's parity, asks for per-pair connection data of
 * a size and content that depend on both ranks, and checks in connect that it was chosen for exactly those peers
 * and got exactly each one's data for this rank. An all-reduce then runs over both transports at once.
 * PAIRTEST_MODE: "parity" (default), "none" (reaches nobody: everything over TCP, the exchange still runs),
 * "lopsided" (rank 1 reaches every peer, the others only by parity: the ends of a pair disagree).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tp.h>
#include <tp_provider.h>

static const tp_transport_ops_t *tcp; /* the built-in TCP transport, underneath */
static int my_rank, world_size, chosen, bad;
static const char *mode = "parity";

/* The connection data rank `from` sends rank `to`: 1 to 3000 bytes (past the old 256-byte address), zeros too. */
static size_t blob_len(int from, int to) { return 1 + (size_t)(from * 131 + to * 17) % 3000; }
static uint8_t blob_byte(int from, int to, size_t i) { return (uint8_t)(from * 7 + to * 13 + i * 31); }

static tp_status_t pt_open(const tp_transport_env_t *env, void **state, char *address, size_t len)
{
    my_rank = env->rank;
    world_size = env->size;
    return tcp->open(env, state, address, len);
}

static void pt_caps(void *state, tp_transport_caps_t *caps) { tcp->caps(state, caps); }

/* Whether this rank reaches rank p in this mode. */
static int reaches(int p)
{
    if (strcmp(mode, "none") == 0) return 0;
    return (strcmp(mode, "lopsided") == 0 && my_rank == 1) || (my_rank + p) % 2 == 0;
}

static int pt_reach(void *state, const tp_peer_view_t *peer)
{
    return peer->address != NULL && reaches(peer->rank) ? 5 : TP_REACH_NO; /* above TCP's priority */
}

static tp_status_t pt_pair_info(void *state, const tp_peer_view_t *peer, void *data, size_t *len)
{
    size_t n = blob_len(my_rank, peer->rank);
    if (n > *len) return TP_ERR_INVALID;
    for (size_t i = 0; i < n; i++) ((uint8_t *)data)[i] = blob_byte(my_rank, peer->rank, i);
    *len = n;
    return TP_OK;
}

/* Checks what connect is given before TCP connects: the chosen peers, and each one's data for this rank. */
static tp_status_t pt_connect(void *state, const tp_transport_peer_t *peers)
{
    for (int p = 0; p < world_size; p++) {
        int want = p != my_rank && reaches(p);
        if (peers[p].use != want) {
            printf("rank %d: pairtest: %s for rank %d\n", my_rank, peers[p].use ? "chosen" : "not chosen", p);
            bad++;
            continue;
        }
        if (!want) continue;
        chosen++;
        size_t n = blob_len(p, my_rank), same = 0;
        const uint8_t *d = peers[p].pair;
        for (size_t i = 0; d != NULL && i < n && i < peers[p].pair_len; i++) same += d[i] == blob_byte(p, my_rank, i);
        if (d == NULL || peers[p].pair_len != n || same != n) {
            printf("rank %d: pairtest: rank %d's data: %zu bytes (%zu expected), %zu matching\n", my_rank, p,
                   peers[p].pair_len, n, same);
            bad++;
        }
    }
    return tcp->connect(state, peers);
}

static const tp_transport_ops_t pairtest_ops = {
    .abi_version = TP_TRANSPORT_ABI,
    .ops_size = sizeof(tp_transport_ops_t),
    .name = "pairtest",
    .open = pt_open,
    .caps = pt_caps,
    .reach = pt_reach,
    .pair_info = pt_pair_info,
    .connect = pt_connect,
    .post = NULL, /* the rest are TCP's, set in main once it is found */
};

int main(void)
{
    static tp_transport_ops_t ops;
    if ((tcp = tp_transport_find("tcp")) == NULL || tp_transport_find("pairtest") != NULL) return 2;
    ops = pairtest_ops;
    ops.post = tcp->post;
    ops.progress = tcp->progress;
    ops.event_fds = tcp->event_fds;
    ops.cancel = tcp->cancel;
    ops.mem_register = tcp->mem_register;
    ops.mem_deregister = tcp->mem_deregister;
    ops.close = tcp->close;
    if (getenv("PAIRTEST_MODE") != NULL) mode = getenv("PAIRTEST_MODE");
    if (tp_transport_register(&ops) != TP_OK) return 2;
    tp_comm_t *w;
    tp_status_t s = tp_init(NULL, &w);
    if (s != TP_OK) {
        printf("pairtest: tp_init: %s: %s\n", tp_status_string(s), tp_last_error());
        return 1;
    }
    int me = tp_comm_rank(w), n = tp_comm_size(w);
    int32_t x[1000], sum[1000];
    for (int i = 0; i < 1000; i++) x[i] = (me + 1) * (i + 1);
    s = tp_all_reduce(w, x, sum, 1000, TP_I32, TP_SUM, NULL);
    int wrong = 0;
    for (int i = 0; s == TP_OK && i < 1000; i++) wrong += sum[i] != (int32_t)(n * (n + 1) / 2 * (i + 1));
    printf("rank %d: pairtest: chosen for %d peers, %d wrong, all-reduce %s, %d wrong sums\n", me, chosen, bad,
           tp_status_string(s), wrong);
    tp_status_t f = tp_finalize(w);
    return bad == 0 && wrong == 0 && s == TP_OK && f == TP_OK ? 0 : 1;
}
