/* shm.h: the shared-memory transport's private state and the layout of the segment every rank owns. */
#ifndef SHM_H
#define SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <poll.h>

#include "tp_provider.h"

#define SHM_MAGIC_TEXT     "tp-shm05" /* a segment of this layout and protocol; its 8 bytes are the magic (shm_magic) */
#define SHM_CHUNK_BYTES    65536                 /* a sender publishes its head after each chunk, so copies overlap */
#define SHM_RING_WINDOW    65536 /* ring frames follow each other this far before going back to the ring's start */
#define SHM_CMA_BOUNCE     16384                 /* a lent receive's CMA frame is read through this much stack */
#define SHM_MIRROR_PIECE   16384                 /* a send mirrors each piece this long at once: still cached */
#define SHM_CMA_BYTES_TEXT "auto"                /* default TP_SHM_CMA_BYTES: exchanges, by measured time */
#define SHM_MAP_BYTES_TEXT "1M"                  /* default TP_SHM_MAP_BYTES (BENCHMARKS.md, "Mapped") */
#define SHM_REACH_PRIORITY 10                    /* above tcp's: same-host peers go through memory */
#define SHM_LINE           64
#define SHM_CELLS          64 /* cells per pair: a frame's header (and a small payload) moves in one cache line */
#define SHM_CELL_BODY      (SHM_LINE - 8)                          /* a cell's bytes after its sequence word */
#define SHM_CELL_FIRST     (SHM_CELL_BODY - TP_FRAME_HEADER_BYTES) /* payload bytes beside a frame's header */
#define SHM_CELL_SPAN      5 /* most cells one frame takes: 240 B of payload inline; from 256 B the ring is faster */
#define SHM_INLINE_MAX     (SHM_CELL_FIRST + (SHM_CELL_SPAN - 1) * SHM_CELL_BODY) /* larger ones take the ring */

/*
 * Rank r's segment: a control line, then one channel per sender s (s -> r; r's own slot unused): its positions, a
 * ring of cells and a byte ring. Cell i (mod SHM_CELLS) carries sequence word i + 1, written last; a frame's header
 * starts a cell, a payload up to SHM_INLINE_MAX follows in that cell and the next ones, a larger one goes as a byte
 * stream into ring (head raised by the sender, tail by r). Every value read from a segment is checked before it is used:
 * a peer may write anything into it.
 */
typedef struct shm_ctl {
    uint64_t magic;
    uint32_t size; /* world size */
    uint32_t rank; /* owner */
    uint64_t ring_bytes;
    uint64_t seg_bytes;
    uint64_t probe_addr, probe_value; /* a word in the owner's memory: a peer reading it there may use CMA */
    _Alignas(SHM_LINE) _Atomic uint32_t sleeping; /* the owner is about to block: writers and readers wake it */
} shm_ctl_t;

/* TP_SHM_CMA_BYTES=auto's classes of exchanges (below): by kind of call and by send size */
#define SHM_XCHG_KINDS   16 /* tp_frame_kind's range: each kind of call has its own classes */
#define SHM_XCHG_CLASSES 6  /* 256 KiB-, 512 KiB-, 1 MiB-, 2 MiB-, 4 MiB-, 8 MiB and more */

typedef struct shm_chan {
    _Alignas(SHM_LINE) _Atomic uint64_t head; /* bytes ever written by the sender */
    _Atomic uint32_t attached;                /* the sender has mapped this segment: the owner's connect may end */
    _Alignas(SHM_LINE) _Atomic uint64_t tail; /* bytes ever consumed by the owner (the sender reads it when full) */
    _Atomic uint64_t cells_done;              /* cells ever consumed by the owner */
    _Atomic uint32_t cma;                     /* the owner reads the sender's memory with process_vm_readv */
} shm_chan_t;

/* After the channels, one table per sender s: the ways it chose for the pair's exchanges of each class where it leads
 * them (the lower rank), as shm_xchg_word encodes them. Apart from the channels, so the rings lie where they did. */
typedef struct shm_ways {
    _Alignas(SHM_LINE) _Atomic uint64_t word[SHM_XCHG_KINDS * SHM_XCHG_CLASSES];
} shm_ways_t;

/* What follows the header in the cell of a frame whose payload is not inline: where the payload is. */
#define SHM_VIA_RING    1 /* the byte ring, from the position beside it */
#define SHM_VIA_CMA     2 /* the sender's buffer, at the address beside it, until the receiver consumes the cell */
#define SHM_VIA_MAP     3 /* the sender's tp_mem_alloc memory: its fd and inode above the kind, the offset beside it */
#define SHM_VIA_KIND(w) ((w)&0xff)

/*
 * How a sender writes ring payloads (TP_SHM_WRITE). Cached stores leave each line in the writer's cache, where the
 * reader takes it; streaming stores send the lines to memory, and the writer never takes a line back from the
 * reader's cache before writing it. Which wins depends on where the two CPUs sit, and on a VM that changes while a
 * job runs: on this project's VM the same two vCPUs moved every few seconds between a placement where a cache line
 * crosses in 0.03 us, cached ring writes take 44-90 ns per KiB and streaming makes a transfer 1.4-4.7x slower, and
 * one where it crosses in 0.16-0.27 us, cached writes take 157-567 ns per KiB and streaming (36-63 ns per KiB either
 * way) makes it 1.4-4.8x faster (tests/bench/ring_probe). So auto (the default) writes cached, times the first ring
 * write of each chunk of at least SHM_WRITE_TIMED_MIN bytes into ring bytes written before (a first write faults the
 * pages in: ~1000 ns per KiB), goes streaming after SHM_WRITE_SLOW_RUN timed chunks in a row slower than
 * SHM_WRITE_SLOW_NS_PER_KIB, and while streaming writes every SHM_WRITE_PROBE_EVERY-th such chunk cached, timed, to
 * go back once one is fast (docs/BENCHMARKS.md, "Sixteenth pass").
 */
enum { SHM_WRITE_CACHED = 0, SHM_WRITE_STREAMING = 1, SHM_WRITE_AUTO = 2 };
#define SHM_WRITE_TIMED_MIN       32768 /* smaller chunks: always cached under auto, never timed (the clock's cost) */
#define SHM_WRITE_SLOW_NS_PER_KIB 200   /* cached ring writes slower than this come from a far cache */
#define SHM_WRITE_SLOW_RUN        3     /* timed chunks in a row that slow before auto goes streaming */
#define SHM_WRITE_PROBE_EVERY     64    /* auto while streaming: every this many chunks one goes cached, timed */

/* One peer's write way under TP_SHM_WRITE: the setting, and auto's way now and what it has seen. */
typedef struct shm_write_pick {
    int setting;          /* SHM_WRITE_CACHED, _STREAMING or _AUTO (cached where this build cannot stream) */
    int way;              /* auto: how chunks of SHM_WRITE_TIMED_MIN and more go now */
    unsigned slow;        /* auto, cached: timed chunks in a row slower than SHM_WRITE_SLOW_NS_PER_KIB */
    unsigned since_probe; /* auto, streaming: chunks streamed since the last cached one */
    unsigned last_ns_kib; /* the last timed chunk's cost, ns per KiB (for the debug notes) */
    uint64_t switches;    /* auto: changes of way */
    uint64_t streamed;    /* chunks written streaming */
} shm_write_pick_t;

typedef struct shm_cell {
    _Alignas(SHM_LINE) _Atomic uint64_t seq; /* cell number + 1 when written; zero when never */
    uint8_t body[SHM_CELL_BODY];             /* a frame's header and first payload bytes, or more of its payload */
} shm_cell_t;
_Static_assert(sizeof(shm_cell_t) == SHM_LINE, "a cell is one cache line");

/* Ring bytes per sender in a world of n: 1 MiB in flight keeps a copy pipelined; past 32 ranks less, so a
 * segment (populated when mapped) stays within 32 MiB, never under 64 KiB a ring. */
static inline size_t shm_ring_bytes(int n)
{
    size_t r = (size_t)1 << 20;
    while (r > 65536 && r * (size_t)n > ((size_t)32 << 20)) r >>= 1;
    return r;
}

/* Offset of sender s's channel, its cells and its ring in a segment. */
#define SHM_CELLS_BYTES          (SHM_CELLS * sizeof(shm_cell_t))
#define SHM_CHAN_OFF(s, ring)    (sizeof(shm_ctl_t) + (size_t)(s) * (sizeof(shm_chan_t) + SHM_CELLS_BYTES + (ring)))
#define SHM_CELLS_OFF(s, ring)   (SHM_CHAN_OFF(s, ring) + sizeof(shm_chan_t))
#define SHM_RING_OFF(s, ring)    (SHM_CELLS_OFF(s, ring) + SHM_CELLS_BYTES)
#define SHM_WAYS_OFF(n, ring, s) (SHM_CHAN_OFF(n, ring) + (size_t)(s) * sizeof(shm_ways_t))
#define SHM_SEG_BYTES(n, ring)   SHM_WAYS_OFF(n, ring, n)

/* A peer's tp_mem_alloc allocation, mapped here read-only at its first mapped frame; the least recently used of
 * SHM_MAPS goes when another comes. */
#define SHM_MAPS 8
typedef struct shm_map {
    uint8_t *base; /* mapped PROT_READ */
    size_t bytes;
    int fd;       /* the peer's fd number */
    uint32_t ino; /* its inode's low 32 bits */
    uint64_t used;
} shm_map_t;

/*
 * TP_SHM_CMA_BYTES=auto: an exchange is a send of at least SHM_XCHG_MIN bytes, all of them there, posted while a
 * receive from the same peer of at least that size waits (a 2-rank all_gather, a sendrecv pair): both ranks copy at
 * once, where one CMA read each can beat a write and a read each through the ring (GPU host: 0.5-0.9 of the time) or
 * lose (this project's VM: 1.0-1.3; BENCHMARKS.md, "Seventeenth pass"). Each exchange is timed from its send's post
 * until both its transfers complete, per KiB moved, in classes by kind of call (tp_frame_kind) and send size; a
 * ring exchange counts only once both rings of the pair are past their first lap (it faults pages in: 1000 ns per
 * KiB, and either ring's slows the exchange). A class's first SHM_XCHG_EXPLORE exchanges go two by two, CMA then
 * the ring (the peer counts the same exchanges, so both ranks try the same way at once; a class of a few exchanges
 * tries CMA); then it goes the way whose last SHM_XCHG_WINDOW times have the lower median, changing only for a
 * median SHM_XCHG_MARGIN_PCT percent lower, and every SHM_XCHG_PROBE_EVERY exchanges two go the other way to keep its
 * times fresh. Only an exchange that follows one of the same way is timed: the first after a change of way took
 * 1.1-1.9x as long as the next on this project's VM, whichever way it went to, which had kept a class on the way it
 * was on. One exchange per peer is timed at a time; a send posted meanwhile goes through the ring.
 * The lower rank of the pair decides for both: an exchange's time is the pair's (one rank's CMA and the other's
 * ring take as long as both by CMA), and two ranks deciding apart on noisy first times went different ways, each
 * then timing the other's choice (BENCHMARKS.md, "Nineteenth pass"). It publishes a change in its table in the
 * peer's segment (shm_ways_t), to take effect two exchanges on: the peer cannot have posted that one yet (it needs
 * this rank's send of the one before, posted after this rank's check of the exchange that decided).
 */
enum { SHM_XCHG_RING = 0, SHM_XCHG_CMA = 1 };
#define SHM_XCHG_MIN         262144
#define SHM_XCHG_WINDOW      5
#define SHM_XCHG_EXPLORE     (4 * SHM_XCHG_WINDOW) /* WINDOW timed of each way */
#define SHM_XCHG_MARGIN_PCT  10
#define SHM_XCHG_PROBE_EVERY 32

typedef struct shm_xchg_class {
    uint32_t ns_kib[2][SHM_XCHG_WINDOW]; /* by way: the last timed exchanges, ns per KiB moved */
    uint32_t have[2], next[2];           /* by way: times kept, and the slot of the next */
    uint64_t count;                      /* exchanges of the class so far (the schedule) */
    int last;                            /* the way the class's last exchange went (none while count is 0) */
    int best;                            /* SHM_XCHG_RING or _CMA: the way exchanges go between probes from `from` */
    int before;                          /* the way they went before exchange number `from` */
    uint64_t from;
    uint64_t changes;
} shm_xchg_class_t;

typedef struct shm_xchg {
    int on;                       /* TP_SHM_CMA_BYTES=auto, the peer not crowded */
    tp_xfer_t *send, *recv;       /* the exchange being timed; NULL: none */
    int64_t start_ns;
    shm_xchg_class_t *cls;        /* its class */
    int way;                      /* the way it goes */
    int sample;                   /* its time counts for the class: the exchange before it went the same way */
    int leads;                    /* this rank decides the ways (the lower rank); the peer follows what it publishes */
    int went; /* bits (1 << SHM_VIA_*) of the ways its frames went, but inline ones (cells either way): one counts */
    int warm; /* the ring to the peer written through and one ring's worth read from the peer's before it began */
    uint64_t timed, by_cma;       /* exchanges timed, and of those how many by CMA (a debug note at close) */
    shm_xchg_class_t *classes;    /* [kind * SHM_XCHG_CLASSES + class], from the peer's first exchange on */
} shm_xchg_t;

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
    shm_cell_t *out_cells;
    uint8_t *out_ring;
    shm_chan_t *in; /* peer -> this rank, in this rank's segment */
    const shm_cell_t *in_cells;
    const uint8_t *in_ring;
    shm_ways_t *out_ways;                    /* this rank's table in the peer's segment: it leads their exchanges */
    const shm_ways_t *in_ways;               /* the peer's table in this rank's segment: it leads */
    shm_ctl_t *ctl;                          /* the peer's control line: its sleeping word */
    uint64_t out_head, out_tail_seen;        /* private truth of what this rank wrote, and the peer's last tail */
    uint64_t out_cells_sent, out_cells_seen; /* cells this rank filled, and the peer's last cells_done */
    uint64_t in_tail, in_head_seen;          /* private truth of what this rank consumed, and the peer's last head */
    uint64_t in_cells_next;                  /* cells this rank consumed: the next frame's cell */
    int stalled;                             /* the send waits for the peer to free cells or ring bytes */
    uint64_t cma_min; /* frames of this many bytes go by CMA (the peer reads them); 0: never, or exchanges (xchg) */
    shm_xchg_t xchg;
    uint64_t map_min;   /* frames of this many bytes from tp_mem_alloc memory go mapped; 0: never */
    uint64_t lent_wait; /* the cell after the descriptor of the frame the peer reads from here (CMA, mapped); 0: none */
    shm_map_t maps[SHM_MAPS]; /* the peer's allocations this rank has mapped */
    uint64_t map_clock;
    tp_status_t broken;      /* TP_OK, or why frames from the peer are not read again */
    tp_status_t send_broken; /* TP_OK, or why nothing more goes to the peer */
    tp_xfer_t *send_head, *send_tail;
    tp_xfer_t *recv_head, *recv_tail;
    uint8_t hdr[SHM_CELL_BODY]; /* the header (and its payload's place) taken from a cell, waiting for its receive */
    int hdr_have;
    tp_xfer_t *rx_cur; /* the receive the current frame's payload goes to */
    size_t rx_left;
    shm_write_pick_t write;   /* how ring payloads to the peer are written */
    uint64_t ring_frames;     /* ring frames written to the peer (a debug note at close) */
    uint64_t ring_large_back; /* of those, frames of SHM_RING_WINDOW bytes and more that went back to the start */
    uint64_t ring_parts_back; /* and frames of transfers of several frames that did */
    size_t ring_reached;      /* ring bytes from the start written at least once: their pages are in */
    int walk; /* frames that walk (shm_walks) go on where the last one ended, not back to the start */
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
    int xchg_open;       /* peers with an exchange being timed */
    shm_peer_t *peers;   /* by world rank */
    struct pollfd *pfds; /* the pidfds a return from a wait checks, and their ranks */
    int *dead;
    uint64_t probe; /* the word the control line points peers at */
    unsigned uid;   /* this rank's user and namespaces, read once: shm_reach compares every peer's */
    unsigned long long ipcns, netns;
} shm_state_t;

extern const tp_transport_ops_t tp_shm_ops;

/* The segment magic: SHM_MAGIC_TEXT's 8 bytes, first byte highest. */
static inline uint64_t shm_magic(void)
{
    uint64_t m = 0;
    for (int i = 0; i < 8; i++) m = m << 8 | (uint8_t)SHM_MAGIC_TEXT[i];
    return m;
}

/* shm_connect.c: maps peer r's segment (connections on demand: the first post to r) */
tp_status_t shm_connect_peer(shm_state_t *st, int r);

/* shm_progress.c; shm_fail: the pair broken with why (TP_ERR_PEER_FAILED: reported to fate; else the peer blamed
 * through fate for what it wrote in shared memory, reason), which it returns */
tp_status_t shm_fail(shm_peer_t *p, int rank, tp_status_t why, const char *reason);
tp_status_t shm_post(void *state, tp_xfer_t *x);
tp_status_t shm_progress(void *state, int *moved);
int shm_event_fds(void *state, struct pollfd *fds, int max);
void shm_cancel(void *state);

/* shm_map.c: 1, with the descriptor's two words, when the frame's payload (fl bytes from base) lies in memory from
 * tp_mem_alloc and goes mapped; the receiver's read (TP_OK; else why, empty when a lent receive's deliver failed). */
int shm_map_describe(const shm_peer_t *p, const tp_xfer_t *x, size_t base, size_t fl, uint64_t via[2]);
tp_status_t shm_map_read(shm_peer_t *p, int rank, tp_xfer_t *x, size_t fl, const uint64_t via[2], char *why,
                         size_t why_len);
void shm_map_close(shm_peer_t *p);
/* shm_connect.c: fd of the process behind pidfd, taken into this one (pidfd_getfd), or -1 with errno; whether the
 * peer's process has exited (its pidfd is readable); the reason a call fails when it has (TP_ERR_PEER_FAILED). */
int shm_take_fd(int pidfd, int fd);
int shm_peer_exited(const shm_peer_t *p);
tp_status_t shm_peer_exited_why(const shm_peer_t *p, char *why, size_t why_len);

/* shm_write.c: streaming stores where this build has them (x86-64; elsewhere every peer is written cached), the
 * fence that orders them before a release store, and the choice between the two ways for each chunk. */
extern const int shm_can_stream;
void shm_copy_streaming(uint8_t *dst, const uint8_t *src, size_t n);
void shm_write_fence(void);
void shm_write_start(shm_write_pick_t *w, int setting);
/* The way a chunk of n bytes goes, and whether its first ring write is to be timed and given to shm_write_timed;
 * warm: its ring bytes were written before (a first write also faults the pages in, which says nothing of caches). */
int shm_write_way(shm_write_pick_t *w, size_t n, int warm, int *timed);
/* A timed chunk's first ring write: n bytes in ns; 1 when auto changed its way on it. */
int shm_write_timed(shm_write_pick_t *w, size_t n, uint64_t ns);

/* shm_cma.c */
void shm_cma_probe(shm_state_t *st, shm_peer_t *p, int r);
/* A send just posted to peer r: starts timing it as an exchange where it is one (TP_SHM_CMA_BYTES=auto). */
void shm_xchg_post(shm_state_t *st, shm_peer_t *p, tp_xfer_t *x);
/* After progress: ends each timed exchange whose two transfers are complete. */
void shm_xchg_check(shm_state_t *st);
/* The way for a class's next exchange (counting it; *sample: whether its time is to count), and a sample's time: 1
 * when the class changed way (the leader's; from two exchanges on). A zeroed class is a fresh one. */
int shm_xchg_way(shm_xchg_class_t *c, int *sample);
int shm_xchg_timed(shm_xchg_class_t *c, int way, uint32_t ns_per_kib);
/* The leader's class as one word for its table of ways, and the follower's class set from such a word (any value). */
uint64_t shm_xchg_word(const shm_xchg_class_t *c);
void shm_xchg_follow(shm_xchg_class_t *c, uint64_t word);
/* "4096", "64K", "1M", "1G" to bytes (0), else -1 (shm_config.c, which tprun links too). */
int shm_parse_bytes(const char *text, uint64_t *out);
/* A TP_SHM_*_BYTES setting as the least frame that goes by its path (CMA, mapped): the environment's value, or dflt
 * where unset (or refused already by the check at init), raised above what goes inline; 0: never. */
uint64_t shm_min_frame(const char *name, const char *dflt);
/* TP_SHM_WRITE's value as SHM_WRITE_* (unset: auto), -1 when it is none (shm_config.c). */
int shm_write_setting(const char *text);
enum { SHM_WALK_AUTO = 0, SHM_WALK_ALWAYS = 1, SHM_WALK_NEVER = 2 };
/* Whether TP_SHM_CMA_BYTES's value (NULL: unset, the default) is auto: exchanges by measured time (shm_config.c). */
int shm_cma_auto(const char *text);
/* TP_SHM_RING_WALK's value as SHM_WALK_* (unset: auto), -1 when it is none (shm_config.c). */
int shm_walk_setting(const char *text);
tp_status_t shm_cma_read(shm_peer_t *p, void *dst, size_t n, uint64_t addr, char *why, size_t why_len);

#endif
