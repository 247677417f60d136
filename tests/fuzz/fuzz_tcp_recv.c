/* fuzz_tcp_recv.c: the TCP transport's receive path (transports/tcp/tcp_progress.c) fed a peer's byte stream. */
#include <poll.h>
#include <stdio.h>

#include "coll_frame.h"
#include "fuzz_util.h"
#include "tcp.h"

#define MAX_RECVS 4
#define MAX_LEN   16384

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    return 0;
}

/* How far the receive side got: an unchanged one after the peer closed means it waits for nothing. */
static size_t progress_mark(const tcp_conn_t *c, const tp_xfer_t *x, int n)
{
    size_t m = c->in.rx_start * 31 + c->in.rx_end * 7 + (size_t)c->in.held;
    m = m * 137 + c->out.rx_start * 31 + c->out.rx_end * 7 + (size_t)c->out.held;
    for (int i = 0; i < n; i++) m = m * 131 + x[i].done * 3 + (size_t)x[i].complete;
    return m;
}

/*
 * Bytes 0-1: the job's part size - 1; 2-9: the call (collective, type, op, root, comm, seq, count low and high);
 * 10: receives posted (1 + b % 4) and where the stream splits (b / 4 sixty-thirds of it come on the shared socket,
 * the rest on the peer's own), each then 6 bytes (step, first part, length low and high, part size low and high, 0
 * for the job's); the rest is the stream the peer sends.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 11) return 0;
    size_t part_bytes = 1 + ((size_t)data[0] | (size_t)data[1] << 8);
    tp_frame_id_t id = {.coll = data[2],
                        .dtype = data[3],
                        .op = data[4],
                        .root = data[5],
                        .comm_id = data[6],
                        .seq = data[7],
                        .count = (uint64_t)data[8] | (uint64_t)data[9] << 8};
    int nrecv = 1 + data[10] % MAX_RECVS;
    size_t pos = 11;
    if (size < pos + 6 * (size_t)nrecv) return 0;
    int fds[2], sfds[2]; /* the peer's own socket, and the shared one (this rank, 0, is the lower) */
    if (fuzz_socketpair(fds) != 0) return 0;
    if (fuzz_socketpair(sfds) != 0) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    tcp_conn_t conns[2];
    memset(conns, 0, sizeof(conns));
    conns[0].in.fd = conns[0].out.fd = -1;
    conns[1].in.fd = fds[0];
    conns[1].out.fd = sfds[0];
    conns[1].peer = 1;
    conns[1].in.rx = malloc(conns[1].in.rx_cap = TCP_RX_BYTES);
    conns[1].out.rx = malloc(conns[1].out.rx_cap = TCP_RX_SHARED);
    int ready = conns[1].in.rx != NULL && conns[1].out.rx != NULL;
    tcp_state_t st = {
        .env = {.rank = 0, .size = 2, .part_bytes = part_bytes}, .listen_fd = -1, .conns = conns, .size = 2};
    tp_xfer_t x[MAX_RECVS];
    memset(x, 0, sizeof(x));
    int posted = 0;
    for (int i = 0; i < nrecv; i++, pos += 6) {
        const uint8_t *d = data + pos;
        x[i].peer = 1;
        tp_frame_pack(x[i].header, &id, d[0]);
        x[i].first_part = d[1];
        x[i].len = ((size_t)d[2] | (size_t)d[3] << 8) % (MAX_LEN + 1);
        x[i].part_bytes = (size_t)d[4] | (size_t)d[5] << 8;
        x[i].buf = malloc(x[i].len ? x[i].len : 1); /* exact: a write past the end is caught */
        if (ready && x[i].buf != NULL && tcp_post(&st, &x[i]) == TP_OK) posted = i + 1;
        else break;
    }
    const uint8_t *stream = data + pos;
    size_t len = size - pos, cut = len * (data[10] / 4) / 63, off = 0, soff = 0, mark = 0;
    int stalls = 0;
    for (int rounds = 0; posted > 0 && rounds < 1000000; rounds++) {
        fuzz_feed(sfds[1], stream, cut, &soff);
        fuzz_feed(fds[1], stream + cut, len - cut, &off);
        int moved;
        tp_status_t s = tcp_progress(&st, &moved);
        if (s != TP_OK || conns[1].recv_head == NULL) break;
        size_t now = progress_mark(&conns[1], x, posted);
        stalls = off == len - cut && soff == cut && now == mark ? stalls + 1 : 0;
        if (stalls > 2) break; /* a header waits for a receive that never comes: the call's timeout ends it */
        mark = now;
    }
    for (int i = 0; i < posted; i++)
        FUZZ_ASSERT(x[i].done <= x[i].len && (!x[i].complete || x[i].done == x[i].len),
                    "a receive took more bytes than it holds");
    tcp_cancel(&st);
    for (int i = 0; i < nrecv; i++) free(x[i].buf);
    free(conns[1].in.rx);
    free(conns[1].out.rx);
    close(fds[0]);
    close(fds[1]);
    close(sfds[0]);
    close(sfds[1]);
    return 0;
}
