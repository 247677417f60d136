/* runtime_pairs.c: every rank sends rank 0 its per-pair connection data; rank 0 hands each rank what is its. */
#include "runtime_pairs.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_log.h"
#include "runtime_wire.h"

#define BLOB_HEAD 13 /* from, to, name length, and data length: u32, u32, u8, u32 (little-endian) */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int tp_pairs_append(uint8_t **buf, size_t *len, size_t *cap, const tp_pair_blob_t *b)
{
    size_t name = strlen(b->transport), need = *len + BLOB_HEAD + name + b->len;
    if (need > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < need) c *= 2;
        uint8_t *nb = realloc(*buf, c);
        if (nb == NULL) return -1;
        *buf = nb;
        *cap = c;
    }
    uint8_t *p = *buf + *len;
    put_u32(p, (uint32_t)b->from);
    put_u32(p + 4, (uint32_t)b->to);
    p[8] = (uint8_t)name;
    memcpy(p + 9, b->transport, name);
    put_u32(p + 9 + name, b->len);
    if (b->len > 0) memcpy(p + BLOB_HEAD + name, b->data, b->len);
    *len = need;
    return 0;
}

tp_status_t tp_pairs_parse(const uint8_t *buf, size_t len, int size, tp_pair_blob_t **out, int *n, char *why,
                           size_t why_len)
{
    tp_pair_blob_t *v = NULL;
    int count = 0, cap = 0;
    for (size_t off = 0; off < len;) {
        if (len - off < BLOB_HEAD) goto short_;
        uint32_t from = get_u32(buf + off), to = get_u32(buf + off + 4);
        size_t name = buf[off + 8];
        if (len - off < BLOB_HEAD + name) goto short_;
        uint32_t dlen = get_u32(buf + off + 9 + name);
        if (from >= (uint32_t)size || to >= (uint32_t)size || name == 0 || name >= sizeof(v->transport) ||
            dlen > TP_TRANSPORT_PAIR_MAX) {
            snprintf(why, why_len, "connection data %u -> %u (name of %zu bytes, %u bytes of data) is out of range",
                     from, to, name, dlen);
            goto bad;
        }
        if (len - off - BLOB_HEAD - name < dlen) goto short_;
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            tp_pair_blob_t *nv = realloc(v, (size_t)cap * sizeof(*v));
            if (nv == NULL) {
                snprintf(why, why_len, "out of memory");
                goto bad;
            }
            v = nv;
        }
        tp_pair_blob_t *b = &v[count++];
        b->from = (int)from;
        b->to = (int)to;
        memcpy(b->transport, buf + off + 9, name);
        b->transport[name] = '\0';
        b->len = dlen;
        b->data = buf + off + BLOB_HEAD + name;
        off += BLOB_HEAD + name + dlen;
    }
    *out = v;
    *n = count;
    return TP_OK;
short_:
    snprintf(why, why_len, "connection data ends inside an entry");
bad:
    free(v);
    return TP_ERR_PROTOCOL;
}

static size_t max_payload(int size)
{
    size_t m = (size_t)size * (TP_TRANSPORT_PAIR_MAX + BLOB_HEAD + 32);
    return m < TP_WIRE_MAX_PAYLOAD ? m : TP_WIRE_MAX_PAYLOAD;
}

/* Sends every checked-in rank the same error: they fail with rank 0's message. */
static void root_fail_all(tp_world_t *w, tp_status_t s, const char *msg)
{
    char buf[1100];
    int n = snprintf(buf, sizeof(buf), "%d\n%s", (int)s, msg);
    if (n >= (int)sizeof(buf)) n = (int)sizeof(buf) - 1;
    tp_log(TP_LOG_ERROR, "boot", "%s", msg);
    for (int r = 1; r < w->size; r++)
        if (w->fate_fds[r] >= 0)
            tp_wire_send_msg(w->fate_fds[r], TP_MSG_ERROR, buf, (size_t)n, tp_now_ns() + 1000000000);
}

/* Rank 0: reads every other rank's message into msgs[r] (payload and length). */
static tp_status_t root_gather(tp_world_t *w, tp_msg_reader_t *rd, char *msg, size_t msg_len)
{
    int left = w->size - 1;
    struct pollfd *pfd = calloc((size_t)w->size, sizeof(*pfd));
    int *done = calloc((size_t)w->size, sizeof(int));
    tp_status_t s = pfd == NULL || done == NULL ? TP_ERR_NO_MEMORY : TP_OK;
    int64_t deadline = tp_now_ns() + (int64_t)(w->boot_timeout_s * 1e9);
    while (s == TP_OK && left > 0) {
        int64_t now = tp_now_ns();
        if (now >= deadline) {
            snprintf(msg, msg_len, "connection exchange timed out after %g s: %d rank%s sent nothing",
                     w->boot_timeout_s, left, left > 1 ? "s" : "");
            s = TP_ERR_BOOTSTRAP;
            break;
        }
        for (int r = 1; r < w->size; r++)
            pfd[r] = (struct pollfd){.fd = done[r] ? -1 : w->fate_fds[r], .events = POLLIN};
        if (poll(pfd + 1, (nfds_t)w->size - 1, (int)((deadline - now + 999999) / 1000000)) < 0 && errno != EINTR) {
            snprintf(msg, msg_len, "connection exchange: poll failed: %s", strerror(errno));
            s = TP_ERR_SYSTEM;
        }
        for (int r = 1; r < w->size && s == TP_OK; r++) {
            if (done[r] || pfd[r].revents == 0) continue;
            char why[256];
            tp_read_result_t rr = tp_msg_reader_step(&rd[r], w->fate_fds[r], why, sizeof(why));
            if (rr == TP_READ_MORE) continue;
            if (rr == TP_READ_MSG && rd[r].header.type == TP_MSG_PAIRS) {
                done[r] = 1;
                left--;
                continue;
            }
            snprintf(msg, msg_len, "rank %d (host %s, pid %d) %s during the connection exchange", r, w->peers[r].host,
                     (int)w->peers[r].pid,
                     rr == TP_READ_EOF ? "closed its connection (it failed; its own message says why)"
                                       : "broke the protocol");
            s = TP_ERR_BOOTSTRAP;
        }
    }
    free(pfd);
    free(done);
    return s;
}

/* Rank 0: gathers, checks each blob's sender, and sends each rank the blobs addressed to it. */
static tp_status_t root_exchange(tp_world_t *w, const uint8_t *mine, size_t mine_len, uint8_t **out, size_t *out_len)
{
    tp_msg_reader_t *rd = calloc((size_t)w->size, sizeof(*rd));
    tp_pair_blob_t **blobs = calloc((size_t)w->size, sizeof(*blobs));
    int *nb = calloc((size_t)w->size, sizeof(int));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    char msg[1024] = "", why[256];
    tp_status_t s = rd == NULL || blobs == NULL || nb == NULL ? TP_ERR_NO_MEMORY : TP_OK;
    for (int r = 1; s == TP_OK && r < w->size; r++) tp_msg_reader_init(&rd[r], max_payload(w->size));
    if (s == TP_OK) s = root_gather(w, rd, msg, sizeof(msg));
    for (int r = 0; s == TP_OK && r < w->size; r++) {
        const uint8_t *p = r == 0 ? mine : (const uint8_t *)rd[r].payload;
        size_t l = r == 0 ? mine_len : rd[r].header.length;
        if (tp_pairs_parse(p, l, w->size, &blobs[r], &nb[r], why, sizeof(why)) != TP_OK) {
            snprintf(msg, sizeof(msg), "rank %d (host %s) sent bad connection data: %s", r, w->peers[r].host, why);
            s = TP_ERR_PROTOCOL;
        }
        for (int i = 0; s == TP_OK && i < nb[r]; i++)
            if (blobs[r][i].from != r) {
                snprintf(msg, sizeof(msg), "rank %d (host %s) sent connection data as rank %d", r, w->peers[r].host,
                         blobs[r][i].from);
                s = TP_ERR_PROTOCOL;
            }
    }
    int64_t deadline = tp_now_ns() + (int64_t)(w->boot_timeout_s * 1e9);
    for (int d = 0; s == TP_OK && d < w->size; d++) { /* one message per addressee, in sender order */
        len = 0;
        for (int r = 0; r < w->size && s == TP_OK; r++)
            for (int i = 0; i < nb[r] && s == TP_OK; i++)
                if (blobs[r][i].to == d && tp_pairs_append(&buf, &len, &cap, &blobs[r][i]) != 0) s = TP_ERR_NO_MEMORY;
        if (s != TP_OK) break;
        if (d == 0) {
            *out = malloc(len ? len : 1);
            if (*out == NULL) s = TP_ERR_NO_MEMORY;
            else {
                if (len > 0) memcpy(*out, buf, len); /* buf stays NULL while nothing was appended */
                *out_len = len;
            }
        } else if (tp_wire_send_msg(w->fate_fds[d], TP_MSG_PAIRS, buf, len, deadline) != TP_OK) {
            snprintf(msg, sizeof(msg), "rank %d (host %s) closed its connection before its connection data reached it",
                     d, w->peers[d].host);
            s = TP_ERR_PEER_FAILED;
        }
    }
    if (s != TP_OK) {
        if (msg[0] == '\0') snprintf(msg, sizeof(msg), "connection exchange: %s", tp_status_string(s));
        root_fail_all(w, s, msg);
    }
    for (int r = 0; r < w->size; r++) {
        if (rd != NULL) tp_msg_reader_free(&rd[r]);
        if (blobs != NULL) free(blobs[r]);
    }
    free(rd);
    free(blobs);
    free(nb);
    free(buf);
    return s;
}

/* Any other rank: sends its blobs to rank 0 and waits for the ones addressed to it. */
static tp_status_t join_exchange(tp_world_t *w, const uint8_t *mine, size_t mine_len, uint8_t **out, size_t *out_len)
{
    int64_t deadline = tp_now_ns() + (int64_t)(w->boot_timeout_s * 1e9) + 5000000000LL; /* rank 0 fails first */
    if (tp_wire_send_msg(w->boot_fd, TP_MSG_PAIRS, mine, mine_len, deadline) != TP_OK) {
        tp_log(TP_LOG_ERROR, "boot", "rank 0 closed the bootstrap connection during the connection exchange");
        return TP_ERR_BOOTSTRAP;
    }
    tp_msg_reader_t rd;
    tp_msg_reader_init(&rd, max_payload(w->size));
    char why[256];
    tp_status_t s = TP_OK;
    for (;;) {
        tp_read_result_t r = tp_msg_reader_step(&rd, w->boot_fd, why, sizeof(why));
        int64_t now = tp_now_ns();
        if (r == TP_READ_MORE && now < deadline) {
            struct pollfd p = {.fd = w->boot_fd, .events = POLLIN};
            poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
            continue;
        }
        if (r == TP_READ_MSG && rd.header.type == TP_MSG_PAIRS) {
            *out = (uint8_t *)rd.payload; /* handed over: not freed below */
            *out_len = rd.header.length;
            return TP_OK;
        }
        if (r == TP_READ_MSG && rd.header.type == TP_MSG_ERROR) {
            char *nl = strchr(rd.payload, '\n');
            tp_log(TP_LOG_ERROR, "boot", "%s", nl ? nl + 1 : rd.payload);
            s = TP_ERR_BOOTSTRAP;
        } else if (r == TP_READ_MORE) {
            tp_log(TP_LOG_ERROR, "boot", "connection exchange timed out: rank 0 sent nothing within %g s",
                   w->boot_timeout_s + 5);
            s = TP_ERR_BOOTSTRAP;
        } else if (r == TP_READ_EOF) {
            tp_log(TP_LOG_ERROR, "boot",
                   "rank 0 closed the bootstrap connection during the connection exchange "
                   "(rank 0 failed; its own message says why)");
            s = TP_ERR_BOOTSTRAP;
        } else {
            tp_log(TP_LOG_ERROR, "boot", "bad message from rank 0 in the connection exchange: %s",
                   r == TP_READ_ERROR ? why : "not connection data");
            s = TP_ERR_PROTOCOL;
        }
        break;
    }
    tp_msg_reader_free(&rd);
    return s;
}

tp_status_t tp_pairs_exchange(tp_world_t *w, const uint8_t *mine, size_t mine_len, uint8_t **msg, tp_pair_blob_t **in,
                              int *nin)
{
    uint8_t *got = NULL;
    size_t got_len = 0;
    char why[256];
    tp_status_t s = w->rank == 0 ? root_exchange(w, mine, mine_len, &got, &got_len)
                                 : join_exchange(w, mine, mine_len, &got, &got_len);
    if (s != TP_OK) return s;
    if (tp_pairs_parse(got, got_len, w->size, in, nin, why, sizeof(why)) != TP_OK) {
        tp_log(TP_LOG_ERROR, "boot", "bad connection data from rank 0: %s", why);
        free(got);
        return TP_ERR_PROTOCOL;
    }
    for (int i = 0; i < *nin; i++)
        if ((*in)[i].to != w->rank) {
            tp_log(TP_LOG_ERROR, "boot", "rank 0 sent this rank connection data meant for rank %d", (*in)[i].to);
            free(*in);
            free(got);
            return TP_ERR_PROTOCOL;
        }
    *msg = got;
    return TP_OK;
}
