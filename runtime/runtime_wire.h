/* runtime_wire.h: framing, keyed MACs and socket helpers shared by the bootstrap and fate paths. */
#ifndef RUNTIME_WIRE_H
#define RUNTIME_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "tp_provider.h"

#define TP_WIRE_MAGIC 0x314d5054u /* "TPM1" */
#define TP_WIRE_MAX_PAYLOAD (16u << 20)

typedef enum tp_msg_type {
    TP_MSG_RECORD = 1,    /* rank -> 0: a peer record and its settings */
    TP_MSG_TABLE = 2,     /* 0 -> rank: every record, the bootstrap succeeded */
    TP_MSG_ERROR = 3,     /* 0 -> rank: the bootstrap failed, with the reason */
    TP_MSG_HEARTBEAT = 4, /* both ways, while the job runs */
    TP_MSG_FAIL = 5,      /* either way: a rank failed (rank, pid, host, reason) */
    TP_MSG_BYE = 6,       /* rank -> 0: this rank is finalizing */
    TP_MSG_BYE_ACK = 7,   /* 0 -> rank: every rank is finalizing; close */
    TP_MSG_PAIRS = 8,     /* rank -> 0 -> rank: per-pair connection data, before fate */
    TP_MSG_STOP = 9,      /* 0 -> rank: a rank called tp_finalize, with its call counts (the stop word) */
} tp_msg_type_t;

typedef struct tp_msg_header {
    uint32_t magic;
    uint16_t type;
    uint16_t reserved;
    uint32_t length; /* payload bytes after the header */
} tp_msg_header_t;

/* SipHash-2-4 with a 128-bit output: the MAC every handshake uses. */
void tp_siphash128(const uint8_t key[16], const void *data, size_t len, uint8_t out[16]);
void tp_siphash64(const uint8_t key[16], const void *data, size_t len, uint8_t out[8]);

/* Fills buf with random bytes (getrandom); falls back to /dev/urandom. */
tp_status_t tp_random_bytes(void *buf, size_t len);

/* Waits until fd has events (1), deadline_ns passes (0), poll fails (-1) or abandoned(ctx) says so (-2; checked at
 * least every 50 ms when given, NULL: never). */
int tp_wire_wait(int fd, short events, int64_t deadline_ns, int (*abandoned)(void *ctx), void *ctx);
/* Blocking whole-buffer I/O on a (possibly non-blocking) socket until deadline_ns; TP_ERR_PEER_FAILED on EOF. */
tp_status_t tp_wire_write(int fd, const void *buf, size_t len, int64_t deadline_ns);
tp_status_t tp_wire_read(int fd, void *buf, size_t len, int64_t deadline_ns);

/* Sends one message (header + payload) with one writev-like call sequence. */
tp_status_t tp_wire_send_msg(int fd, tp_msg_type_t type, const void *payload, size_t len, int64_t deadline_ns);
/* A FAIL message: "rank\npid\nhost\nstatus\nreason" (a reason longer than the message is cut), sent within 100 ms. */
#define TP_FAIL_MSG_MAX 4096
void tp_wire_send_fail(int fd, const tp_failure_t *f, tp_status_t status);
/* Reads a FAIL payload in place (rank -1: no rank; *reason points into payload); -1 when it is malformed. */
int tp_wire_parse_fail(char *payload, int world_size, int *rank, tp_status_t *status, char **reason);

/* An incremental reader of messages from a non-blocking socket. */
typedef struct tp_msg_reader {
    tp_msg_header_t header;
    size_t have;     /* bytes of header + payload read so far */
    char *payload;   /* NUL-terminated once complete */
    size_t capacity;
    size_t max_payload;
} tp_msg_reader_t;

typedef enum tp_read_result {
    TP_READ_MORE = 0,  /* would block: poll again */
    TP_READ_MSG = 1,   /* a whole message is in the reader */
    TP_READ_EOF = 2,   /* the peer closed */
    TP_READ_ERROR = 3, /* a read error or a bad header (why says which) */
} tp_read_result_t;

void tp_msg_reader_init(tp_msg_reader_t *r, size_t max_payload);
void tp_msg_reader_reset(tp_msg_reader_t *r); /* after a message was consumed */
void tp_msg_reader_free(tp_msg_reader_t *r);
/* Hands over the complete message's payload (the caller frees it); the reader makes a new one for the next. */
char *tp_msg_reader_take(tp_msg_reader_t *r);
tp_read_result_t tp_msg_reader_step(tp_msg_reader_t *r, int fd, char *why, size_t why_len);

/* Connects a TCP socket to host:port (non-blocking, CLOEXEC, NODELAY) and waits until deadline. */
tp_status_t tp_tcp_connect(const char *host, int port, int64_t deadline_ns, int *fd_out, char *why, size_t why_len);
/* Binds and listens on host (NULL: any) port (0: any); CLOEXEC. */
tp_status_t tp_tcp_listen(const char *host, int port, int backlog, int *fd_out, char *why, size_t why_len);
void tp_fd_set_nonblocking(int fd);
/* The port a socket is bound to; the IPv4 address of its local end as text. */
int tp_socket_port(int fd);
void tp_socket_local_ip(int fd, char *out, size_t len);

#endif
