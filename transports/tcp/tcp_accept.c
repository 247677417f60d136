/* tcp_accept.c: the acceptor, a thread that admits higher ranks' connections for as long as the transport may need
 * them (on demand: until close; eagerly: until the mesh is complete). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

#define TCP_REPORT_NS 2000000000LL /* refused connections are summed up this often while the mesh forms */

typedef struct pending {
    int fd;
    tp_auth_accept_t auth;
} pending_t;

/* Wakes the data path: the count first, so a reader that sees it unchanged knows the fd holds nothing new. */
static void signal_ready(tcp_links_t *l)
{
    uint64_t one = 1;
    atomic_fetch_add(&l->signals, 1);
    if (write(l->ready_fd, &one, sizeof(one)) < 0) { /* the counter is already set */
    }
}

static void drop_pending(pending_t *p, int *n, int i)
{
    close(p[i].fd);
    p[i] = p[--*n];
}

/* One authenticated client: admits it if it claims a direction of a higher rank not yet admitted, else refuses it. */
static void admit(tcp_state_t *st, int fd, int claim, tp_refusals_t *refused)
{
    tcp_links_t *l = st->links;
    char from[96];
    tp_sockaddr_string(fd, 1, from, sizeof(from));
    int reads = claim >= st->size && claim < 2 * st->size; /* the dialer reads it: this rank sends on it */
    int rank = reads ? claim - st->size : claim, bit = reads ? 2 : 1;
    int taken = rank >= 0 && rank < st->size && (l->taken[rank] & bit);
    if (rank <= st->env.rank || rank >= st->size || !l->use[rank] || taken) {
        tp_refusals_note(refused, TP_REFUSED_BAD, from, "refused a connection from %s claiming rank %d: %s", from, rank,
                         taken ? "that rank is already connected" : "not a rank that dials this one");
        close(fd);
        return;
    }
    char ok = TCP_ADMITTED;
    if (send(fd, &ok, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) { /* it left already: it dials again if it lives */
        close(fd);
        return;
    }
    l->taken[rank] |= (uint8_t)bit;
    pthread_mutex_lock(&l->lock);
    l->ready[l->nready++] = (admitted_t){.rank = rank, .reads = reads, .fd = fd};
    pthread_mutex_unlock(&l->lock);
    signal_ready(l);
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

/*
 * Admits the higher ranks' connections until stop_fd becomes readable. Handshakes in flight have room for every
 * higher rank's two connections and TCP_PENDING_EXTRA strays; beyond that, connections wait in the kernel's queue
 * until a stray passes its deadline, so a real peer mid-handshake never gives way. What arrived is read before
 * deadlines are checked: a rank whose proof waits in the socket while this thread did not run is not dropped.
 */
static void *acceptor_main(void *arg)
{
    tcp_state_t *st = arg;
    tcp_links_t *l = st->links;
    int higher = 0;
    for (int r = st->env.rank + 1; r < st->size; r++) higher += l->use[r];
    int cap = 2 * higher + TCP_PENDING_EXTRA, npend = 0;
    pending_t *pend = malloc((size_t)cap * sizeof(*pend));
    struct pollfd *pfd = malloc(((size_t)cap + 2) * sizeof(*pfd));
    tp_refusals_t refused = {.subsys = "tcp"};
    int64_t next_report = tp_now_ns() + TCP_REPORT_NS, next_expiry = INT64_MAX;
    if (pend == NULL || pfd == NULL) {
        snprintf(l->error, sizeof(l->error), "out of memory for %d connections' handshakes", cap);
        goto out;
    }
    for (;;) {
        int64_t now = tp_now_ns(), wait_ms = 1000;
        if (now >= next_report) {
            tp_refusals_report(&refused);
            next_report = now + TCP_REPORT_NS;
        }
        if (next_expiry != INT64_MAX && (next_expiry - now + 999999) / 1000000 < wait_ms)
            wait_ms = (next_expiry - now + 999999) / 1000000;
        pfd[0] = (struct pollfd){.fd = npend < cap ? st->listen_fd : -1, .events = POLLIN};
        for (int i = 0; i < npend; i++) pfd[i + 1] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
        pfd[npend + 1] = (struct pollfd){.fd = l->stop_fd, .events = POLLIN};
        int n = poll(pfd, (nfds_t)npend + 2, wait_ms > 0 ? (int)wait_ms : 0);
        if (pfd[npend + 1].revents) break;
        if (n < 0 && errno != EINTR) {
            snprintf(l->error, sizeof(l->error), "poll on the listener failed: %s", strerror(errno));
            break;
        }
        for (int i = npend - 1; i >= 0; i--) {
            if (pfd[i + 1].revents == 0) continue;
            char why[160];
            tp_auth_result_t r =
                tp_auth_accept_step(&pend[i].auth, pend[i].fd, st->job_key, TP_CONN_TCP, why, sizeof(why));
            if (r == TP_AUTH_MORE) continue;
            int fd = pend[i].fd, rank = pend[i].auth.rank;
            pend[i] = pend[--npend];
            if (r == TP_AUTH_DONE) {
                admit(st, fd, rank, &refused);
                continue;
            }
            char from[96];
            tp_sockaddr_string(fd, 1, from, sizeof(from));
            tp_refusals_note(&refused, TP_REFUSED_BAD, from, "refused a connection from %s: %s", from, why);
            close(fd);
        }
        next_expiry = expire_pending(pend, &npend, &refused);
        if ((pfd[0].revents & POLLIN) && npend < cap) {
            int fd = accept4(st->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) continue;
            pend[npend].fd = fd;
            tp_auth_accept_init(&pend[npend].auth);
            if (pend[npend].auth.deadline_ns < next_expiry) next_expiry = pend[npend].auth.deadline_ns;
            npend++;
        }
    }
    while (npend > 0) { /* strays still in their handshake: the transport no longer needs anyone */
        char from[96];
        tp_sockaddr_string(pend[npend - 1].fd, 1, from, sizeof(from));
        tp_refusals_note(&refused, TP_REFUSED_STRAY, from,
                         "refused a connection from %s: still in the handshake when the mesh was complete", from);
        drop_pending(pend, &npend, npend - 1);
    }
    tp_refusals_report(&refused);
out:
    free(pend);
    free(pfd);
    if (l->error[0] != '\0') signal_ready(l); /* a rank waiting for this one's admission then fails by name */
    return NULL;
}

tp_status_t tcp_acceptor_start(tcp_state_t *st)
{
    if (pthread_create(&st->links->thread, NULL, acceptor_main, st) != 0) return TP_ERR_SYSTEM;
    st->links->running = 1;
    return TP_OK;
}

/* Stops the acceptor and closes the listener: later connections are refused by the kernel. */
void tcp_acceptor_stop(tcp_state_t *st)
{
    tcp_links_t *l = st->links;
    if (l == NULL || !l->running) return;
    uint64_t one = 1;
    if (write(l->stop_fd, &one, sizeof(one)) < 0) { /* already set */
    }
    pthread_join(l->thread, NULL);
    l->running = 0;
    close(st->listen_fd);
    st->listen_fd = -1;
}
