/* tcp_connect.c: the listener, connections (each rank dials lower ranks, admits higher ones; on demand or all at
 * once) and close. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp.h"

/* A peer's address that is not its last candidate gets at most this long to connect before the next is tried. */
#define TCP_ATTEMPT_NS     2000000000LL
#define TCP_CANDIDATES_MAX 8

static tp_status_t tcp_open(const tp_transport_env_t *env, void **state, char *address, size_t address_len)
{
    tcp_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) return TP_ERR_NO_MEMORY;
    st->env = *env;
    memcpy(st->job_key, env->job_key, TP_JOB_KEY_BYTES);
    st->env.job_key = st->job_key;
    int loopback = env->on_loopback; /* a job on loopback keeps its listeners there */
    snprintf(st->advertise_ip, sizeof(st->advertise_ip), "%s",
             loopback || env->ip == NULL || env->ip[0] == '\0' ? "127.0.0.1" : env->ip);
    st->env.ip = st->advertise_ip;
    st->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (st->listen_fd < 0) goto err_sys;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
    /* The kernel's queue holds a burst of every higher rank's two connections and the strays beside them. */
    int backlog = 2 * env->size + TCP_PENDING_EXTRA;
    if (bind(st->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(st->listen_fd, backlog) != 0)
        goto err_sys;
    socklen_t sl = sizeof(sa);
    if (getsockname(st->listen_fd, (struct sockaddr *)&sa, &sl) != 0) goto err_sys;
    snprintf(address, address_len, "%s:%d", st->advertise_ip, ntohs(sa.sin_port));
    tp_log(TP_LOG_DEBUG, "tcp", "listening for peers on %s", address);
    *state = st;
    return TP_OK;
err_sys:
    tp_log(TP_LOG_ERROR, "tcp", "cannot open a listening socket: %s", strerror(errno));
    if (st->listen_fd >= 0) close(st->listen_fd);
    free(st);
    return TP_ERR_SYSTEM;
}

/* The first "ip:port" of address (a comma-separated list of candidates, best first). */
static int parse_address(const char *address, struct sockaddr_in *sa)
{
    char ip[64], first[96];
    if (address == NULL) return -1;
    size_t flen = strcspn(address, ",");
    if (flen >= sizeof(first)) return -1;
    memcpy(first, address, flen);
    first[flen] = '\0';
    address = first;
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof(ip)) return -1;
    memcpy(ip, address, (size_t)(colon - address));
    ip[colon - address] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535) return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

/* Reaches any peer that published an "ip:port": the fallback, below every transport that reaches fewer. */
static int tcp_reach(void *state, const tp_peer_view_t *peer)
{
    struct sockaddr_in sa;
    return peer->address != NULL && parse_address(peer->address, &sa) == 0 ? TCP_REACH_PRIORITY : TP_REACH_NO;
}

static void tcp_caps(void *state, tp_transport_caps_t *caps)
{
    *caps = (tp_transport_caps_t){.mem_types = 1u << TP_MEM_HOST, .flags = TP_TRANSPORT_IP_ENDPOINTS};
}

/* Whether both ends of fd are this host (one address, or loopback): the round trip is microseconds, where bbr fails. */
static int within_host(int fd)
{
    struct sockaddr_in me, them;
    socklen_t a = sizeof(me), b = sizeof(them);
    if (getsockname(fd, (struct sockaddr *)&me, &a) != 0 || getpeername(fd, (struct sockaddr *)&them, &b) != 0 ||
        me.sin_family != AF_INET || them.sin_family != AF_INET)
        return 0;
    return me.sin_addr.s_addr == them.sin_addr.s_addr || (ntohl(them.sin_addr.s_addr) >> 24) == 127;
}

/* Non-blocking, no Nagle, socket buffers: ready for the data path (read too when it carries small calls in). */
static tp_status_t conn_ready(tcp_state_t *st, int peer, int fd, int is_send)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (within_host(fd) &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, TCP_CONGESTION_ALGO, sizeof(TCP_CONGESTION_ALGO) - 1) != 0)
        tp_log(TP_LOG_DEBUG, "tcp", "congestion control %s refused (%s): the kernel's default stays",
               TCP_CONGESTION_ALGO, strerror(errno));
#if TCP_SOCKBUF > 0
    int sb = TCP_SOCKBUF;
    setsockopt(fd, SOL_SOCKET, is_send ? SO_SNDBUF : SO_RCVBUF, &sb, sizeof(sb));
#endif
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    tcp_conn_t *c = &st->conns[peer];
    tcp_sock_t *k = is_send ? &c->out : &c->in;
    k->rx_cap = is_send ? TCP_RX_SHARED : TCP_RX_BYTES;
    if ((!is_send || st->env.rank < peer) && (k->rx = malloc(k->rx_cap)) == NULL) return TP_ERR_NO_MEMORY;
    k->fd = fd;
    return TP_OK;
}

/* Tells the runtime where a connection to peer runs (each end's "ip:port"); the dialing and accepting threads
 * both call it, one at a time. */
static void report_connected(tcp_state_t *st, int peer, int fd)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    char local[96], remote[96];
    tp_sockaddr_string(fd, 0, local, sizeof(local));
    tp_sockaddr_string(fd, 1, remote, sizeof(remote));
    tp_log(TP_LOG_DEBUG, "tcp", "rank %d: connected (%s here, %s there)", peer, local, remote);
    if (st->env.connected == NULL) return;
    pthread_mutex_lock(&lock);
    st->env.connected(st->env.connected_ctx, peer, local, remote);
    pthread_mutex_unlock(&lock);
}

/* The job failed (fate's verdict) while this rank waits to connect for a call: it stops waiting. */
static int abandoned(const tcp_state_t *st)
{
    return st->env.abandoned != NULL && st->env.abandoned(st->env.abandoned_ctx);
}

/* How long one poll of a connection in the making may sleep: to until, and 50 ms at most while abandoned may say so. */
static int wait_slice_ms(const tcp_state_t *st, int64_t until)
{
    int64_t left = (until - tp_now_ns() + 999999) / 1000000, most = st->env.abandoned != NULL ? 50 : 1000;
    return left <= 0 ? 0 : (int)(left < most ? left : most);
}

/* One TCP connect to address by until (ns); the fd, or -1 with why set and *refused when nothing listens there. */
static int connect_one(const tcp_state_t *st, const char *address, int64_t until, char *why, size_t why_len,
                       int *refused)
{
    struct sockaddr_in sa;
    if (parse_address(address, &sa) != 0) {
        snprintf(why, why_len, "cannot parse the address");
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, why_len, "socket: %s", strerror(errno));
        return -1;
    }
    int err = 0;
    int64_t start = tp_now_ns();
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        err = errno;
    } else {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        while (poll(&p, 1, wait_slice_ms(st, until)) != 1) {
            if (tp_now_ns() < until && !abandoned(st)) continue;
            snprintf(why, why_len, "no answer within %.1f s", (double)(tp_now_ns() - start) / 1e9);
            close(fd);
            return -1;
        }
        socklen_t el = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    }
    if (err != 0) {
        snprintf(why, why_len, "%s", strerror(err));
        *refused = err == ECONNREFUSED;
        close(fd);
        return -1;
    }
    return fd;
}

/* Waits by deadline for the listener's admission byte: a connection it dropped or refused after the handshake is
 * closed instead, and the dialer must not take it for a connection. 1 admitted, 0 closed, -1 no answer in time. */
static int await_admission(const tcp_state_t *st, int fd, int64_t deadline)
{
    for (;;) {
        char b;
        ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
        if (n == 1) return b == TCP_ADMITTED;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 0;
        if (tp_now_ns() >= deadline || abandoned(st)) return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, wait_slice_ms(st, deadline));
    }
}

/*
 * Dials a lower rank for one direction, on each of its candidate addresses in turn (every one but the last gets
 * at most TCP_ATTEMPT_NS): the claimed rank says which direction (rank: this rank sends on it; rank + size: this
 * rank reads it). A connection the listener closes before admitting it (it held this rank's handshake past its
 * deadline) is dialed again. Nothing listening is the peer's end: reported to fate, which names it.
 */
static tp_status_t dial(tcp_state_t *st, int peer, const char *addresses, int64_t deadline, int is_send)
{
    char list[TCP_CANDIDATES_MAX][96], why[TCP_CANDIDATES_MAX][128], name[160];
    int n = 0, dropped = 0, refused = 0;
again:
    n = 0;
    for (const char *a = addresses; a != NULL && *a != '\0' && n < TCP_CANDIDATES_MAX; n++) {
        size_t l = strcspn(a, ",");
        snprintf(list[n], sizeof(list[n]), "%.*s", (int)(l < 95 ? l : 95), a);
        a = a[l] == ',' ? a + l + 1 : NULL;
    }
    int first = st->conns[peer].first_candidate < n ? st->conns[peer].first_candidate : 0, fd = -1, i, nrefused = 0;
    for (i = first; i < n && fd < 0; i++) {
        int64_t until = deadline;
        if (i + 1 < n && until - tp_now_ns() > TCP_ATTEMPT_NS) until = tp_now_ns() + TCP_ATTEMPT_NS;
        refused = 0;
        fd = connect_one(st, list[i], until, why[i], sizeof(why[i]), &refused);
        nrefused += fd < 0 && refused;
        if (fd < 0 && (tp_now_ns() >= deadline || abandoned(st))) {
            i++;
            break;
        }
    }
    if (fd < 0 && abandoned(st)) return TP_ERR_PEER_FAILED; /* fate named the failure already */
    if (fd < 0 && n > 0 && nrefused == i - first) {         /* every address refused: the peer's listener is gone */
        char reason[200];
        snprintf(reason, sizeof(reason), "refused the tcp connection at %s (nothing listens: the process ended)",
                 list[i - 1]);
        tp_log(TP_LOG_DEBUG, "tcp", "rank %d %s", peer, reason);
        tcp_conn_fail(st, &st->conns[peer], TP_ERR_PEER_FAILED, reason);
        return TP_ERR_PEER_FAILED;
    }
    if (fd < 0) {
        char all[600] = "";
        size_t o = 0;
        for (int k = first; k < i && o < sizeof(all) - 1; k++)
            o += (size_t)snprintf(all + o, sizeof(all) - o, "%s%s: %s", k ? "; " : "", list[k], why[k]);
        tp_log(TP_LOG_ERROR, "tcp", "rank %d: cannot connect within %.0f s (TP_BOOT_TIMEOUT): %s%s", peer,
               st->env.connect_timeout_s, n > 0 ? all : "no address",
               dropped ? " (after its listener closed this rank's handshake)" : "");
        return TP_ERR_BOOTSTRAP;
    }
    st->conns[peer].first_candidate = i - 1;
    if (i - 1 > first) /* i - 1 is the address that worked: the ones tried before it did not */
        for (int k = first; k < i - 1; k++)
            tp_log(TP_LOG_WARN, "tcp", "rank %d: %s did not connect (%s); using %s", peer, list[k], why[k],
                   list[i - 1]);
    snprintf(name, sizeof(name), "rank %d (tcp %.95s)", peer, list[i - 1]);
    tp_status_t s = tp_auth_connect_or_abandon(fd, st->job_key, TP_CONN_TCP, st->env.rank + (is_send ? 0 : st->size),
                                               deadline, name, st->env.abandoned, st->env.abandoned_ctx);
    int admitted = s == TP_OK ? await_admission(st, fd, deadline) : 0, closed = s == TP_ERR_PEER_FAILED;
    if ((s != TP_OK || admitted <= 0) && abandoned(st)) { /* fate named the failure already */
        close(fd);
        return TP_ERR_PEER_FAILED;
    }
    const char *what = NULL;
    if (s == TP_OK && admitted == 0) what = "closed the connection after the handshake instead of admitting it";
    else if (s == TP_OK && admitted < 0) what = "did not admit the connection after the handshake";
    else if (closed) what = "closed the connection in the handshake";
    else if (s == TP_ERR_BOOTSTRAP) what = "did not answer the handshake";
    closed |= s == TP_OK && admitted == 0;
    if (closed && tp_now_ns() < deadline) {
        /* the listener drops what has not proved the key in time (this rank was slow): dial again */
        struct timespec pace = {0, 10000000}; /* retry pacing, not synchronization */
        close(fd);
        dropped++;
        tp_log(TP_LOG_DEBUG, "tcp", "%s %s; dialing again", name, what);
        nanosleep(&pace, NULL);
        goto again;
    }
    if (what != NULL) { /* a protocol error was logged by the handshake, naming the peer */
        char after[96] = "";
        if (dropped > 0)
            snprintf(after, sizeof(after), " (after %d connections closed in or after the handshake)", dropped);
        tp_log(TP_LOG_ERROR, "tcp", "%s %s by the %.0f s deadline (TP_BOOT_TIMEOUT)%s", name, what,
               st->env.connect_timeout_s, after);
        s = TP_ERR_BOOTSTRAP;
    }
    if (s != TP_OK) {
        close(fd);
        return s;
    }
    report_connected(st, peer, fd);
    return conn_ready(st, peer, fd, is_send);
}

/* What the acceptor admitted since the last call; no system call when it admitted nothing (every progress asks). */
int tcp_links_take(tcp_state_t *st)
{
    tcp_links_t *l = st->links;
    admitted_t got[64];
    int took = 0, n;
    if (l == NULL || atomic_load(&l->signals) == l->drained) return 0;
    uint64_t v; /* drained before the take: an admission after it leaves the fd set, so a wait wakes for it */
    if (read(l->ready_fd, &v, sizeof(v)) == sizeof(v)) l->drained += v;
    do {
        pthread_mutex_lock(&l->lock);
        n = l->nready < 64 ? l->nready : 64;
        memcpy(got, l->ready + l->nready - n, (size_t)n * sizeof(*got));
        l->nready -= n;
        pthread_mutex_unlock(&l->lock);
        for (int i = 0; i < n; i++) {
            report_connected(st, got[i].rank, got[i].fd);
            if (conn_ready(st, got[i].rank, got[i].fd, got[i].reads) != TP_OK) close(got[i].fd);
        }
        took += n;
    } while (n > 0);
    return took;
}

int tcp_links_event_fd(const tcp_state_t *st)
{
    return st->links != NULL && st->links->running ? st->links->ready_fd : -1;
}

/* The lower of the two dials: a higher rank dials, so the two ends never race to connect one pair. */
tp_status_t tcp_links_need(tcp_state_t *st, int peer)
{
    tcp_links_t *l = st->links;
    tcp_conn_t *c = &st->conns[peer];
    if (l == NULL || !l->use[peer]) return TP_ERR_INVALID;
    if (peer > st->env.rank) { /* it dials this rank when it first needs it; its admission wakes the wait */
        if (l->error[0] != '\0' && (c->in.fd < 0 || c->out.fd < 0)) {
            tp_log(TP_LOG_ERROR, "tcp", "rank %d cannot connect to this rank: %s", peer, l->error);
            return TP_ERR_SYSTEM;
        }
        return TP_OK;
    }
    if (c->send_broken != TP_OK) return c->send_broken;
    int64_t deadline = tp_now_ns() + (int64_t)(st->env.connect_timeout_s * 1e9);
    tp_status_t s = TP_OK;
    if (c->out.fd < 0) s = dial(st, peer, l->dial[peer], deadline, 1);
    if (s == TP_OK && c->in.fd < 0) s = dial(st, peer, l->dial[peer], deadline, 0);
    return s;
}

/* Eager: the higher ranks' connections, all in by the deadline; a rank that cannot come is named with why. */
static tp_status_t wait_higher(tcp_state_t *st, int64_t deadline)
{
    tcp_links_t *l = st->links;
    for (;;) {
        tcp_links_take(st);
        int missing[64], nmissing = 0, total = 0;
        for (int r = st->env.rank + 1; r < st->size; r++)
            if (l->use[r] && (st->conns[r].in.fd < 0 || st->conns[r].out.fd < 0)) {
                if (nmissing < 64) missing[nmissing++] = r;
                total++;
            }
        if (total == 0) return TP_OK;
        if (abandoned(st)) return TP_ERR_PEER_FAILED; /* fate named the failure (a rank whose tp_init failed) */
        int64_t left = (deadline - tp_now_ns()) / 1000000;
        if (left <= 0 || l->error[0] != '\0') {
            char list[400] = "";
            for (int i = 0, o = 0; i < nmissing && o < (int)sizeof(list) - 12; i++)
                o += snprintf(list + o, sizeof(list) - (size_t)o, "%s%d", i ? " " : "", missing[i]);
            if (l->error[0] != '\0')
                tp_log(TP_LOG_ERROR, "tcp", "cannot admit rank%s %s%s: %s", total > 1 ? "s" : "", list,
                       total > nmissing ? " and more" : "", l->error);
            else
                tp_log(TP_LOG_ERROR, "tcp",
                       "rank%s %s%s did not connect within the %.0f s boot timeout (%d of %d directions missing; each "
                       "such rank names its own failure, and fate the first)",
                       total > 1 ? "s" : "", list, total > nmissing ? " and more" : "", st->env.connect_timeout_s,
                       total, st->size);
            return TP_ERR_BOOTSTRAP;
        }
        struct pollfd p = {.fd = l->ready_fd, .events = POLLIN};
        poll(&p, 1, wait_slice_ms(st, deadline));
    }
}

/*
 * The peers the runtime chose this transport for, each with the addresses to dial (best first). A thread admits
 * the higher ranks' connections; on demand (lazy) it runs until close and each lower rank is dialed on first use,
 * eagerly this rank dials every lower rank now and waits for every higher one, then the listener closes.
 */
static tp_status_t tcp_connect(void *state, const tp_transport_peer_t *peers)
{
    tcp_state_t *st = state;
    tcp_links_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return TP_ERR_NO_MEMORY;
    st->links = l;
    l->lazy = st->env.connect_lazy;
    l->stop_fd = eventfd(0, EFD_CLOEXEC);
    l->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    l->use = calloc((size_t)st->size, sizeof(int));
    l->dial = calloc((size_t)st->size, sizeof(char *));
    l->taken = calloc((size_t)st->size, 1);
    l->ready = calloc(2 * (size_t)st->size, sizeof(admitted_t));
    pthread_mutex_init(&l->lock, NULL);
    if (l->stop_fd < 0 || l->ready_fd < 0 || !l->use || !l->dial || !l->taken || !l->ready) goto err_sys;
    int higher = 0;
    for (int p = 0; p < st->size; p++) {
        l->use[p] = peers[p].use;
        higher |= p > st->env.rank && l->use[p];
        if (l->use[p] && (l->dial[p] = strdup(peers[p].dial != NULL ? peers[p].dial : "")) == NULL) goto err_sys;
    }
    if (higher && tcp_acceptor_start(st) != TP_OK) goto err_sys;
    if (l->lazy) return TP_OK;
    int64_t deadline = tp_now_ns() + (int64_t)(st->env.connect_timeout_s * 1e9);
    tp_status_t s = TP_OK;
    for (int r = 0; r < st->env.rank && s == TP_OK; r++)
        if (l->use[r]) s = tcp_links_need(st, r);
    if (s == TP_OK && higher) s = wait_higher(st, deadline);
    tcp_acceptor_stop(st); /* the mesh is complete (or failed): later connections are strays */
    return s;
err_sys:
    tp_log(TP_LOG_ERROR, "tcp", "cannot prepare connections to %d peers: %s", st->size - 1, strerror(errno));
    return TP_ERR_SYSTEM;
}

static void tcp_close(void *state)
{
    tcp_state_t *st = state;
    if (st == NULL) return;
    for (int r = 0; st->conns != NULL && r < st->size; r++) {
        tcp_conn_t *c = &st->conns[r];
        if (c->in.fd >= 0) close(c->in.fd);
        if (c->out.fd >= 0) close(c->out.fd);
        free(c->in.rx);
        free(c->out.rx);
    }
    tcp_links_t *l = st->links;
    tcp_acceptor_stop(st);
    if (l != NULL) {
        for (int r = 0; l->dial != NULL && r < st->size; r++) free(l->dial[r]);
        for (int i = 0; i < l->nready; i++) close(l->ready[i].fd);
        if (l->stop_fd >= 0) close(l->stop_fd);
        if (l->ready_fd >= 0) close(l->ready_fd);
        pthread_mutex_destroy(&l->lock);
        free(l->use);
        free(l->dial);
        free(l->taken);
        free(l->ready);
        free(l);
    }
    if (st->listen_fd >= 0) close(st->listen_fd);
    free(st->conns);
    free(st);
}

/* The per-peer tables are sized when the world size is known. */
static tp_status_t tcp_open_sized(const tp_transport_env_t *env, void **state, char *address, size_t len)
{
    tp_status_t s = tcp_open(env, state, address, len);
    if (s != TP_OK) return s;
    tcp_state_t *st = *state;
    st->size = env->size;
    st->conns = calloc((size_t)env->size, sizeof(*st->conns));
    if (st->conns == NULL) {
        tcp_close(st);
        *state = NULL;
        return TP_ERR_NO_MEMORY;
    }
    for (int r = 0; r < env->size; r++) {
        st->conns[r].in.fd = st->conns[r].out.fd = -1;
        st->conns[r].peer = r;
    }
    return TP_OK;
}

const tp_transport_ops_t tp_tcp_ops = {
    .abi_version = TP_TRANSPORT_ABI,
    .ops_size = sizeof(tp_transport_ops_t),
    .name = "tcp",
    .open = tcp_open_sized,
    .caps = tcp_caps,
    .reach = tcp_reach,
    .pair_info = tp_transport_unsupported_pair_info, /* the published "ip:port" is all a peer needs */
    .connect = tcp_connect,
    .post = tcp_post,
    .progress = tcp_progress,
    .event_fds = tcp_event_fds,
    .cancel = tcp_cancel,
    .mem_register = tp_transport_unsupported_register,
    .mem_deregister = tp_transport_unsupported_deregister,
    .close = tcp_close,
};
