/* tp_provider.h: the second-tier header for transport and device authors (not for engines). */
#ifndef TP_PROVIDER_H
#define TP_PROVIDER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "tp.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pollfd; /* <poll.h>: only transports that implement event_fds need it */

/* ---- Logging: one facility, each record one write() ---- */

typedef enum tp_log_level {
    TP_LOG_ERROR = 0,
    TP_LOG_WARN = 1,
    TP_LOG_INFO = 2,
    TP_LOG_DEBUG = 3,
    TP_LOG_TRACE = 4,
} tp_log_level_t;

TP_API int tp_log_enabled(tp_log_level_t level);
/* Logs "tp rank R (host:pid) subsys: message"; errors are also kept as the thread's tp_last_error(). */
TP_API void tp_log(tp_log_level_t level, const char *subsys, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- Connection authentication: every connection proves it belongs to the job ---- */

#define TP_JOB_KEY_BYTES 16

/* What a connection is for; a connection of one kind is refused by a listener of another. */
typedef enum tp_conn_kind {
    TP_CONN_BOOT = 1, /* rank -> rank 0: bootstrap, then fate */
    TP_CONN_TCP = 2,  /* rank -> rank: the TCP transport's data connection */
} tp_conn_kind_t;

/*
 * Client side of the mutual handshake on a connected socket: proves knowledge of the job key and checks that
 * the server knows it too. Blocks until deadline_ns (CLOCK_MONOTONIC). peer_name names the server in errors.
 */
TP_API tp_status_t tp_auth_connect(int fd, const uint8_t key[TP_JOB_KEY_BYTES], tp_conn_kind_t kind, int my_rank,
                            int64_t deadline_ns, const char *peer_name);
/* The same, and it gives up (TP_ERR_PEER_FAILED, nothing logged) once abandoned(ctx) says so, checked at least every
 * 50 ms while it waits: a transport connecting on a call's behalf passes the env's abandoned (below). */
TP_API tp_status_t tp_auth_connect_or_abandon(int fd, const uint8_t key[TP_JOB_KEY_BYTES], tp_conn_kind_t kind,
                                              int my_rank, int64_t deadline_ns, const char *peer_name,
                                              int (*abandoned)(void *ctx), void *ctx);

/* Server side, non-blocking: one state per accepted connection, fed whenever the socket is readable. */
typedef struct tp_auth_accept {
    int state;
    size_t have;
    uint8_t buf[64];
    uint8_t server_nonce[16];
    uint8_t client_nonce[16];
    tp_conn_kind_t kind;
    int rank;            /* the rank the client claims, valid once done */
    int64_t deadline_ns; /* accepted + TP_AUTH_DEADLINE_NS: a client that has not proved the key by then is dropped */
} tp_auth_accept_t;

/* A real peer proves the key in a few round trips; a connection that has not within this long is dropped. */
#define TP_AUTH_DEADLINE_NS 1000000000LL

typedef enum tp_auth_result {
    TP_AUTH_MORE = 0,    /* wait for the socket to be readable again */
    TP_AUTH_DONE = 1,    /* authenticated: st->rank and st->kind are set */
    TP_AUTH_REFUSED = 2, /* refused: why holds the reason; close the socket */
} tp_auth_result_t;

TP_API void tp_auth_accept_init(tp_auth_accept_t *st);
/* Whether st's handshake is past its deadline at now; if not, lowers *next to that deadline. */
TP_API int tp_auth_accept_expired(const tp_auth_accept_t *st, int64_t now, int64_t *next);
TP_API tp_auth_result_t tp_auth_accept_step(tp_auth_accept_t *st, int fd, const uint8_t key[TP_JOB_KEY_BYTES],
                                     tp_conn_kind_t expect_kind, char *why, size_t why_len);

/*
 * Refused connections at one listener: the first TP_REFUSALS_LOGGED are logged in full, the rest counted and
 * reported in one line per kind, so a flood of strays cannot flood the log. Zero-initialise, set subsys.
 */
#define TP_REFUSALS_LOGGED 8
typedef enum tp_refusal_kind {
    TP_REFUSED_LATE,  /* did not prove the key by its deadline: only ever counted */
    TP_REFUSED_BAD,   /* failed the handshake or what follows it */
    TP_REFUSED_STRAY, /* still in the handshake when the listener needed no one more */
    TP_REFUSED_KINDS
} tp_refusal_kind_t;
typedef struct tp_refusals {
    const char *subsys;
    int logged;
    int count[TP_REFUSED_KINDS]; /* not yet reported */
    char first[TP_REFUSED_KINDS][64];
} tp_refusals_t;
/* One refused connection from `from`; fmt (a whole message) is logged while fewer than TP_REFUSALS_LOGGED were. */
TP_API void tp_refusals_note(tp_refusals_t *r, tp_refusal_kind_t kind, const char *from, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Logs one line per kind of the refusals counted since the last report. */
TP_API void tp_refusals_report(tp_refusals_t *r);

/* A peer's printable address ("127.0.0.1:4711") for messages. */
TP_API void tp_sockaddr_string(int fd, int peer_side, char *out, size_t len);
TP_API int64_t tp_now_ns(void);

/* ---- Memory from tp_mem_alloc: a transport may let a same-host peer read it in place ---- */

typedef struct tp_mem_ref {
    int fd;        /* this process's memfd of the allocation (sealed: it cannot shrink) */
    uint64_t ino;  /* its inode: fd numbers are reused, the inodes of live memfds are not */
    size_t bytes;  /* the whole allocation */
    size_t offset; /* where the bytes asked about begin in it */
} tp_mem_ref_t;

/* 1, with *ref, when all n bytes from p lie in one live tp_mem_alloc allocation; else 0. */
TP_API int tp_mem_find(const void *p, size_t n, tp_mem_ref_t *ref);

/* ---- Fate: a transport that finds a peer dead reports it; the fate thread ends the job ---- */

/*
 * Reports what this rank saw of a world rank's failure (its connection closed in a call); returns at once. The
 * first report is taken; rank 0 decides which failure every rank names (a rank that closed its connections only
 * because another failed is never named).
 */
TP_API void tp_fate_report(int world_rank, const char *reason);
/* tp_fate_report with the status calls get: a peer that broke the protocol (TP_ERR_PROTOCOL, TP_ERR_DESYNC). */
TP_API void tp_fate_blame(int world_rank, tp_status_t status, const char *reason);

/* ---- Wire integers: little-endian at any alignment, whatever the host (one load or store each) ---- */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TP_LE16(v) __builtin_bswap16(v)
#define TP_LE32(v) __builtin_bswap32(v)
#define TP_LE64(v) __builtin_bswap64(v)
#else
#define TP_LE16(v) (v)
#define TP_LE32(v) (v)
#define TP_LE64(v) (v)
#endif
static inline void tp_put_le16(uint8_t *p, uint16_t v)
{
    v = TP_LE16(v);
    __builtin_memcpy(p, &v, sizeof(v));
}
static inline void tp_put_le32(uint8_t *p, uint32_t v)
{
    v = TP_LE32(v);
    __builtin_memcpy(p, &v, sizeof(v));
}
static inline void tp_put_le64(uint8_t *p, uint64_t v)
{
    v = TP_LE64(v);
    __builtin_memcpy(p, &v, sizeof(v));
}
static inline uint16_t tp_get_le16(const uint8_t *p)
{
    uint16_t v;
    __builtin_memcpy(&v, p, sizeof(v));
    return TP_LE16(v);
}
static inline uint32_t tp_get_le32(const uint8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, sizeof(v));
    return TP_LE32(v);
}
static inline uint64_t tp_get_le64(const uint8_t *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, sizeof(v));
    return TP_LE64(v);
}

/* ---- Frames: what every data transport carries (built and checked by the collectives layer) ---- */

#define TP_FRAME_HEADER_BYTES 40

/* Fills a frame header's part number and payload size (the rest is the caller's template). */
TP_API void tp_frame_set_part(uint8_t header[TP_FRAME_HEADER_BYTES], uint32_t part, uint32_t bytes);
/* The payload size a header claims. */
TP_API uint32_t tp_frame_bytes(const uint8_t header[TP_FRAME_HEADER_BYTES]);
/* Which collective (or send/receive) a header's call is, as a number under 16 that both ends of the call see alike:
 * a transport may keep what it learns per kind of call (shm times exchanges so). */
TP_API unsigned tp_frame_kind(const uint8_t header[TP_FRAME_HEADER_BYTES]);
/*
 * Checks a received header against the expected one: a bad magic, an impossible size (over max_bytes) or an
 * unknown field is TP_ERR_PROTOCOL, another call, collective, type, count or root TP_ERR_DESYNC; *matched is
 * 1 when step and part match too, 0 when the frame belongs to another receive of this call. Logs errors.
 */
TP_API tp_status_t tp_frame_check(const uint8_t expected[TP_FRAME_HEADER_BYTES], const uint8_t got[TP_FRAME_HEADER_BYTES],
                           uint64_t max_bytes, int peer_world_rank, int *matched);

/* ---- Memory types: where a buffer lives (a transport's caps, a device's memory query) ---- */

typedef enum tp_mem_type {
    TP_MEM_HOST = 0, /* ordinary or pinned host memory */
    TP_MEM_CUDA = 1, /* CUDA device memory */
    TP_MEM_HIP = 2,  /* HIP device memory */
    TP_MEM_TYPES
} tp_mem_type_t;

/* ---- Transports: one const ops table each, listed in runtime_transports.c ---- */

#define TP_TRANSPORT_ABI 9
#define TP_TRANSPORT_ADDRESS_MAX 1024 /* bytes of text a transport publishes (a few ports' GIDs fit) */
#define TP_TRANSPORT_PAIR_MAX 4096    /* bytes of connection data a transport sends one peer (a QP blob fits) */

/* What a transport learns of the job when it opens; its own settings it reads itself (tp_config). */
typedef struct tp_transport_env {
    int rank; /* world rank */
    int size;
    const uint8_t *job_key;
    double connect_timeout_s;
    int spin_us;
    uint64_t part_bytes;
    const char *ip; /* this rank's IPv4 address as peers reach it (its bootstrap connection's local end); "" unknown */
    int on_loopback; /* rank 0's bootstrap is on loopback: every rank runs on this host */
    /* A transport that connects over IP reports each connection as made (each end's "ip:port"), one call at a time;
     * the runtime's interface report and NCCL_SOCKET_IFNAME come from it. NULL: nobody listens. */
    void (*connected)(void *ctx, int peer, const char *local, const char *remote);
    void *connected_ctx;
    /* TP_CONNECT=lazy (the default): connect may return before any connection is made, and post may then name a peer
     * not yet connected; the transport connects it then (the two ends agree who dials) and moves the transfer once it
     * is. 0 (eager): connect returns with every connection made. A transport may always connect eagerly. */
    int connect_lazy;
    /* Nonzero once the job has failed (fate's verdict; with TP_ERRORS=return calls go on returning it): a transport
     * waiting to connect for a call stops waiting then instead of at its deadline. NULL: never. */
    int (*abandoned)(void *ctx);
    void *abandoned_ctx;
} tp_transport_env_t;

/* What a transport sees of one peer when it decides whether and how to reach it. */
typedef struct tp_peer_view {
    int rank;        /* world rank */
    int same_host;   /* the launcher named the same host */
    int same_kernel; /* same boot id and pid namespace: its pid is valid here (pidfd, process_vm_readv) */
    const char *host;
    const char *ip;      /* where its bootstrap connection came from */
    const char *address; /* what this transport published on that rank; NULL when it did not open there */
} tp_peer_view_t;

/* How a transport reaches one peer, given to connect (an array by world rank). */
typedef struct tp_transport_peer {
    int use;                    /* this transport was chosen for the peer (the other fields are for those) */
    const tp_peer_view_t *view;
    const char *dial;           /* TP_TRANSPORT_IP_ENDPOINTS: "ip:port,..." to try, best first; else view->address */
    const void *pair;           /* what the peer's pair_info wrote for this rank; NULL when nothing */
    size_t pair_len;
    /* The peer shares this rank's kernel, whose ranks outnumber the CPUs they may run on (from the ranks' CPU sets,
     * else the CPUs online): one of the two may wait for a CPU while the other runs. */
    int crowded;
} tp_transport_peer_t;

#define TP_TRANSPORT_IP_ENDPOINTS 1u /* its address is "ip:port": the runtime picks the interfaces to dial */
#define TP_TRANSPORT_DELIVER      2u /* honours a receive's deliver: payload bytes are lent where they lie, not copied */
#define TP_TRANSPORT_MIRROR       4u /* honours a send's mirror: payload bytes are copied there too as they go out */

typedef struct tp_transport_caps {
    uint32_t mem_types; /* bit (1u << tp_mem_type_t) for each memory type post can move */
    uint32_t flags;     /* TP_TRANSPORT_* */
} tp_transport_caps_t;

/* reach's answer for a peer it cannot reach; any positive priority can, and the highest of the transports wins. */
#define TP_REACH_NO 0

/*
 * One transfer: a message of len bytes to or from one peer, moved as frames of at most part_bytes payload,
 * parts first_part, first_part + 1, ... (a zero-length message is one empty frame). Sends go in the order posted
 * per peer; a received frame goes to the posted receive whose header matches it (step and part).
 */
typedef struct tp_xfer {
    int peer;                                /* world rank */
    int is_send;
    uint8_t header[TP_FRAME_HEADER_BYTES];   /* template; the transport sets part and size per frame */
    void *buf;
    size_t len;
    size_t ready;      /* send: bytes of buf that may go now (the caller raises it as data is produced) */
    size_t part_bytes; /* payload per frame */
    uint32_t first_part;
    tp_mem_type_t mem; /* where buf lives: post refuses a type the transport's caps lack */
    /* Receive, on a transport with TP_TRANSPORT_DELIVER (others never see it set): payload bytes off.. of this
     * transfer, in order, lent for the call's duration instead of copied into buf (the engine reduces them from the
     * transport's memory); an error ends the transport's progress with it. NULL: copied into buf. */
    tp_status_t (*deliver)(void *arg, size_t off, const void *bytes, size_t n);
    void *deliver_arg;
    /* Send, on a transport with TP_TRANSPORT_MIRROR (others never see it set): every payload byte is also copied to
     * the same offset of mirror (len bytes, not overlapping buf) by the time the send completes, while the bytes are
     * in cache (the engine's own copy of a block it sends). NULL: none. */
    void *mirror;
    /* Send: its bytes are worked on as they move (the caller raises ready as it makes them, or the peer lends its
     * receive and reduces them as they arrive), so a transport keeps this rank copying beside that work rather than
     * leaving the peer to fetch everything at the end (shm: the ring, never CMA). */
    int streamed;
    /* Send: the peer should read each frame whole from buf when the transport can (shm: CMA), the frames of a send
     * still growing waiting until they are whole (the caller waits for it anyway); the ring otherwise. */
    int lend;
    /* Receive with deliver: len bytes where a frame the transport reads whole from the sender's memory lands, at its
     * payload offset, before it is lent to deliver in one piece (it may be the buffer deliver writes). NULL: such a
     * frame comes through the transport's own memory in pieces. */
    void *land;
    int peer_lent; /* a frame of it moved by the receiver reading the sender's buffer whole (set by the transport) */
    size_t done;  /* payload bytes moved so far (set by the transport) */
    int complete; /* set by the transport */
    /* transport-private */
    int growing; /* a send posted before all its bytes existed (ready < len): they are written during the call */
    struct tp_xfer *next;
    size_t frame_off; /* bytes of the current frame moved, header included */
    uint8_t wire[TP_FRAME_HEADER_BYTES];
    uint8_t prefix[8];   /* bytes a transport sends ahead of the first frame (tcp: an order mark) */
    uint8_t prefix_left; /* of those, still to go (the last prefix_left of the 8) */
} tp_xfer_t;

/* A transport's post: x starts over (nothing moved, no frame begun), its parts at most max_part bytes (the env's
 * part_bytes), and joins the end of the queue *head .. *tail (linked through next). */
TP_API void tp_xfer_enqueue(tp_xfer_t *x, uint64_t max_part, tp_xfer_t **head, tp_xfer_t **tail);
/* Payload bytes of x's frame that starts at payload offset base: part_bytes, or what is left of len. */
TP_API size_t tp_xfer_frame_len(const tp_xfer_t *x, size_t base);
/* Payload bytes of that frame the caller has produced (x->ready): a frame may start before all of it exists. */
TP_API size_t tp_xfer_frame_ready(const tp_xfer_t *x, size_t base);
/* The header of x's frame at payload offset base, as it goes out or as a receive expects it. */
TP_API void tp_xfer_frame_header(const tp_xfer_t *x, size_t base, uint8_t out[TP_FRAME_HEADER_BYTES]);

/* Every op is set: an unsupported one points at its tp_transport_unsupported_* stub. */
typedef struct tp_transport_ops {
    uint32_t abi_version; /* TP_TRANSPORT_ABI */
    uint32_t ops_size;    /* sizeof(tp_transport_ops_t) when built */
    const char *name;     /* as in TP_TRANSPORTS and the report ("tcp") */
    /* Before the bootstrap (a device transport may find no device): sets up listening and writes the text peers
     * need to reach this rank (printable, no ';', at most TP_TRANSPORT_ADDRESS_MAX bytes) into address. */
    tp_status_t (*open)(const tp_transport_env_t *env, void **state, char *address, size_t address_len);
    /* After open: what post can move (host or device memory), so the runtime never hands it what it cannot. */
    void (*caps)(void *state, tp_transport_caps_t *caps);
    /* Whether and how well it reaches a peer (shm: same_kernel; verbs: a shared subnet): a priority, or
     * TP_REACH_NO. Must give both ends of a pair the same answer: the two sides connect with what they chose. */
    int (*reach)(void *state, const tp_peer_view_t *peer);
    /* Per-pair connection data (verbs: a QP number and PSN per peer), exchanged through the bootstrap before
     * connect; writes at most *len bytes for peer and sets *len. Only asked for peers it was chosen for. */
    tp_status_t (*pair_info)(void *state, const tp_peer_view_t *peer, void *data, size_t *len);
    /* Connects to every peer with peers[p].use set (with what each peer wrote this rank in pair_info); blocks. With
     * env->connect_lazy it may instead keep what it needs and connect each peer when post first names it. */
    tp_status_t (*connect)(void *state, const tp_transport_peer_t *peers);
    /* Queues a transfer; nothing moves until progress. */
    tp_status_t (*post)(void *state, tp_xfer_t *xfer);
    /* Moves what it can without blocking and sets *moved (the runtime spins on it, then blocks in one poll over
     * every transport's event_fds and its own wake fd, so a waiting call also hears of a failure or a stop). */
    tp_status_t (*progress)(void *state, int *moved);
    /* The fds a wait may block on (with their events) for what is queued now, so a rank with several transports
     * blocks in one poll over all of them; fills at most max and returns how many there are (more than max: the
     * runtime asks again with room), 0 when nothing is queued, -1 when it cannot be waited on (it is then polled). */
    int (*event_fds)(void *state, struct pollfd *fds, int max);
    /* Drops every queued transfer after a failed call; peers with a frame half moved are not used again. */
    void (*cancel)(void *state);
    /* Registers memory for zero-copy transports (verbs needs the lkey/rkey of an ibv_reg_mr). */
    tp_status_t (*mem_register)(void *state, void *buf, size_t len, void **handle);
    /* Releases what mem_register returned. */
    void (*mem_deregister)(void *state, void *handle);
    /* At tp_finalize or a failed tp_init: closes its connections and listener and frees state. */
    void (*close)(void *state);
} tp_transport_ops_t;

/* The shared stubs for unsupported ops (pair_info: needs no per-pair data; event_fds: cannot be waited on). */
TP_API tp_status_t tp_transport_unsupported_pair_info(void *state, const tp_peer_view_t *peer, void *data, size_t *len);
TP_API int tp_transport_unsupported_event_fds(void *state, struct pollfd *fds, int max);
TP_API tp_status_t tp_transport_unsupported_register(void *state, void *buf, size_t len, void **handle);
TP_API void tp_transport_unsupported_deregister(void *state, void *handle);

/* Adds a transport built outside libtp (an engine's own, a test's) after the built-in ones; before tp_init. */
TP_API tp_status_t tp_transport_register(const tp_transport_ops_t *ops);
/* A built-in or registered transport's ops by name, or NULL (a wrapper or a conformance test reaches it so). */
TP_API const tp_transport_ops_t *tp_transport_find(const char *name);
/* The index-th registered transport in order of preference (built-in, then registered), NULL past the last: how a
 * test enumerates them. */
TP_API const tp_transport_ops_t *tp_transport_at(int index);

/* ---- Devices: where a buffer lives, how it is copied and reduced, and its streams; one const ops table each ---- */

#define TP_DEVICE_ABI 3

/* Whether an op applies to a type (TP_BYTES and unknown ones do not reduce): what every device's reduce takes. */
TP_API int tp_reduce_supported(tp_dtype_t dtype, tp_op_t op);

/* A device's event (a CUevent, a hipEvent_t, a host stream's mark). */
typedef struct tp_device_event tp_device_event_t;

struct tp_device_ops;

/*
 * A stream as devices and providers see it (tp.h's opaque tp_stream_t): here, not in a runtime header, because
 * devices and providers see only tp.h and this header, and they need the native handle. One is made by
 * tp_stream_create (the engine's native stream, not owned) or by a device's stream_create (owned).
 */
struct tp_stream {
    tp_device_kind_t kind;
    const struct tp_device_ops *dev; /* the device of kind, whose ops take this stream */
    void *native;                    /* the CUstream or hipStream_t (NULL: that API's default stream); host: NULL */
    void *priv;                      /* the device's own: the CUcontext work runs in, a host stream's queue */
    int owned;                       /* libtp made native and destroys it with the stream */
};

/*
 * Event ops share one signature, so a device without streams points them all at tp_device_unsupported_stream.
 * A NULL stream is the device's synchronous order (the host's only one before host streams).
 */
typedef tp_status_t (*tp_device_stream_fn)(tp_stream_t *stream, tp_device_event_t **event);

/*
 * Every op is set: one a device lacks points at the tp_device_unsupported_* stub of its signature. Ops that take a
 * stream take only this device's streams (kind == the device's kind): the runtime never mixes them.
 */
typedef struct tp_device_ops {
    uint32_t abi_version;  /* TP_DEVICE_ABI */
    uint32_t ops_size;     /* sizeof(tp_device_ops_t) when built */
    const char *name;      /* "host", "cuda", "hip" */
    tp_device_kind_t kind; /* which tp_stream_create kind it serves */
    /* Loads the vendor library once (later calls return the first answer); refuses by name a driver or device that
     * cannot wait on a 64-bit stream value. Nothing else below is called before it returned TP_OK. */
    tp_status_t (*init)(void);
    /* Whether ptr is this device's memory, and *type which; the host device claims every pointer, so it comes last.
     * Cheap for a host pointer; costs nothing when the vendor library is absent (it never calls init). */
    int (*mem_query)(const void *ptr, tp_mem_type_t *type);
    /* Copies len bytes (the regions may overlap when stream is NULL); with a stream only queued on it. */
    tp_status_t (*copy)(void *dst, const void *src, size_t len, tp_stream_t *stream);
    /*
     * dst[i] = ((srcs[0][i] op srcs[1][i]) op srcs[2][i]) ... in this order, bf16 and f16 in f32 rounded once at the
     * end; dst may be any one of the sources. Takes what tp_reduce_supported accepts. On device memory a kernel
     * queued on stream; the same bits as the host device's.
     */
    tp_status_t (*reduce)(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count,
                          tp_stream_t *stream);
    /* Pinned host memory mapped for the device: *host for the CPU, *dev the address device work (copies, stream
     * values) uses; zeroed. host_free takes *host. */
    tp_status_t (*host_alloc)(size_t len, void **host, void **dev);
    void (*host_free)(void *host);
    /* A stream libtp owns (a proxy's copy stream) on like's device and context; like NULL: the calling thread's
     * current one. It does not wait for other streams (CUDA: non-blocking). */
    tp_status_t (*stream_create)(tp_stream_t *like, tp_stream_t **stream);
    /* Wraps the engine's native stream (tp_stream_create): notes its context; native stays the engine's. */
    tp_status_t (*stream_adopt)(void *native, tp_stream_t **stream);
    /* Frees a stream of stream_create or stream_adopt; the native too only when owned. */
    void (*stream_destroy)(tp_stream_t *stream);
    /* The host waits until everything queued on stream so far has run. */
    tp_status_t (*stream_sync)(tp_stream_t *stream);
    /* Queues on stream: store value at dev_addr (a host_alloc dev address), after the work queued before. */
    tp_status_t (*stream_write64)(tp_stream_t *stream, void *dev_addr, uint64_t value);
    /* Queues on stream: later work waits until the 64-bit word at dev_addr is >= value. */
    tp_status_t (*stream_wait64)(tp_stream_t *stream, void *dev_addr, uint64_t value);
    /* 1 when stream is being captured into a graph (work queued now would only be recorded), 0 not, or a negative
     * tp_status_t. */
    int (*stream_capturing)(tp_stream_t *stream);
    tp_device_stream_fn event_record;  /* creates *event when NULL, then records it on stream */
    tp_device_stream_fn stream_wait;   /* work queued on stream after this runs after what *event marks */
    tp_device_stream_fn event_sync;    /* the host waits for what *event marks */
    tp_device_stream_fn event_release; /* destroys *event and sets it NULL */
    /* The PCI bus id ("0000:3b:00.0") of the GPU the stream's work runs on, into out (len bytes): ranks on one host
     * with the same id share that GPU. */
    tp_status_t (*stream_bus_id)(tp_stream_t *stream, char *out, size_t len);
} tp_device_ops_t;

/* The stubs a device points the ops it does not have at; each returns TP_ERR_UNSUPPORTED (or does nothing). */
TP_API tp_status_t tp_device_unsupported_stream(tp_stream_t *stream, tp_device_event_t **event);
TP_API tp_status_t tp_device_unsupported_init(void);
TP_API tp_status_t tp_device_unsupported_host_alloc(size_t len, void **host, void **dev);
TP_API void tp_device_unsupported_host_free(void *host);
TP_API tp_status_t tp_device_unsupported_stream_create(tp_stream_t *like, tp_stream_t **stream);
TP_API tp_status_t tp_device_unsupported_stream_adopt(void *native, tp_stream_t **stream);
TP_API void tp_device_unsupported_stream_destroy(tp_stream_t *stream);
TP_API tp_status_t tp_device_unsupported_stream_sync(tp_stream_t *stream);
TP_API tp_status_t tp_device_unsupported_value(tp_stream_t *stream, void *dev_addr, uint64_t value);
TP_API int tp_device_unsupported_capturing(tp_stream_t *stream);
TP_API tp_status_t tp_device_unsupported_bus_id(tp_stream_t *stream, char *out, size_t len);
/* init for a device that needs no library (the host's). */
TP_API tp_status_t tp_device_init_none(void);

/* The device that serves a stream kind (and has been initialised), or NULL after logging why (no CUDA here). */
TP_API const tp_device_ops_t *tp_device_of_kind(tp_device_kind_t kind);

/* Host memory: memmove, the rank-order reductions, and host streams run by a thread of libtp (devices/host/). */
extern const tp_device_ops_t tp_host_device_ops;

/* ---- Collective providers: who runs tp.h's calls on a memory type (the built-in host engine; NCCL beside it) ---- */

#define TP_COLL_ABI 1

/* The calls a provider can take: bits of its caps. */
typedef enum tp_coll_call {
    TP_CALL_BARRIER,
    TP_CALL_BROADCAST,
    TP_CALL_ALL_GATHER,
    TP_CALL_ALL_GATHERV,
    TP_CALL_ALL_REDUCE,
    TP_CALL_REDUCE_SCATTER,
    TP_CALL_ALL_TO_ALL,
    TP_CALL_SEND,
    TP_CALL_RECV,
    TP_CALL_EXCHANGE,
    TP_CALLS
} tp_coll_call_t;

#define TP_CALL_BIT(call) (1u << (call))
#define TP_CALLS_ALL      ((1u << TP_CALLS) - 1u)
#define TP_MEM_BIT(type)  (1u << (type))

/*
 * One call, checked by the API: the arguments of its tp.h function (peer is the root for broadcast, the other
 * rank for send, recv and exchange), and the device that owns the buffers, whose copy and reduce it uses.
 */
typedef struct tp_coll_args {
    tp_coll_call_t call;
    const void *send; /* broadcast, recv: unused (the buffer is recv) */
    void *recv;
    size_t count;
    const size_t *counts; /* all_gatherv */
    tp_dtype_t dtype;
    tp_op_t op;
    int peer;
    tp_stream_t *stream;
    tp_mem_type_t mem_type;
    const tp_device_ops_t *device;
} tp_coll_args_t;

typedef tp_status_t (*tp_coll_fn)(void *comm_state, const tp_coll_args_t *args);

/* What a provider's call returns, before doing anything, to pass the call to the next provider that takes its memory
 * and call (its library is absent on some rank, two ranks share one GPU); the engine never sees it. Any other status,
 * TP_ERR_UNSUPPORTED included, ends the call. */
#define TP_COLL_DECLINED ((tp_status_t)1)

typedef struct tp_coll_ops {
    uint32_t abi_version; /* TP_COLL_ABI */
    uint32_t ops_size;    /* sizeof(tp_coll_ops_t) when built */
    const char *name;     /* "host", "nccl" */
    uint32_t mem_types;   /* TP_MEM_BIT of each memory type whose buffers it takes */
    uint32_t calls;       /* TP_CALL_BIT of each call it takes; the slots of the others point at tp_coll_unsupported */
    int streams;          /* 1: orders calls on the caller's stream; 0: takes only NULL streams */
    /* Per comm, when the comm is made (tp_init's world, tp_comm_split's); *state is passed to every call. */
    tp_status_t (*comm_create)(tp_comm_t *comm, void **state);
    void (*comm_destroy)(void *state);
    tp_coll_fn barrier, broadcast, all_gather, all_gatherv, all_reduce, reduce_scatter, all_to_all;
    tp_coll_fn send, recv, exchange;
} tp_coll_ops_t;

/* The one stub every provider points the calls it does not take at. */
TP_API tp_status_t tp_coll_unsupported(void *comm_state, const tp_coll_args_t *args);

/* The built-in engine: host memory over the transports (runtime/coll_*.c). */
extern const tp_coll_ops_t tp_host_coll_ops;

#ifdef __cplusplus
}
#endif

#endif /* TP_PROVIDER_H */
