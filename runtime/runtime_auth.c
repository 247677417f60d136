/* runtime_auth.c: the mutual challenge-response every connection of a job goes through. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "runtime_wire.h"

#define AUTH_VERSION    1
#define MAGIC_HELLO     0x31485054u /* "TPH1" */
#define MAGIC_CHALLENGE 0x31435054u /* "TPC1" */
#define MAGIC_PROOF     0x31505054u /* "TPP1" */
#define HELLO_BYTES     32
#define CHALLENGE_BYTES 48
#define PROOF_BYTES     32

enum { AUTH_WANT_HELLO = 0, AUTH_WANT_PROOF = 1 };

/* MAC over (side, kind, rank, first nonce, second nonce): the side byte keeps the two proofs distinct. */
static void auth_mac(const uint8_t key[16], char side, tp_conn_kind_t kind, int rank, const uint8_t a[16],
                     const uint8_t b[16], uint8_t out[16])
{
    uint8_t in[39];
    in[0] = (uint8_t)side;
    tp_put_le16(in + 1, (uint16_t)kind);
    tp_put_le32(in + 3, (uint32_t)rank);
    memcpy(in + 7, a, 16);
    memcpy(in + 23, b, 16);
    tp_siphash128(key, in, sizeof(in), out);
}

/* Compares MACs in constant time. */
static int mac_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (int i = 0; i < 16; i++) d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

tp_status_t tp_auth_connect(int fd, const uint8_t key[TP_JOB_KEY_BYTES], tp_conn_kind_t kind, int my_rank,
                            int64_t deadline_ns, const char *peer_name)
{
    return tp_auth_connect_or_abandon(fd, key, kind, my_rank, deadline_ns, peer_name, NULL, NULL);
}

tp_status_t tp_auth_connect_or_abandon(int fd, const uint8_t key[TP_JOB_KEY_BYTES], tp_conn_kind_t kind, int my_rank,
                                       int64_t deadline_ns, const char *peer_name, int (*abandoned)(void *ctx),
                                       void *ctx)
{
    uint8_t hello[HELLO_BYTES] = {0}, chal[CHALLENGE_BYTES], proof[PROOF_BYTES] = {0}, mac[16];
    uint8_t client_nonce[16];
    tp_status_t s = tp_random_bytes(client_nonce, sizeof(client_nonce));
    if (s != TP_OK) return s;
    tp_put_le32(hello, MAGIC_HELLO);
    tp_put_le16(hello + 4, AUTH_VERSION);
    tp_put_le16(hello + 6, (uint16_t)kind);
    tp_put_le32(hello + 8, (uint32_t)my_rank);
    memcpy(hello + 16, client_nonce, 16);
    s = tp_wire_write(fd, hello, sizeof(hello), deadline_ns);
    if (s == TP_OK && abandoned != NULL && tp_wire_wait(fd, POLLIN, deadline_ns, abandoned, ctx) == -2)
        return TP_ERR_PEER_FAILED;
    if (s == TP_OK) s = tp_wire_read(fd, chal, sizeof(chal), deadline_ns);
    if (s == TP_ERR_BOOTSTRAP) {
        tp_log(TP_LOG_DEBUG, "auth", "%s did not answer the handshake in time", peer_name);
        return TP_ERR_BOOTSTRAP;
    }
    if (s != TP_OK) {
        tp_log(TP_LOG_DEBUG, "auth", "%s closed the connection during the handshake", peer_name);
        return TP_ERR_PEER_FAILED;
    }
    if (tp_get_le32(chal) != MAGIC_CHALLENGE || tp_get_le16(chal + 6) != (uint16_t)kind) {
        tp_log(TP_LOG_ERROR, "auth", "%s does not speak the tp protocol", peer_name);
        return TP_ERR_PROTOCOL;
    }
    auth_mac(key, 'S', kind, my_rank, client_nonce, chal + 16, mac);
    if (!mac_equal(mac, chal + 32)) {
        tp_log(TP_LOG_ERROR, "auth", "%s does not know this job's key (a listener of another job?)", peer_name);
        return TP_ERR_PROTOCOL;
    }
    tp_put_le32(proof, MAGIC_PROOF);
    auth_mac(key, 'C', kind, my_rank, chal + 16, client_nonce, proof + 16);
    s = tp_wire_write(fd, proof, sizeof(proof), deadline_ns);
    if (s != TP_OK) {
        tp_log(TP_LOG_DEBUG, "auth", "%s closed the connection during the handshake", peer_name);
        return TP_ERR_PEER_FAILED;
    }
    return TP_OK;
}

void tp_auth_accept_init(tp_auth_accept_t *st)
{
    memset(st, 0, sizeof(*st));
    st->state = AUTH_WANT_HELLO;
    st->rank = -1;
    st->deadline_ns = tp_now_ns() + TP_AUTH_DEADLINE_NS;
}

int tp_auth_accept_expired(const tp_auth_accept_t *st, int64_t now, int64_t *next)
{
    if (st->deadline_ns <= now) return 1;
    if (st->deadline_ns < *next) *next = st->deadline_ns;
    return 0;
}

void tp_refusals_note(tp_refusals_t *r, tp_refusal_kind_t kind, const char *from, const char *fmt, ...)
{
    if (kind != TP_REFUSED_LATE && r->logged < TP_REFUSALS_LOGGED) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        tp_log(TP_LOG_WARN, r->subsys, "%s", msg);
        if (++r->logged == TP_REFUSALS_LOGGED)
            tp_log(TP_LOG_WARN, r->subsys, "further refused connections are counted, not logged one by one");
        return;
    }
    if (r->count[kind]++ == 0) snprintf(r->first[kind], sizeof(r->first[kind]), "%s", from);
}

void tp_refusals_report(tp_refusals_t *r)
{
    char late[64];
    snprintf(late, sizeof(late), "did not prove the job's key within %g s", TP_AUTH_DEADLINE_NS / 1e9);
    const char *const what[TP_REFUSED_KINDS] = {
        [TP_REFUSED_LATE] = late,
        [TP_REFUSED_BAD] = "failed the handshake or the check-in",
        [TP_REFUSED_STRAY] = "were still in the handshake when no more were needed",
    };
    for (int k = 0; k < TP_REFUSED_KINDS; k++) {
        if (r->count[k] == 0) continue;
        tp_log(TP_LOG_WARN, r->subsys, "refused %d connection%s that %s (the first from %s)", r->count[k],
               r->count[k] == 1 ? "" : "s", what[k], r->first[k]);
        r->count[k] = 0;
    }
}

static tp_auth_result_t refuse(char *why, size_t why_len, const char *fmt, const uint8_t *bytes, size_t have)
{
    char hex[3 * 8 + 1] = "";
    for (size_t i = 0; i < have && i < 8; i++) snprintf(hex + 3 * i, 4, "%02x ", bytes[i]);
    snprintf(why, why_len, fmt, hex);
    return TP_AUTH_REFUSED;
}

tp_auth_result_t tp_auth_accept_step(tp_auth_accept_t *st, int fd, const uint8_t key[TP_JOB_KEY_BYTES],
                                     tp_conn_kind_t expect_kind, char *why, size_t why_len)
{
    size_t want = st->state == AUTH_WANT_HELLO ? HELLO_BYTES : PROOF_BYTES;
    while (st->have < want) {
        ssize_t n = recv(fd, st->buf + st->have, want - st->have, MSG_DONTWAIT);
        if (n == 0) {
            snprintf(why, why_len, "closed during the handshake%s",
                     st->state == AUTH_WANT_PROOF ? " (it does not know this job's key: another job?)" : "");
            return TP_AUTH_REFUSED;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return TP_AUTH_MORE;
            snprintf(why, why_len, "read failed during the handshake: %s", strerror(errno));
            return TP_AUTH_REFUSED;
        }
        st->have += (size_t)n;
        /* Garbage is refused as soon as its first word shows it, without waiting for a whole hello. */
        if (st->have >= 4 && tp_get_le32(st->buf) != (st->state == AUTH_WANT_HELLO ? MAGIC_HELLO : MAGIC_PROOF))
            return refuse(why, why_len, "not the tp protocol (first bytes %s)", st->buf, st->have);
    }
    if (st->state == AUTH_WANT_HELLO) {
        if (tp_get_le16(st->buf + 4) != AUTH_VERSION) {
            snprintf(why, why_len, "protocol version %u, expected %u", tp_get_le16(st->buf + 4), AUTH_VERSION);
            return TP_AUTH_REFUSED;
        }
        st->kind = (tp_conn_kind_t)tp_get_le16(st->buf + 6);
        if (st->kind != expect_kind) {
            snprintf(why, why_len, "a connection of kind %d on a listener of kind %d", (int)st->kind, (int)expect_kind);
            return TP_AUTH_REFUSED;
        }
        st->rank = (int)tp_get_le32(st->buf + 8);
        memcpy(st->client_nonce, st->buf + 16, 16);
        if (tp_random_bytes(st->server_nonce, 16) != TP_OK) {
            snprintf(why, why_len, "no random bytes for a challenge");
            return TP_AUTH_REFUSED;
        }
        uint8_t chal[CHALLENGE_BYTES] = {0};
        tp_put_le32(chal, MAGIC_CHALLENGE);
        tp_put_le16(chal + 4, AUTH_VERSION);
        tp_put_le16(chal + 6, (uint16_t)st->kind);
        memcpy(chal + 16, st->server_nonce, 16);
        auth_mac(key, 'S', st->kind, st->rank, st->client_nonce, st->server_nonce, chal + 32);
        if (tp_wire_write(fd, chal, sizeof(chal), tp_now_ns() + 1000000000) != TP_OK) {
            snprintf(why, why_len, "could not send the challenge");
            return TP_AUTH_REFUSED;
        }
        st->state = AUTH_WANT_PROOF;
        st->have = 0;
        return tp_auth_accept_step(st, fd, key, expect_kind, why, why_len);
    }
    uint8_t mac[16];
    auth_mac(key, 'C', st->kind, st->rank, st->server_nonce, st->client_nonce, mac);
    if (!mac_equal(mac, st->buf + 16)) {
        snprintf(why, why_len, "claims rank %d but does not know this job's key (another job?)", st->rank);
        return TP_AUTH_REFUSED;
    }
    return TP_AUTH_DONE;
}
