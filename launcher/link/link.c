/* link/link.c: tprun's channel to an agent: line framing, a write queue drained on EPOLLOUT, dispatch by type. */
#include "link/link.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "runtime_log.h"

void tprun_link_init(tprun_link_t *k, tprun_evloop_t *ev, const char *peer, int out_fd)
{
    memset(k, 0, sizeof(*k));
    k->ev = ev;
    k->peer = peer;
    k->out_fd = out_fd;
}

/* Writes what is pending; 1 when all of it went (or the peer is gone, and with it what was queued). */
static int flush(tprun_link_t *k)
{
    while (k->pending != NULL && k->pending_off < k->pending_len) {
        ssize_t n = write(k->out_fd, k->pending + k->pending_off, k->pending_len - k->pending_off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return 0;
        if (n < 0) {
            /* EPIPE: the agent is gone; the channel's end says why. */
            tp_log(TP_LOG_DEBUG, "ssh", "host %s: cannot write to the agent: %s", k->peer, strerror(errno));
            break;
        }
        k->pending_off += (size_t)n;
    }
    free(k->pending);
    k->pending = NULL;
    return 1;
}

static void on_writable(void *arg, unsigned revents)
{
    tprun_link_t *k = arg;
    (void)revents;
    if (!flush(k) && k->out_fd >= 0) return;
    tprun_ev_remove(k->writable_ev);
    k->writable_ev = NULL;
}

static void want_writable(tprun_link_t *k)
{
    if (k->writable_ev != NULL || k->out_fd < 0 || k->pending == NULL) return;
    k->writable_ev = tprun_ev_fd(k->ev, k->out_fd, EPOLLOUT, 0, on_writable, k);
}

void tprun_link_queue(tprun_link_t *k, char *bytes, size_t len)
{
    free(k->pending);
    k->pending = bytes;
    k->pending_len = len;
    k->pending_off = 0;
    want_writable(k);
}

void tprun_link_send(tprun_link_t *k, const char *line)
{
    if (k->out_fd < 0) return;
    size_t len = strlen(line);
    size_t held = k->pending != NULL ? k->pending_len - k->pending_off : 0;
    if (held == 0) {
        free(k->pending);
        k->pending = NULL;
    } else if (k->pending_off > 0) { /* what is still to go moves to the front before the buffer is resized */
        memmove(k->pending, k->pending + k->pending_off, held);
    }
    char *grown = realloc(k->pending, held + len);
    if (grown == NULL) {
        tp_log(TP_LOG_ERROR, "ssh", "host %s: out of memory queueing a message; ending its connection", k->peer);
        k->pending_len = held, k->pending_off = 0;
        tprun_link_close(k);
        return;
    }
    memcpy(grown + held, line, len);
    k->pending = grown;
    k->pending_len = held + len;
    k->pending_off = 0;
    if (flush(k) || k->out_fd < 0) return;
    want_writable(k);
}

int tprun_link_pending(const tprun_link_t *k) { return k->pending != NULL; }

void tprun_link_close(tprun_link_t *k)
{
    tprun_ev_remove(k->writable_ev);
    k->writable_ev = NULL;
    if (k->out_fd >= 0) close(k->out_fd);
    k->out_fd = -1;
}

void tprun_link_free(tprun_link_t *k)
{
    free(k->pending);
    k->pending = NULL;
}

int tprun_link_route(tprun_link_t *k, char type, tprun_link_fn fn, void *arg)
{
    int i = 0;
    while (i < k->nroutes && k->routes[i].type != type) i++;
    if (i == TPRUN_LINK_ROUTES) return -1;
    k->routes[i].type = type;
    k->routes[i].fn = fn;
    k->routes[i].arg = arg;
    if (i == k->nroutes) k->nroutes++;
    return 0;
}

int tprun_link_dispatch(tprun_link_t *k, char *line, size_t len)
{
    if (len == 0) return 0;
    line[len - 1] = '\0';
    for (int i = 0; i < k->nroutes; i++)
        if (k->routes[i].type == line[0] && k->routes[i].fn(k->routes[i].arg, line, len - 1)) return 1;
    return 0;
}
