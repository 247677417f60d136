/* tcp_connect.c: the listener, the full mesh (each rank dials lower ranks, accepts higher ones) and close. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp.h"

#define TCP_PENDING_EXTRA 64           /* handshakes held beyond one per connection still expected */
#define TCP_REPORT_NS     2000000000LL /* refused connections are summed up this often while the mesh forms */
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

/* Non-blocking, no Nagle, socket buffers: ready for the data path, in one direction. */
static tp_status_t conn_ready(tcp_state_t *st, int peer, int fd, int is_send)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, TCP_CONGESTION_ALGO, sizeof(TCP_CONGESTION_ALGO) - 1) != 0)
        tp_log(TP_LOG_DEBUG, "tcp", "congestion control %s refused (%s): the kernel's default stays",
               TCP_CONGESTION_ALGO, strerror(errno));
#if TCP_SOCKBUF > 0
    int sb = TCP_SOCKBUF;
    setsockopt(fd, SOL_SOCKET, is_send ? SO_SNDBUF : SO_RCVBUF, &sb, sizeof(sb));
#endif
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    tcp_conn_t *c = &st->conns[peer];
    if (is_send) {
        c->sfd = fd;
        return TP_OK;
    }
    c->rx = malloc(TCP_RX_BYTES);
    if (c->rx == NULL) return TP_ERR_NO_MEMORY;
    c->fd = fd;
    return TP_OK;
}

/* Tells the runtime where a connection to peer runs (each end's "ip:port"); the dialing and accepting threads
 * both call it, one at a time. */
static void report_connected(tcp_state_t *st, int peer, int fd)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    char local[96], remote[96];
    if (st->env.connected == NULL) return;
    tp_sockaddr_string(fd, 0, local, sizeof(local));
    tp_sockaddr_string(fd, 1, remote, sizeof(remote));
    pthread_mutex_lock(&lock);
    st->env.connected(st->env.connected_ctx, peer, local, remote);
    pthread_mutex_unlock(&lock);
}

/* One TCP connect to address by until (ns); the fd, or -1 with why set. */
static int connect_one(const char *address, int64_t until, char *why, size_t why_len)
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
        int64_t left = (until - tp_now_ns()) / 1000000;
        if (poll(&p, 1, left > 0 ? (int)left : 0) != 1) {
            snprintf(why, why_len, "no answer within %.1f s", (double)(until - start) / 1e9);
            close(fd);
            return -1;
        }
        socklen_t el = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    }
    if (err != 0) {
        snprintf(why, why_len, "%s", strerror(err));
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * Dials a lower rank for one direction, on each of its candidate addresses in turn (every one but the last gets
 * at most TCP_ATTEMPT_NS): the claimed rank says which direction (rank: this rank sends on it; rank + size: this
 * rank reads it).
 */
static tp_status_t dial(tcp_state_t *st, int peer, const char *addresses, int64_t deadline, int is_send)
{
    char list[TCP_CANDIDATES_MAX][96], why[TCP_CANDIDATES_MAX][128], name[160];
    int n = 0;
again:
    n = 0;
    for (const char *a = addresses; a != NULL && *a != '\0' && n < TCP_CANDIDATES_MAX; n++) {
        size_t l = strcspn(a, ",");
        snprintf(list[n], sizeof(list[n]), "%.*s", (int)(l < 95 ? l : 95), a);
        a = a[l] == ',' ? a + l + 1 : NULL;
    }
    int first = st->conns[peer].first_candidate < n ? st->conns[peer].first_candidate : 0, fd = -1, i;
    for (i = first; i < n && fd < 0; i++) {
        int64_t until = deadline;
        if (i + 1 < n && until - tp_now_ns() > TCP_ATTEMPT_NS) until = tp_now_ns() + TCP_ATTEMPT_NS;
        fd = connect_one(list[i], until, why[i], sizeof(why[i]));
        if (fd < 0 && tp_now_ns() >= deadline) {
            i++;
            break;
        }
    }
    if (fd < 0) {
        char all[600] = "";
        size_t o = 0;
        for (int k = first; k < i && o < sizeof(all) - 1; k++)
            o += (size_t)snprintf(all + o, sizeof(all) - o, "%s%s: %s", k ? "; " : "", list[k], why[k]);
        tp_log(TP_LOG_ERROR, "tcp", "rank %d: cannot connect (boot timeout %.0f s): %s", peer,
               st->env.connect_timeout_s, n > 0 ? all : "no address");
        return TP_ERR_BOOTSTRAP;
    }
    st->conns[peer].first_candidate = i - 1;
    if (i - 1 > first) /* i - 1 is the address that worked: the ones tried before it did not */
        for (int k = first; k < i - 1; k++)
            tp_log(TP_LOG_WARN, "tcp", "rank %d: %s did not connect (%s); using %s", peer, list[k], why[k],
                   list[i - 1]);
    snprintf(name, sizeof(name), "rank %d (tcp %.95s)", peer, list[i - 1]);
    tp_status_t s =
        tp_auth_connect(fd, st->job_key, TP_CONN_TCP, st->env.rank + (is_send ? 0 : st->size), deadline, name);
    if (s == TP_ERR_PEER_FAILED && tp_now_ns() < deadline) {
        /* closed in the handshake: a listener drops what has not proved the key in time (this rank was slow) */
        struct timespec pace = {0, 10000000}; /* retry pacing, not synchronization */
        close(fd);
        tp_log(TP_LOG_DEBUG, "tcp", "%s closed the connection in the handshake; dialing again", name);
        nanosleep(&pace, NULL);
        goto again;
    }
    if (s != TP_OK) {
        close(fd);
        return s;
    }
    report_connected(st, peer, fd);
    return conn_ready(st, peer, fd, is_send);
}

typedef struct pending {
    int fd;
    tp_auth_accept_t auth;
} pending_t;

static void drop_pending(pending_t *p, int *n, int i)
{
    close(p[i].fd);
    p[i] = p[--*n];
}

/* One authenticated client: keeps it if it claims a direction of a rank we still wait for, else refuses it by name. */
static tp_status_t admit(tcp_state_t *st, const int *use, int fd, int claim, int *missing, tp_refusals_t *refused)
{
    char from[96];
    tp_sockaddr_string(fd, 1, from, sizeof(from));
    int reads = claim >= st->size && claim < 2 * st->size; /* the dialer reads it: this rank sends on it */
    int rank = reads ? claim - st->size : claim;
    int known = rank >= 0 && rank < st->size, taken = known && (reads ? st->conns[rank].sfd : st->conns[rank].fd) >= 0;
    if (rank <= st->env.rank || rank >= st->size || !use[rank] || taken) {
        tp_refusals_note(refused, TP_REFUSED_BAD, from, "refused a connection from %s claiming rank %d: %s", from, rank,
                         taken ? "that rank is already connected" : "not a rank that dials this one");
        close(fd);
        return TP_OK;
    }
    report_connected(st, rank, fd);
    tp_status_t s = conn_ready(st, rank, fd, reads);
    if (s == TP_OK) (*missing)--;
    return s;
}

/* Drops the handshakes past their deadline; returns the earliest deadline of the others (INT64_MAX when none). */
static int64_t expire_pending(pending_t *pend, int *npend, tp_refusals_t *refused)
{
    int64_t now = tp_now_ns(), next = INT64_MAX;
    for (int i = *npend - 1; i >= 0; i--) {
        if (!tp_auth_accept_expired(&pend[i].auth, now, &next)) continue;
        char from[96];
        tp_sockaddr_string(pend[i].fd, 1, from, sizeof(from));
        tp_refusals_note(refused, TP_REFUSED_LATE, from, "%s", "");
        drop_pending(pend, npend, i);
    }
    return next;
}

/* Accepts the higher ranks' connections until all are in, the deadline, or stop_fd becomes readable (the dials
 * failed: the job is over and the failure already named). Handshakes in flight have room for every connection
 * still expected and TCP_PENDING_EXTRA strays; beyond that, connections wait in the kernel's queue until a stray
 * passes its deadline, so a real peer mid-handshake never gives way. */
static tp_status_t accept_higher(tcp_state_t *st, const int *use, int64_t deadline, int stop_fd)
{
    int missing = 0;
    for (int r = st->env.rank + 1; r < st->size; r++)
        missing += use[r] ? (st->conns[r].fd < 0) + (st->conns[r].sfd < 0) : 0;
    int cap = missing + TCP_PENDING_EXTRA, npend = 0;
    pending_t *pend = malloc((size_t)cap * sizeof(*pend));
    struct pollfd *pfd = malloc(((size_t)cap + 2) * sizeof(*pfd));
    tp_refusals_t refused = {.subsys = "tcp"};
    int64_t next_report = tp_now_ns() + TCP_REPORT_NS;
    tp_status_t s = pend == NULL || pfd == NULL ? TP_ERR_NO_MEMORY : TP_OK;
    while (missing > 0 && s == TP_OK) {
        int64_t now = tp_now_ns(), left = (deadline - now) / 1000000;
        if (left <= 0) {
            char list[256] = "";
            size_t off = 0;
            for (int r = st->env.rank + 1; r < st->size && off < sizeof(list) - 12; r++)
                if (use[r] && (st->conns[r].fd < 0 || st->conns[r].sfd < 0))
                    off += (size_t)snprintf(list + off, sizeof(list) - off, " %d", r);
            tp_log(TP_LOG_ERROR, "tcp", "ranks%s did not connect within the %.0f s boot timeout", list,
                   st->env.connect_timeout_s);
            s = TP_ERR_BOOTSTRAP;
            break;
        }
        if (now >= next_report) {
            tp_refusals_report(&refused);
            next_report = now + TCP_REPORT_NS;
        }
        int64_t expiry = expire_pending(pend, &npend, &refused), wait_ms = left > 1000 ? 1000 : left;
        if (expiry != INT64_MAX && (expiry - now + 999999) / 1000000 < wait_ms)
            wait_ms = (expiry - now + 999999) / 1000000;
        int room = npend < missing + TCP_PENDING_EXTRA;
        pfd[0] = (struct pollfd){.fd = room ? st->listen_fd : -1, .events = POLLIN};
        for (int i = 0; i < npend; i++) pfd[i + 1] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
        pfd[npend + 1] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
        int n = poll(pfd, (nfds_t)npend + 2, wait_ms > 0 ? (int)wait_ms : 0);
        if (pfd[npend + 1].revents) {
            s = TP_ERR_BOOTSTRAP;
            break;
        }
        if (n < 0 && errno != EINTR) {
            s = TP_ERR_SYSTEM;
            break;
        }
        for (int i = npend - 1; i >= 0 && s == TP_OK; i--) {
            if (pfd[i + 1].revents == 0) continue;
            char why[160];
            tp_auth_result_t r =
                tp_auth_accept_step(&pend[i].auth, pend[i].fd, st->job_key, TP_CONN_TCP, why, sizeof(why));
            if (r == TP_AUTH_MORE) continue;
            int fd = pend[i].fd, rank = pend[i].auth.rank;
            pend[i] = pend[--npend];
            if (r == TP_AUTH_REFUSED) {
                char from[96];
                tp_sockaddr_string(fd, 1, from, sizeof(from));
                tp_refusals_note(&refused, TP_REFUSED_BAD, from, "refused a connection from %s: %s", from, why);
                close(fd);
                continue;
            }
            s = admit(st, use, fd, rank, &missing, &refused);
        }
        if (s == TP_OK && (pfd[0].revents & POLLIN) && npend < cap) {
            int fd = accept4(st->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) continue;
            pend[npend].fd = fd;
            tp_auth_accept_init(&pend[npend].auth);
            npend++;
        }
    }
    while (npend > 0) { /* strays still in their handshake: the mesh no longer needs anyone */
        char from[96];
        tp_sockaddr_string(pend[npend - 1].fd, 1, from, sizeof(from));
        tp_refusals_note(&refused, TP_REFUSED_STRAY, from,
                         "refused a connection from %s: still in the handshake when the mesh was complete", from);
        drop_pending(pend, &npend, npend - 1);
    }
    tp_refusals_report(&refused);
    free(pend);
    free(pfd);
    return s;
}

typedef struct accept_job {
    tcp_state_t *st;
    const int *use;
    int64_t deadline;
    int stop_fd;
    tp_status_t result;
} accept_job_t;

static void *accept_main(void *arg)
{
    accept_job_t *j = arg;
    j->result = accept_higher(j->st, j->use, j->deadline, j->stop_fd);
    return NULL;
}

/*
 * Dials the lower ranks while a thread accepts the higher ones: a rank that accepted only after its own dials
 * made each rank wait for every lower rank's dials in turn, so the mesh took time quadratic in the ranks (64 ranks:
 * 0.67 s on 16 cores). The two sides touch disjoint peers' entries; connected is called under a lock.
 */
static tp_status_t tcp_connect_mesh(void *state, const int *use, const char *const *addresses)
{
    tcp_state_t *st = state;
    tp_status_t s = TP_OK;
    int64_t deadline = tp_now_ns() + (int64_t)(st->env.connect_timeout_s * 1e9);
    int higher = 0;
    for (int r = st->env.rank + 1; r < st->size; r++) higher |= use[r];
    accept_job_t job = {
        .st = st, .use = use, .deadline = deadline, .stop_fd = eventfd(0, EFD_CLOEXEC), .result = TP_OK};
    pthread_t thread;
    int threaded = higher && job.stop_fd >= 0 && pthread_create(&thread, NULL, accept_main, &job) == 0;
    if (higher && !threaded) { /* no thread: accept after the dials, as before */
        for (int r = 0; r < st->env.rank && s == TP_OK; r++)
            for (int is_send = 1; is_send >= 0 && s == TP_OK; is_send--)
                if (use[r]) s = dial(st, r, addresses[r], deadline, is_send);
        if (s == TP_OK) s = accept_higher(st, use, deadline, job.stop_fd);
    } else {
        for (int r = 0; r < st->env.rank && s == TP_OK; r++)
            for (int is_send = 1; is_send >= 0 && s == TP_OK; is_send--)
                if (use[r]) s = dial(st, r, addresses[r], deadline, is_send);
    }
    if (threaded) {
        uint64_t one = 1;
        if (s != TP_OK && write(job.stop_fd, &one, sizeof(one)) < 0) { /* the thread then ends at its deadline */
        }
        pthread_join(thread, NULL);
        if (s == TP_OK) s = job.result;
    }
    if (job.stop_fd >= 0) close(job.stop_fd);
    if (s != TP_OK) return s;
    close(st->listen_fd); /* the mesh is complete: later connections are strays */
    st->listen_fd = -1;
    return TP_OK;
}

/* The peers the runtime chose this transport for, each with the addresses to dial (best first). */
static tp_status_t tcp_connect(void *state, const tp_transport_peer_t *peers)
{
    tcp_state_t *st = state;
    int *use = calloc((size_t)st->size, sizeof(int));
    const char **dial = calloc((size_t)st->size, sizeof(char *));
    tp_status_t s = use == NULL || dial == NULL ? TP_ERR_NO_MEMORY : TP_OK;
    for (int p = 0; s == TP_OK && p < st->size; p++) {
        use[p] = peers[p].use;
        dial[p] = peers[p].use && peers[p].dial != NULL ? peers[p].dial : "";
    }
    if (s == TP_OK) s = tcp_connect_mesh(st, use, dial);
    free(use);
    free(dial);
    return s;
}

static void tcp_close(void *state)
{
    tcp_state_t *st = state;
    if (st == NULL) return;
    for (int r = 0; st->conns != NULL && r < st->size; r++) {
        if (st->conns[r].fd >= 0) close(st->conns[r].fd);
        if (st->conns[r].sfd >= 0) close(st->conns[r].sfd);
        free(st->conns[r].rx);
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
        st->conns[r].fd = st->conns[r].sfd = -1;
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
