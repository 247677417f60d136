/* coll_hier.h: a comm's hosts as the hierarchical algorithms see them (coll_hier.c, coll_hier_reduce.c). */
#ifndef COLL_HIER_H
#define COLL_HIER_H

#include "coll_internal.h"

enum { COLL_HIER_OFF, COLL_HIER_AUTO, COLL_HIER_ON };

typedef struct coll_hier {
    int mode;      /* TP_COLL_HIER */
    int active;    /* several hosts, some with several ranks, and the setting allows */
    int hosts;     /* numbered by their first comm rank */
    int width;     /* the first host's rank count */
    int uniform;   /* every host has width ranks */
    int blocks;    /* every host's ranks are consecutive in comm rank order */
    int *host_of;  /* comm rank -> host */
    int *local_of; /* comm rank -> its index among its host's ranks */
    int *first;    /* host -> its first comm rank */
    int *count;    /* host -> how many ranks */
    int *members;  /* host g's ranks, in rank order, from start_of[g] */
    int *start_of;
    unsigned said; /* bit per collective: its first hierarchical call was logged */
    uint8_t *fold; /* reduce_scatter: the column's folds before they move on (grown as calls need) */
    size_t fold_bytes;
} coll_hier_t;

/* The comm's hosts when the hierarchical algorithms apply to it, else NULL. */
const coll_hier_t *coll_hier_of(coll_call_t *c);

/* Steps: a pair of ranks carries each at most once per part. */
enum { STEP_PIECE = 0, STEP_RESULT = 1, STEP_PARTIAL = 2, STEP_FINAL = 3, STEP_RAW = 4 };

/*
 * A chain's view from rank (g, i): its host's ranks start at base, w of them; prev and next are (g -+ 1, i), -1
 * when none. Part k of the vector it folds has slice_part_elems(block, sl.pe, k % ppb) elements (one slice cut
 * into parts, or several blocks of one size, each cut alike).
 */
typedef struct chain {
    slices_t sl;
    int g, i, w, m, base;
    int prev, next, fin_from; /* -1 when none */
    size_t block, ppb;
} chain_t;

/* Posts the first window of part receives from this host's other ranks (step STEP_PIECE) and from prev. */
tp_status_t coll_hier_chain_slots(coll_call_t *c, const chain_t *ch, size_t parts);
/* How much of part k (m elements) has come in from every source, in elements. */
size_t coll_hier_chain_have(coll_call_t *c, const chain_t *ch, size_t k, size_t m);
/* Part k is folded: each source's slot takes part k + window (once its receive is complete). */
tp_status_t coll_hier_chain_repost(coll_call_t *c, const chain_t *ch, size_t k, size_t parts);

#endif
