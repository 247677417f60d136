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
} coll_hier_t;

/* The comm's hosts when the hierarchical algorithms apply to it, else NULL. */
const coll_hier_t *coll_hier_of(coll_call_t *c);

#endif
