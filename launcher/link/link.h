/* link/link.h: the channel between tprun and an agent, as both ends use it: messages are lines (framing), what the
 * peer cannot take yet waits in a queue written when its input has room (flow control), and each message goes to
 * the owner registered for its first letter (dispatch: the stdin forwarder, PMIx, the backend itself). */
#ifndef TPRUN_LINK_H
#define TPRUN_LINK_H

#include <stddef.h>

#include "core/loop.h"

/* First line of the plan tprun sends an agent: a tprun of another version is refused by name. */
#define TPRUN_AGENT_HELLO "tprun-agent 1"
/* Largest plan an agent reads: the program's arguments and -x values, escaped, fit well below it. */
#define TPRUN_AGENT_PLAN_MAX (64 << 20)
/* Owners a link dispatches to, besides its default. */
#define TPRUN_LINK_ROUTES 8

/* One message: its line without the newline, NUL-terminated (len excludes both). Returns 1 when it took it. */
typedef int (*tprun_link_fn)(void *arg, char *msg, size_t len);

typedef struct tprun_link {
    tprun_evloop_t *ev;
    const char *peer; /* who is at the other end, for messages */
    int out_fd;       /* -1 once closed */
    char *pending;    /* bytes not yet written to out_fd */
    size_t pending_len, pending_off;
    tprun_ev_t *writable_ev; /* out_fd waits for room */
    struct {
        char type;
        tprun_link_fn fn;
        void *arg;
    } routes[TPRUN_LINK_ROUTES];
    int nroutes;
} tprun_link_t;

void tprun_link_init(tprun_link_t *k, tprun_evloop_t *ev, const char *peer, int out_fd);
/* Takes bytes (malloc'd, a whole number of lines) as the first to go; written as out_fd has room. */
void tprun_link_queue(tprun_link_t *k, char *bytes, size_t len);
/* Queues one message line and writes what the channel takes now; the rest goes when it is writable. */
void tprun_link_send(tprun_link_t *k, const char *line);
/* Whether bytes are still waiting for room. */
int tprun_link_pending(const tprun_link_t *k);
/* Closes the output: the peer reads its end (an agent then ends its ranks). */
void tprun_link_close(tprun_link_t *k);
/* Frees what is still queued. */
void tprun_link_free(tprun_link_t *k);
/* Messages starting with type go to fn(arg, ...); a later route for the same type replaces it. */
int tprun_link_route(tprun_link_t *k, char type, tprun_link_fn fn, void *arg);
/* One received line (newline included, as the channel's stream gives it): to its owner; 0 when none took it (the
 * line is then NUL-terminated in place of its newline, for the caller's own handling). */
int tprun_link_dispatch(tprun_link_t *k, char *line, size_t len);

#endif
