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
TP_API void tp_log(tp_log_level_t level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

/* ---- Fate: a transport that finds a peer dead reports it; the fate thread ends the job ---- */

/* Reports that a world rank failed; the first report wins; returns immediately (the fate thread exits us). */
TP_API void tp_fate_report(int world_rank, const char *reason);

/* ---- Frames: what every data transport carries (built and checked by the collectives layer) ---- */

#define TP_FRAME_HEADER_BYTES 40

/* Fills a frame header's part number and payload size (the rest is the caller's template). */
TP_API void tp_frame_set_part(uint8_t header[TP_FRAME_HEADER_BYTES], uint32_t part, uint32_t bytes);
/* The payload size a header claims. */
TP_API uint32_t tp_frame_bytes(const uint8_t header[TP_FRAME_HEADER_BYTES]);
/*
 * Checks a received header against the expected one: a bad magic, an impossible size (over max_bytes) or an
 * unknown field is TP_ERR_PROTOCOL, another call, collective, type, count or root TP_ERR_DESYNC; *matched is
 * 1 when step and part match too, 0 when the frame belongs to another receive of this call. Logs errors.
 */
TP_API tp_status_t tp_frame_check(const uint8_t expected[TP_FRAME_HEADER_BYTES],
                                  const uint8_t got[TP_FRAME_HEADER_BYTES], uint64_t max_bytes, int peer_world_rank,
                                  int *matched);

/* ---- Memory types: where a buffer lives (a transport's caps, a device's memory query) ---- */

typedef enum tp_mem_type {
    TP_MEM_HOST = 0, /* ordinary or pinned host memory */
    TP_MEM_CUDA = 1, /* CUDA device memory */
    TP_MEM_HIP = 2,  /* HIP device memory */
    TP_MEM_TYPES
} tp_mem_type_t;

/* ---- Transports: one const ops table each, listed in runtime_transports.c ---- */

#define TP_TRANSPORT_ABI 1

/* What a transport learns of the job when it opens. */
typedef struct tp_transport_env {
    int rank; /* world rank */
    int size;
    const uint8_t *job_key;
    double connect_timeout_s;
    int spin_us;
    uint64_t part_bytes;
    const char *advertise_ip; /* where peers reach this rank; "" when unknown */
    const char *boot_host;    /* rank 0's bootstrap host: a loopback one keeps listeners on loopback */
    /* A socket transport tells the runtime each peer's connection as made: its local and remote "ip:port". */
    void (*on_connected)(void *ctx, int peer, const char *local, const char *remote);
    void *on_connected_ctx;
} tp_transport_env_t;

/*
 * One transfer: a message of len bytes to or from one peer, moved as frames of at most part_bytes payload,
 * parts first_part, first_part + 1, ... (a zero-length message is one empty frame). Sends go in the order posted
 * per peer; a received frame goes to the posted receive whose header matches it (step and part).
 */
typedef struct tp_xfer {
    int peer; /* world rank */
    int is_send;
    uint8_t header[TP_FRAME_HEADER_BYTES]; /* template; the transport sets part and size per frame */
    void *buf;
    size_t len;
    size_t ready;      /* send: bytes of buf that may go now (the caller raises it as data is produced) */
    size_t part_bytes; /* payload per frame */
    uint32_t first_part;
    size_t done;  /* payload bytes moved so far (set by the transport) */
    int complete; /* set by the transport */
    /* transport-private */
    struct tp_xfer *next;
    size_t frame_off; /* bytes of the current frame moved, header included */
    uint8_t wire[TP_FRAME_HEADER_BYTES];
} tp_xfer_t;

typedef struct tp_transport_ops {
    uint32_t abi_version; /* TP_TRANSPORT_ABI */
    uint32_t ops_size;    /* sizeof(tp_transport_ops_t) when built */
    const char *name;     /* as in TP_TRANSPORTS and addresses ("tcp") */
    /* Before the bootstrap: set up listening; writes the address peers use into address. */
    tp_status_t (*open)(const tp_transport_env_t *env, void **state, char *address, size_t address_len);
    /* Whether this transport can reach a peer that published address (NULL when it published none). */
    int (*can_reach)(void *state, int peer, const char *address);
    /* Connects to every peer with use[peer] set (addresses[peer] is its published address); blocks. */
    tp_status_t (*connect)(void *state, const int *use, const char *const *addresses);
    /* Queues a transfer; nothing moves until progress. */
    tp_status_t (*post)(void *state, tp_xfer_t *xfer);
    /* Moves what it can; with wait set and nothing moved, spins then blocks until something moves. */
    tp_status_t (*progress)(void *state, int wait);
    /* Drops every queued transfer after a failed call; peers with a frame half moved are not used again. */
    void (*cancel)(void *state);
    /* Registers memory for zero-copy transports (tp_transport_unsupported_register where not needed). */
    tp_status_t (*mem_register)(void *state, void *buf, size_t len, void **handle);
    void (*close)(void *state);
} tp_transport_ops_t;

/* The one stub every transport points unsupported ops at. */
TP_API tp_status_t tp_transport_unsupported_register(void *state, void *buf, size_t len, void **handle);
/* The index-th registered transport in order of preference, or NULL past the last: tests list what is registered. */
TP_API const tp_transport_ops_t *tp_transport_at(int index);

#ifdef __cplusplus
}
#endif

#endif /* TP_PROVIDER_H */
