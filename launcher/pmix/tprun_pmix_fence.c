/* tprun_pmix_fence.c: the fence table: which hosts owe a part of which fence, and what to answer each. */
#include "tprun_pmix_fence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PART_NONE = 0, PART_OWED, PART_IN };

typedef struct fence {
    char *sig;
    unsigned seq;
    int *ranks; /* the participants, ascending; NULL for the whole namespace */
    int nranks;
    unsigned char *part; /* per host: PART_* */
    unsigned char **data;
    size_t *len;
    double deadline;
    tprun_fence_status_t status; /* not OK: it failed; parts still owed get that answer on arrival */
    int failed_rank;
    char missing[256];
    struct fence *next;
} fence_t;

struct tprun_fence_table {
    int world_size, num_nodes;
    int *rank_node;
    unsigned char *gone; /* per rank: it ended, so a fence over it can never complete */
    fence_t *head;
};

tprun_fence_table_t *tprun_fence_table_create(int world_size, int num_nodes, const int *rank_node)
{
    tprun_fence_table_t *t = calloc(1, sizeof(*t));
    if (t == NULL) return NULL;
    t->rank_node = malloc(sizeof(int) * (size_t)world_size);
    t->gone = calloc((size_t)world_size, 1);
    if (t->rank_node == NULL || t->gone == NULL) {
        free(t->rank_node);
        free(t->gone);
        free(t);
        return NULL;
    }
    memcpy(t->rank_node, rank_node, sizeof(int) * (size_t)world_size);
    t->world_size = world_size;
    t->num_nodes = num_nodes;
    return t;
}

static void fence_free(const tprun_fence_table_t *t, fence_t *f)
{
    for (int n = 0; n < t->num_nodes; n++) free(f->data[n]);
    free(f->data);
    free(f->len);
    free(f->part);
    free(f->ranks);
    free(f->sig);
    free(f);
}

void tprun_fence_table_destroy(tprun_fence_table_t *t)
{
    if (t == NULL) return;
    while (t->head != NULL) {
        fence_t *f = t->head;
        t->head = f->next;
        fence_free(t, f);
    }
    free(t->rank_node);
    free(t->gone);
    free(t);
}

/* "*" or strictly ascending ranks of this job: anything else is not a signature a host of ours would send. */
static int parse_sig(const tprun_fence_table_t *t, const char *sig, int **ranks, int *nranks)
{
    *ranks = NULL, *nranks = 0;
    if (strcmp(sig, "*") == 0) return 0;
    size_t cap = 1;
    for (const char *c = sig; *c; c++) cap += *c == ',';
    int *r = malloc(sizeof(int) * cap);
    if (r == NULL) return -1;
    const char *p = sig;
    int n = 0;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9') break;
        long v = strtol(p, &end, 10);
        if (v >= t->world_size || (n > 0 && v <= r[n - 1])) break;
        r[n++] = (int)v;
        if (*end == '\0') {
            *ranks = r, *nranks = n;
            return 0;
        }
        if (*end != ',') break;
        p = end + 1;
    }
    free(r);
    return -1;
}

static fence_t *fence_find(tprun_fence_table_t *t, const char *sig, unsigned seq)
{
    for (fence_t *f = t->head; f != NULL; f = f->next)
        if (f->seq == seq && strcmp(f->sig, sig) == 0) return f;
    return NULL;
}

static fence_t *fence_new(tprun_fence_table_t *t, const char *sig, unsigned seq, int *ranks, int nranks)
{
    fence_t *f = calloc(1, sizeof(*f));
    if (f == NULL) return NULL;
    f->sig = strdup(sig);
    f->part = calloc((size_t)t->num_nodes, 1);
    f->data = calloc((size_t)t->num_nodes, sizeof(*f->data));
    f->len = calloc((size_t)t->num_nodes, sizeof(*f->len));
    if (f->sig == NULL || f->part == NULL || f->data == NULL || f->len == NULL) {
        f->ranks = ranks;
        fence_free(t, f);
        return NULL;
    }
    f->seq = seq;
    f->ranks = ranks, f->nranks = nranks;
    f->failed_rank = -1;
    if (ranks == NULL)
        for (int r = 0; r < t->world_size; r++) f->part[t->rank_node[r]] = PART_OWED;
    for (int i = 0; i < nranks; i++) f->part[t->rank_node[ranks[i]]] = PART_OWED;
    f->next = t->head;
    t->head = f;
    return f;
}

static void fence_unlink(tprun_fence_table_t *t, fence_t *f)
{
    for (fence_t **p = &t->head; *p != NULL; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            break;
        }
    fence_free(t, f);
}

static int fence_owes(const tprun_fence_table_t *t, const fence_t *f)
{
    for (int n = 0; n < t->num_nodes; n++)
        if (f->part[n] == PART_OWED) return 1;
    return 0;
}

static int fence_has_rank(const fence_t *f, int rank)
{
    if (f->ranks == NULL) return 1;
    for (int i = 0; i < f->nranks; i++)
        if (f->ranks[i] == rank) return 1;
    return 0;
}

/* Records why f failed and which hosts had not sent their part by then. */
static void fence_mark_failed(const tprun_fence_table_t *t, fence_t *f, tprun_fence_status_t status, int rank)
{
    f->status = status;
    f->failed_rank = rank;
    size_t o = 0;
    f->missing[0] = '\0';
    for (int n = 0; n < t->num_nodes && o + 12 < sizeof(f->missing); n++)
        if (f->part[n] == PART_OWED)
            o += (size_t)snprintf(f->missing + o, sizeof(f->missing) - o, "%s%d", o ? "," : "", n);
}

static int result_init(tprun_fence_result_t *res, const fence_t *f)
{
    memset(res, 0, sizeof(*res));
    snprintf(res->sig, sizeof(res->sig), "%s", f->sig);
    res->seq = f->seq;
    res->status = f->status;
    res->failed_rank = f->failed_rank;
    snprintf(res->missing, sizeof(res->missing), "%s", f->missing);
    return 0;
}

/* Builds the answer to every host whose part is in: the concatenation when complete, else only the failure. */
static int result_fill(const tprun_fence_table_t *t, const fence_t *f, tprun_fence_result_t *res)
{
    result_init(res, f);
    res->nodes = malloc(sizeof(int) * (size_t)t->num_nodes);
    if (res->nodes == NULL) return -1;
    size_t total = 0;
    for (int n = 0; n < t->num_nodes; n++)
        if (f->part[n] == PART_IN) res->nodes[res->nnodes++] = n, total += f->len[n];
    if (f->status != TPRUN_FENCE_OK || total == 0) return 0;
    res->data = malloc(total);
    if (res->data == NULL) return -1;
    for (int n = 0; n < t->num_nodes; n++)
        if (f->part[n] == PART_IN && f->len[n] > 0)
            memcpy(res->data + res->len, f->data[n], f->len[n]), res->len += f->len[n];
    return 0;
}

int tprun_fence_contribute(tprun_fence_table_t *t, int node, const char *sig, unsigned seq, const void *data,
                           size_t len, double deadline, tprun_fence_result_t *res, char *err, size_t err_len)
{
    if (node < 0 || node >= t->num_nodes) {
        snprintf(err, err_len, "fence part from host %d of %d", node, t->num_nodes);
        return -1;
    }
    fence_t *f = fence_find(t, sig, seq);
    int created = f == NULL;
    if (f == NULL) {
        int *ranks, nranks;
        if (strlen(sig) >= sizeof(res->sig) || parse_sig(t, sig, &ranks, &nranks) != 0) {
            snprintf(err, err_len, "fence over \"%.80s\": not \"*\" or ascending ranks below %d", sig, t->world_size);
            return -1;
        }
        if ((f = fence_new(t, sig, seq, ranks, nranks)) == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        for (int r = 0; r < t->world_size && f->status == TPRUN_FENCE_OK; r++)
            if (t->gone[r] && fence_has_rank(f, r)) fence_mark_failed(t, f, TPRUN_FENCE_RANK_FAILED, r);
    }
    if (f->part[node] != PART_OWED) {
        snprintf(err, err_len, "fence over %.80s (#%u): host %d %s", sig, seq, node,
                 f->part[node] == PART_IN ? "sent its part twice" : "has none of its ranks");
        if (created) fence_unlink(t, f); /* a refused part opens no fence */
        return -1;
    }
    if (len > 0 && f->status == TPRUN_FENCE_OK) {
        if ((f->data[node] = malloc(len)) == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        memcpy(f->data[node], data, len);
        f->len[node] = len;
    }
    f->part[node] = PART_IN;
    if (deadline > 0 && (f->deadline == 0 || deadline < f->deadline)) f->deadline = deadline;
    if (f->status != TPRUN_FENCE_OK) {
        /* It failed before this part came: answer this host alone. */
        result_init(res, f);
        res->nodes = malloc(sizeof(int));
        if (res->nodes != NULL) res->nodes[res->nnodes++] = node;
        if (!fence_owes(t, f)) fence_unlink(t, f);
        return 1;
    }
    if (fence_owes(t, f)) return 0;
    int rc = result_fill(t, f, res);
    fence_unlink(t, f);
    if (rc != 0) {
        tprun_fence_result_free(res);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    return 1;
}

/* Fails f: the hosts in get the answer now, the owed ones when (if ever) their part arrives. */
static void fence_fail(tprun_fence_table_t *t, fence_t *f, tprun_fence_status_t status, int rank,
                       tprun_fence_done_fn done, void *ctx)
{
    fence_mark_failed(t, f, status, rank);
    tprun_fence_result_t res;
    if (result_fill(t, f, &res) == 0 && res.nnodes > 0) done(ctx, &res);
    tprun_fence_result_free(&res);
    for (int n = 0; n < t->num_nodes; n++) {
        free(f->data[n]);
        f->data[n] = NULL;
        if (f->part[n] == PART_IN) f->part[n] = PART_NONE; /* answered */
    }
    if (!fence_owes(t, f)) fence_unlink(t, f);
}

void tprun_fence_fail_rank(tprun_fence_table_t *t, int rank, tprun_fence_done_fn done, void *ctx)
{
    if (rank >= 0 && rank < t->world_size) t->gone[rank] = 1;
    fence_t *f = t->head;
    while (f != NULL) {
        fence_t *next = f->next;
        if (f->status == TPRUN_FENCE_OK && fence_has_rank(f, rank))
            fence_fail(t, f, TPRUN_FENCE_RANK_FAILED, rank, done, ctx);
        f = next;
    }
}

void tprun_fence_expire(tprun_fence_table_t *t, double now, tprun_fence_done_fn done, void *ctx)
{
    fence_t *f = t->head;
    while (f != NULL) {
        fence_t *next = f->next;
        if (f->status == TPRUN_FENCE_OK && f->deadline > 0 && f->deadline <= now)
            fence_fail(t, f, TPRUN_FENCE_TIMEOUT, -1, done, ctx);
        f = next;
    }
}

double tprun_fence_next_deadline(const tprun_fence_table_t *t)
{
    double next = 0;
    for (const fence_t *f = t->head; f != NULL; f = f->next)
        if (f->status == TPRUN_FENCE_OK && f->deadline > 0 && (next == 0 || f->deadline < next)) next = f->deadline;
    return next;
}

int tprun_fence_pending(const tprun_fence_table_t *t)
{
    int n = 0;
    for (const fence_t *f = t->head; f != NULL; f = f->next) n += f->status == TPRUN_FENCE_OK;
    return n;
}

void tprun_fence_result_free(tprun_fence_result_t *res)
{
    free(res->data);
    free(res->nodes);
    res->data = NULL;
    res->nodes = NULL;
    res->nnodes = 0;
}
