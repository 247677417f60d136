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

int tp_log_enabled(tp_log_level_t level);
/* Logs "tp rank R (host:pid) subsys: message"; errors are also kept as the thread's tp_last_error(). */
void tp_log(tp_log_level_t level, const char *subsys, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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
tp_status_t tp_auth_connect(int fd, const uint8_t key[TP_JOB_KEY_BYTES], tp_conn_kind_t kind, int my_rank,
                            int64_t deadline_ns, const char *peer_name);

/* Server side, non-blocking: one state per accepted connection, fed whenever the socket is readable. */
typedef struct tp_auth_accept {
    int state;
    size_t have;
    uint8_t buf[64];
    uint8_t server_nonce[16];
    uint8_t client_nonce[16];
    tp_conn_kind_t kind;
    int rank; /* the rank the client claims, valid once done */
} tp_auth_accept_t;

typedef enum tp_auth_result {
    TP_AUTH_MORE = 0,    /* wait for the socket to be readable again */
    TP_AUTH_DONE = 1,    /* authenticated: st->rank and st->kind are set */
    TP_AUTH_REFUSED = 2, /* refused: why holds the reason; close the socket */
} tp_auth_result_t;

void tp_auth_accept_init(tp_auth_accept_t *st);
tp_auth_result_t tp_auth_accept_step(tp_auth_accept_t *st, int fd, const uint8_t key[TP_JOB_KEY_BYTES],
                                     tp_conn_kind_t expect_kind, char *why, size_t why_len);

/* A peer's printable address ("127.0.0.1:4711") for messages. */
void tp_sockaddr_string(int fd, int peer_side, char *out, size_t len);
int64_t tp_now_ns(void);

/* ---- Fate: a transport that finds a peer dead reports it; the fate thread ends the job ---- */

/* Reports that a world rank failed; the first report wins; returns immediately (the fate thread exits us). */
void tp_fate_report(int world_rank, const char *reason);

#ifdef __cplusplus
}
#endif

#endif /* TP_PROVIDER_H */
