/* runtime_wire.c: SipHash, whole-buffer socket I/O with deadlines, message framing, TCP helpers. */
#include "runtime_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

int64_t tp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- SipHash-2-4 ---- */

#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                                       \
    do {                                                                                                               \
        v0 += v1; v1 = ROTL64(v1, 13); v1 ^= v0; v0 = ROTL64(v0, 32);                                                 \
        v2 += v3; v3 = ROTL64(v3, 16); v3 ^= v2;                                                                       \
        v0 += v3; v3 = ROTL64(v3, 21); v3 ^= v0;                                                                       \
        v2 += v1; v1 = ROTL64(v1, 17); v1 ^= v2; v2 = ROTL64(v2, 32);                                                  \
    } while (0)

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void siphash(const uint8_t key[16], const void *data, size_t len, uint8_t *out, size_t out_len)
{
    const uint8_t *in = data;
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    if (out_len == 16) v1 ^= 0xee;
    size_t blocks = len / 8;
    for (size_t i = 0; i < blocks; i++) {
        uint64_t m = load_le64(in + 8 * i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++) b |= (uint64_t)in[8 * blocks + i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= out_len == 16 ? 0xee : 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    store_le64(out, v0 ^ v1 ^ v2 ^ v3);
    if (out_len != 16) return;
    v1 ^= 0xdd;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    store_le64(out + 8, v0 ^ v1 ^ v2 ^ v3);
}

void tp_siphash128(const uint8_t key[16], const void *data, size_t len, uint8_t out[16])
{
    siphash(key, data, len, out, 16);
}

void tp_siphash64(const uint8_t key[16], const void *data, size_t len, uint8_t out[8])
{
    siphash(key, data, len, out, 8);
}

tp_status_t tp_random_bytes(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            tp_log(TP_LOG_ERROR, "wire", "getrandom failed: %s", strerror(errno));
            return TP_ERR_SYSTEM;
        }
        p += n;
        len -= (size_t)n;
    }
    return TP_OK;
}

/* ---- whole-buffer I/O ---- */

#define WIRE_ABANDON_CHECK_NS 50000000LL

int tp_wire_wait(int fd, short events, int64_t deadline_ns, int (*abandoned)(void *ctx), void *ctx)
{
    for (;;) {
        if (abandoned != NULL && abandoned(ctx)) return -2;
        int64_t left = deadline_ns - tp_now_ns();
        if (left <= 0) return 0;
        if (abandoned != NULL && left > WIRE_ABANDON_CHECK_NS) left = WIRE_ABANDON_CHECK_NS;
        struct pollfd p = {.fd = fd, .events = events};
        int ms = (int)((left + 999999) / 1000000);
        int r = poll(&p, 1, ms);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

tp_status_t tp_wire_write(int fd, const void *buf, size_t len, int64_t deadline_ns)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = tp_wire_wait(fd, POLLOUT, deadline_ns, NULL, NULL);
            if (w == 0) return TP_ERR_BOOTSTRAP;
            if (w < 0) return TP_ERR_SYSTEM;
            continue;
        }
        return TP_ERR_PEER_FAILED;
    }
    return TP_OK;
}

tp_status_t tp_wire_read(int fd, void *buf, size_t len, int64_t deadline_ns)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) return TP_ERR_PEER_FAILED;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = tp_wire_wait(fd, POLLIN, deadline_ns, NULL, NULL);
            if (w == 0) return TP_ERR_BOOTSTRAP;
            if (w < 0) return TP_ERR_SYSTEM;
            continue;
        }
        return TP_ERR_PEER_FAILED;
    }
    return TP_OK;
}

tp_status_t tp_wire_send_msg(int fd, tp_msg_type_t type, const void *payload, size_t len, int64_t deadline_ns)
{
    tp_msg_header_t h = {.magic = TP_WIRE_MAGIC, .type = (uint16_t)type, .length = (uint32_t)len};
    if (len == 0) return tp_wire_write(fd, &h, sizeof(h), deadline_ns);
    struct iovec iov[2] = {{.iov_base = &h, .iov_len = sizeof(h)}, {.iov_base = (void *)payload, .iov_len = len}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return TP_ERR_PEER_FAILED;
        n = 0;
    }
    size_t sent = (size_t)n;
    if (sent < sizeof(h)) {
        tp_status_t s = tp_wire_write(fd, (char *)&h + sent, sizeof(h) - sent, deadline_ns);
        if (s != TP_OK) return s;
        sent = sizeof(h);
    }
    return tp_wire_write(fd, (const char *)payload + (sent - sizeof(h)), len - (sent - sizeof(h)), deadline_ns);
}

/* ---- incremental message reader ---- */

void tp_msg_reader_init(tp_msg_reader_t *r, size_t max_payload)
{
    memset(r, 0, sizeof(*r));
    r->max_payload = max_payload;
}

void tp_msg_reader_reset(tp_msg_reader_t *r) { r->have = 0; }

void tp_msg_reader_free(tp_msg_reader_t *r)
{
    free(r->payload);
    r->payload = NULL;
    r->capacity = 0;
}

char *tp_msg_reader_take(tp_msg_reader_t *r)
{
    char *p = r->payload;
    r->payload = NULL;
    r->capacity = 0;
    r->have = 0;
    return p;
}

tp_read_result_t tp_msg_reader_step(tp_msg_reader_t *r, int fd, char *why, size_t why_len)
{
    for (;;) {
        void *dst;
        size_t want;
        if (r->have < sizeof(r->header)) {
            dst = (char *)&r->header + r->have;
            want = sizeof(r->header) - r->have;
        } else {
            size_t got = r->have - sizeof(r->header);
            if (got == r->header.length) {
                r->payload[got] = '\0';
                return TP_READ_MSG;
            }
            dst = r->payload + got;
            want = r->header.length - got;
        }
        ssize_t n = recv(fd, dst, want, MSG_DONTWAIT);
        if (n == 0) return TP_READ_EOF;
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return TP_READ_MORE;
            if (errno == ECONNRESET) return TP_READ_EOF;
            snprintf(why, why_len, "read failed: %s", strerror(errno));
            return TP_READ_ERROR;
        }
        r->have += (size_t)n;
        if (r->have == sizeof(r->header)) {
            if (r->header.magic != TP_WIRE_MAGIC || r->header.type < TP_MSG_RECORD ||
                r->header.type > TP_MSG_STOP) {
                snprintf(why, why_len, "bad message header (magic %08x, type %u)", r->header.magic,
                         r->header.type);
                return TP_READ_ERROR;
            }
            if (r->header.length > r->max_payload) {
                snprintf(why, why_len, "message of %u bytes exceeds the limit of %zu", r->header.length,
                         r->max_payload);
                return TP_READ_ERROR;
            }
            if (r->capacity < (size_t)r->header.length + 1) {
                char *p = realloc(r->payload, (size_t)r->header.length + 1);
                if (p == NULL) {
                    snprintf(why, why_len, "out of memory for a %u-byte message", r->header.length);
                    return TP_READ_ERROR;
                }
                r->payload = p;
                r->capacity = (size_t)r->header.length + 1;
            }
        }
    }
}

/* ---- TCP helpers ---- */

void tp_fd_set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

tp_status_t tp_tcp_connect(const char *host, int port, int64_t deadline_ns, int *fd_out, char *why, size_t why_len)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    int rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0) {
        snprintf(why, why_len, "cannot resolve \"%s\": %s", host, gai_strerror(rc));
        return TP_ERR_INVALID;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        snprintf(why, why_len, "socket: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc != 0 && errno != EINPROGRESS) {
        snprintf(why, why_len, "%s", strerror(errno));
        close(fd);
        return TP_ERR_PEER_FAILED;
    }
    if (rc != 0) {
        int w = tp_wire_wait(fd, POLLOUT, deadline_ns, NULL, NULL);
        int err = 0;
        socklen_t elen = sizeof(err);
        if (w <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
            snprintf(why, why_len, "%s", w == 0 ? "timed out" : strerror(err ? err : errno));
            close(fd);
            return w == 0 ? TP_ERR_BOOTSTRAP : TP_ERR_PEER_FAILED;
        }
    }
    set_nodelay(fd);
    *fd_out = fd;
    return TP_OK;
}

tp_status_t tp_tcp_listen(const char *host, int port, int backlog, int *fd_out, char *why, size_t why_len)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (host == NULL || host[0] == '\0') {
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        int rc = getaddrinfo(host, NULL, &hints, &ai);
        if (rc != 0) {
            snprintf(why, why_len, "cannot resolve \"%s\": %s", host, gai_strerror(rc));
            return TP_ERR_INVALID;
        }
        sa.sin_addr = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
        freeaddrinfo(ai);
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, why_len, "socket: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, backlog) != 0) {
        snprintf(why, why_len, "cannot listen on %s:%d: %s", host ? host : "*", port, strerror(errno));
        close(fd);
        return TP_ERR_SYSTEM;
    }
    *fd_out = fd;
    return TP_OK;
}

int tp_socket_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sin_family != AF_INET) return -1;
    return ntohs(sa.sin_port);
}

void tp_socket_local_ip(int fd, char *out, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    out[0] = '\0';
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET)
        inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)len);
}

void tp_sockaddr_string(int fd, int peer_side, char *out, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int rc = peer_side ? getpeername(fd, (struct sockaddr *)&sa, &sl) : getsockname(fd, (struct sockaddr *)&sa, &sl);
    char ip[INET_ADDRSTRLEN] = "?";
    if (rc != 0 || sa.sin_family != AF_INET) {
        snprintf(out, len, "?");
        return;
    }
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
    snprintf(out, len, "%s:%d", ip, ntohs(sa.sin_port));
}

void tp_wire_send_fail(int fd, const tp_failure_t *f, tp_status_t status)
{
    char buf[TP_FAIL_MSG_MAX];
    int n = snprintf(buf, sizeof(buf), "%d\n%d\n%s\n%d\n%s", f->rank, (int)f->pid, f->host, (int)status, f->reason);
    if (n >= (int)sizeof(buf)) n = (int)sizeof(buf) - 1;
    tp_wire_send_msg(fd, TP_MSG_FAIL, buf, (size_t)n, tp_now_ns() + 100000000);
}

int tp_wire_parse_fail(char *payload, int world_size, int *rank, tp_status_t *status, char **reason)
{
    char *save = NULL;
    char *rank_s = strtok_r(payload, "\n", &save);
    strtok_r(NULL, "\n", &save); /* pid and host: the receiver knows them from its records */
    strtok_r(NULL, "\n", &save);
    char *status_s = strtok_r(NULL, "\n", &save);
    *reason = strtok_r(NULL, "", &save);
    *rank = rank_s ? atoi(rank_s) : -2;
    if (*rank < -1 || *rank >= world_size || *reason == NULL) return -1;
    *status = (tp_status_t)atoi(status_s);
    return 0;
}
