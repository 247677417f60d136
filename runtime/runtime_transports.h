/* runtime_transports.h: the ordered transport array, TP_TRANSPORTS filtering and per-peer selection. */
#ifndef RUNTIME_TRANSPORTS_H
#define RUNTIME_TRANSPORTS_H

#include "runtime_world.h"

#define TP_TRANSPORTS_MAX 8

/* The built-in transports' names, in order of preference (at most max of them); returns how many exist. */
int tp_transports_names(const char **names, int max);

/*
 * Parses a TP_TRANSPORTS value against the known names: "" keeps all in array order, "a,b" keeps those in that
 * order, "^a" drops a. Writes indices into order; unknown names are listed in unknown (comma-separated).
 */
int tp_transports_parse(const char *spec, const char *const *names, int n, int *order, char *unknown,
                        size_t unknown_len);

/* Which of n transports reaches a peer, given each one's reach priority: the highest wins, the earlier of equal
 * ones (TP_TRANSPORTS order); -1 when none can. */
int tp_transports_pick(const int *priority, int n);

/* The lifecycle (runtime_init.c): open before the bootstrap, select once the table is in, exchange the per-pair
 * data while the bootstrap sockets are still the runtime's, connect once fate runs. */
tp_status_t tp_transports_open(tp_world_t *world); /* fills world->my_addresses */
tp_status_t tp_transports_select(tp_world_t *world);
tp_status_t tp_transports_exchange(tp_world_t *world);
tp_status_t tp_transports_connect(tp_world_t *world);
void tp_transports_close(tp_world_t *world);

/* The data path the collectives use: each transfer goes through the transport chosen for its peer. */
tp_status_t tp_transports_post(tp_world_t *world, tp_xfer_t *xfer);
/* The caps flags (TP_TRANSPORT_*) of the transport that reaches peer (a world rank); 0 for this rank. */
uint32_t tp_transports_flags(const tp_world_t *world, int peer);
tp_status_t tp_transports_progress(tp_world_t *world, int wait);
void tp_transports_cancel(tp_world_t *world);
/* The name of the transport that reaches a world rank ("self" for this rank); *ip_endpoints (when not NULL) says
 * whether it connects over IP (TP_TRANSPORT_IP_ENDPOINTS). */
const char *tp_transports_name(const tp_world_t *world, int peer, int *ip_endpoints);

#endif
