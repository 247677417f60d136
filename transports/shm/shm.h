/* shm.h: the shared-memory transport's private state and the layout of the segment every rank owns. */
#ifndef SHM_H
#define SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <poll.h>

#include "tp_provider.h"

#define SHM_MAGIC          0x74702d73686d3031ULL /* "tp-shm01": a segment of this layout */
#define SHM_CHUNK_BYTES    65536                 /* a sender publishes its head after each chunk, so copies overlap */
#define SHM_REACH_PRIORITY 10                    /* above tcp's: same-host peers go through memory */
#define SHM_LINE           64

/*
 * Rank r's segment: a control line, then one channel per sender s (s -> r; r's own slot unused). The sender writes
 * frames (header, payload) as a byte stream into ring and raises head; r reads and raises tail. Every value read
 * from a segment is checked before it is used: a peer may write anything into it.
 */
typedef struct shm_ctl {
    uint64_t magic;
    uint32_t size; /* world size */
    uint32_t rank; /* owner */
    uint64_t ring_bytes;
    uint64_t seg_bytes;
    _Alignas(SHM_LINE) _Atomic uint32_t sleeping; /* the owner is about to block: writers and readers wake it */
} shm_ctl_t;

typedef struct shm_chan {
    _Alignas(SHM_LINE) _Atomic uint64_t head; /* bytes ever written by the sender */
    _Atomic uint32_t attached;                /* the sender has mapped this segment: the owner's connect may end */
    _Alignas(SHM_LINE) _Atomic uint64_t tail; /* bytes ever consumed by the owner */
} shm_chan_t;

/* Ring bytes per sender in a world of n: 1 MiB in flight keeps a copy pipelined; past 32 ranks less, so a
 * segment (populated when mapped) stays within 32 MiB, never under 64 KiB a ring. */
static inline size_t shm_ring_bytes(int n)
{
    size_t r = (size_t)1 << 20;
    while (r > 65536 && r * (size_t)n > ((size_t)32 << 20)) r >>= 1;
    return r;
}

/* Offset of sender s's channel and of its ring in a segment. */
#define SHM_CHAN_OFF(s, ring)  (sizeof(shm_ctl_t) + (size_t)(s) * (sizeof(shm_chan_t) + (ring)))
#define SHM_RING_OFF(s, ring)  (SHM_CHAN_OFF(s, ring) + sizeof(shm_chan_t))
#define SHM_SEG_BYTES(n, ring) SHM_CHAN_OFF(n, ring)

/* One peer: its segment (where this rank writes), and this rank's view of both directions. */
typedef struct shm_peer {
    int use;
    char *address; /* chosen for this peer, connected on demand: its published address until then */
    size_t ring; /* bytes of each ring: a power of two */
    int pid;
    int pidfd;   /* readable once the peer has exited */
    int eventfd; /* the peer's: written to wake it */
    uint8_t *seg;
    size_t seg_bytes;
    shm_chan_t *out; /* this rank -> peer, in the peer's segment */
    uint8_t *out_ring;
    shm_chan_t *in; /* peer -> this rank, in this rank's segment */
    const uint8_t *in_ring;
    shm_ctl_t *ctl;                   /* the peer's control line: its sleeping word */
    uint64_t out_head, out_tail_seen; /* private truth of what this rank wrote, and the peer's last tail */
    uint64_t in_tail, in_head_seen;   /* private truth of what this rank consumed, and the peer's last head */
    tp_status_t broken;               /* TP_OK, or why frames from the peer are not read again */
    tp_status_t send_broken;          /* TP_OK, or why nothing more goes to the peer */
    tp_xfer_t *send_head, *send_tail;
    tp_xfer_t *recv_head, *recv_tail;
    uint8_t hdr[TP_FRAME_HEADER_BYTES]; /* the header taken from the ring that waits for its receive */
    int hdr_have;
    tp_xfer_t *rx_cur; /* the receive the current frame's payload goes to */
    size_t rx_left;
} shm_peer_t;

typedef struct shm_state {
    tp_transport_env_t env;
    int size;
    int memfd;
    int eventfd; /* this rank's: peers write it when it sleeps */
    uint8_t *seg;
    size_t seg_bytes;
    shm_ctl_t *ctl;
    int waited;          /* event_fds armed the sleeping word: the next progress clears it and checks the peers' pids */
    shm_peer_t *peers;   /* by world rank */
    struct pollfd *pfds; /* the pidfds a return from a wait checks, and their ranks */
    int *dead;
} shm_state_t;

extern const tp_transport_ops_t tp_shm_ops;

/* shm_connect.c: maps peer r's segment (connections on demand: the first post to r) */
tp_status_t shm_connect_peer(shm_state_t *st, int r);

/* shm_progress.c */
tp_status_t shm_post(void *state, tp_xfer_t *x);
tp_status_t shm_progress(void *state, int *moved);
int shm_event_fds(void *state, struct pollfd *fds, int max);
void shm_cancel(void *state);

#endif
