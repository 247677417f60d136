/* runtime_pairs.h: per-pair connection data, routed through rank 0's bootstrap star before fate owns the sockets. */
#ifndef RUNTIME_PAIRS_H
#define RUNTIME_PAIRS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime_world.h"

/* One piece of connection data: what rank `from` wrote for rank `to` (transport names the writer). */
typedef struct tp_pair_blob {
    int from, to;
    char transport[32];
    uint32_t len;
    const uint8_t *data; /* into the message it was parsed from */
} tp_pair_blob_t;

/* Appends a blob to a message buffer (grown as needed); -1 when out of memory. */
int tp_pairs_append(uint8_t **buf, size_t *len, size_t *cap, const tp_pair_blob_t *b);
/* Parses a message's blobs into out (count in *n, malloc'd); TP_ERR_PROTOCOL with why on anything malformed
 * (a rank outside 0..size-1, a length past the end, a blob over TP_TRANSPORT_PAIR_MAX). */
tp_status_t tp_pairs_parse(const uint8_t *buf, size_t len, int size, tp_pair_blob_t **out, int *n, char *why,
                           size_t why_len);

/*
 * Sends this rank's blobs (each from == this rank) and returns every blob addressed to it (*in, *nin, backed by
 * *msg, all malloc'd): ranks send theirs to rank 0, which routes each to its addressee. Blocks until done or
 * the boot timeout; a rank that closes its connection fails the exchange on every rank, naming it.
 */
tp_status_t tp_pairs_exchange(tp_world_t *w, const uint8_t *mine, size_t mine_len, uint8_t **msg, tp_pair_blob_t **in,
                              int *nin);

#endif
