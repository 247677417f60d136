/* tcp.h: the TCP transport's private state (one full mesh of authenticated, non-blocking connections). */
#ifndef TCP_H
#define TCP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_provider.h"

#define TCP_RX_BYTES   65536 /* per-connection receive buffer: headers and small payloads land here */
#define TCP_RX_SHARED  4096  /* the lower rank's buffer on its own socket, where only small transfers come in */
#define TCP_DIRECT_MIN 4096  /* a payload remainder at least this large is read straight into its buffer */
#ifndef TCP_SOCKBUF
#define TCP_SOCKBUF 4194304 /* socket buffer bytes (0 keeps autotuning): a part fits in flight */
#endif
/* Congestion control of data connections within one host (across hosts the kernel's default stays): bbr (a kernel's default here) keeps its window near its bandwidth times
 * a microsecond round trip and paces by a delivery rate that drops when a rank is descheduled, so on one host a call
 * beyond about 1 MiB waits on acknowledgements and timers; reno sends what the socket buffer holds (BENCHMARKS.md). */
#ifndef TCP_CONGESTION_ALGO
#define TCP_CONGESTION_ALGO "reno"
#endif
#define TCP_REACH_PRIORITY 1  /* reach's answer: every other transport that reaches a peer is preferred */
#define TCP_IOV_MAX        64 /* iovecs per sendmsg: several small frames go in one system call */
#define TCP_BATCH_FRAMES   16 /* a transfer's frames after its current one that join it in one sendmsg */

/* Transfers of at most this many bytes go both ways on the lower rank's connection: each end's frames carry the
 * acknowledgement of the other's, where a connection used one way sends a bare acknowledgement segment for every
 * second frame. Larger ones stay on the sender's own: back to back, two ends writing one socket cost more than the
 * acknowledgements save (BENCHMARKS.md). */
#ifndef TCP_SHARED_BYTES
#define TCP_SHARED_BYTES 256
#endif
#define TCP_OTHER_READ_EVERY 8 /* spins: how often the lower rank reads the socket a peer's next frame is not due on */
/* An order mark: when a rank's sends to a peer move to its other socket, this goes first on the new one, with the
 * number of frames sent on the old one so far (the move waits until all of them are out); the receiver takes
 * nothing more from the new one until it has taken that many from the old, so each direction is one stream of
 * frames in the order they were posted, as over one connection. */
#define TCP_MARK_MAGIC 0x31525054u /* "TPR1" */
#define TCP_MARK_BYTES 8           /* magic, then the frame count, both little-endian 32-bit */
/* The most frames a mark may count beyond what the other connection has given: they were all written before the
 * mark, so they lie in socket buffers and this rank's read buffer, and 2^24 frame headers alone are 640 MiB. A count
 * further ahead is a lie that would hold the connection shut forever. */
#define TCP_MARK_AHEAD_MAX (1u << 24)

/* One socket of a pair, and what moves through it in either direction. */
typedef struct tcp_sock {
    int fd;                           /* -1: not connected */
    tp_xfer_t *send_head, *send_tail; /* sends queued on it */
    uint32_t posted;                  /* frames queued on it so far (an order mark on the other counts them) */
    uint32_t sent;                    /* frames written whole to it */
    uint8_t *rx;                      /* bytes read from it; NULL on a socket this rank never reads */
    size_t rx_cap, rx_start, rx_end;
    tp_xfer_t *rx_cur; /* the receive the current frame's payload goes to */
    size_t rx_left;    /* payload bytes of the current frame still to come */
    int held;          /* a whole header waits at rx_start for a receive that matches it */
    uint32_t taken;    /* frames read whole from it */
    uint32_t gate;     /* with gated: its next frame waits until the other socket has given this many */
    int gated;
    uint8_t batch[TCP_BATCH_FRAMES][TP_FRAME_HEADER_BYTES]; /* headers of the frames send_iov batched */
} tcp_sock_t;

/*
 * Two connections per pair of ranks, one owned by each end for its large transfers, so a send never holds the
 * socket lock that the peer's incoming bytes need (both directions at once run at twice the rate of one shared
 * socket on loopback). Small transfers take the lower rank's both ways (TCP_SHARED_BYTES); order marks keep each
 * direction one ordered stream of frames across the two.
 */
typedef struct tcp_conn {
    tcp_sock_t in;  /* the peer owns it: its large transfers arrive here (and, when it is the higher rank, all) */
    tcp_sock_t out; /* this rank owns it: its large transfers leave here (and, when it is the lower rank, all) */
    tcp_sock_t *last_send; /* the socket the last send to this peer was queued on; NULL before the first */
    unsigned idle_reads;   /* spins that skipped or made the read of the socket no frame was due on */
    int peer;
    int first_candidate;     /* the peer's address that connected the first direction: the second starts there */
    tp_status_t broken;      /* TP_OK, or why this peer's frames are not read (or anything used at all) again */
    tp_status_t send_broken; /* TP_OK, or why nothing more is sent: a frame went out only in part, or the peer died */
    tp_xfer_t *recv_head, *recv_tail; /* posted receives, matched by header from either socket */
} tcp_conn_t;

#define TCP_ADMITTED 'A' /* the listener's one byte after a handshake: the connection is taken */

typedef struct tcp_links tcp_links_t; /* below: who is connected, the acceptor thread, the addresses to dial */

typedef struct tcp_state {
    tp_transport_env_t env;
    uint8_t job_key[TP_JOB_KEY_BYTES];
    char advertise_ip[64];
    int listen_fd;
    tcp_conn_t *conns; /* by world rank */
    tcp_links_t *links;
    int size;
} tcp_state_t;

extern const tp_transport_ops_t tp_tcp_ops;

#define TCP_PENDING_EXTRA 64 /* handshakes held beyond one per connection still expected */

/* Who is connected, the acceptor thread (tcp_accept.c), the addresses to dial (tcp_connect.c). */
typedef struct admitted {
    int rank, reads, fd;
} admitted_t;

struct tcp_links {
    int lazy;    /* connect on first use (TP_CONNECT=lazy) */
    int *use;    /* by rank: this transport was chosen for the peer */
    char **dial; /* by rank: the addresses to dial (lower ranks) */
    int running; /* the acceptor thread runs */
    pthread_t thread;
    int stop_fd;              /* eventfd: the acceptor ends */
    int ready_fd;             /* eventfd: the acceptor admitted a connection (a waiting call wakes) */
    _Atomic uint64_t signals; /* writes to ready_fd so far: the data path reads the fd only when this moved */
    uint64_t drained;         /* data path only: signals it has read from ready_fd */
    pthread_mutex_t lock;
    admitted_t *ready; /* admitted, not yet taken by the data path */
    int nready;
    uint8_t *taken;  /* acceptor only: by rank, bit 1 the direction the dialer reads, bit 2 the one it sends on */
    char error[512]; /* why the acceptor ended early: logged by the thread that waits on it */
};

/* tcp_accept.c: the thread that admits higher ranks (running set), and its end (the listener closes) */
tp_status_t tcp_acceptor_start(tcp_state_t *st);
void tcp_acceptor_stop(tcp_state_t *st);

/* tcp_connect.c: a peer's connections on demand (post), what the acceptor admitted (progress), its wake fd */
tp_status_t tcp_links_need(tcp_state_t *st, int peer);
int tcp_links_take(tcp_state_t *st);
int tcp_links_event_fd(const tcp_state_t *st);

/* tcp_progress.c */
tp_status_t tcp_post(void *state, tp_xfer_t *x);
tp_status_t tcp_progress(void *state, int *moved);
int tcp_event_fds(void *state, struct pollfd *fds, int max);
void tcp_cancel(void *state);
void tcp_conn_fail(tcp_state_t *st, tcp_conn_t *c, tp_status_t why, const char *reason);

#endif
