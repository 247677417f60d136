/* ssh/tree.c: agents started as a tree: beyond TP_LAUNCH_FANOUT hosts tprun starts that many agents and each
 * starts its children over the same ssh command, relaying their messages up and tprun's down as "c AGENT LINE". */
#include "ssh/ssh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/job.h"

/* Children of agent p in the heap: fanout*(p+1) .. +fanout-1 (the first fanout are tprun's own). */
static int first_child(const tprun_agents_t *A, int p) { return A->fanout * (p + 1); }

void tprun_tree_shape(tprun_agents_t *A, int fanout)
{
    A->fanout = fanout > 0 && A->n > fanout ? fanout : 0;
    A->ndirect = A->fanout > 0 ? A->fanout : A->n;
    for (int i = 0; i < A->n; i++) {
        tprun_agent_t *a = &A->a[i];
        a->parent = i < A->ndirect ? -1 : (i - A->fanout) / A->fanout;
        a->depth = a->parent < 0 ? 1 : A->a[a->parent].depth + 1;
        a->subtree = 0;
    }
    for (int i = A->n - 1; i >= A->ndirect; i--) A->a[A->a[i].parent].subtree += 1 + A->a[i].subtree;
}

tprun_agent_t *tprun_tree_top(tprun_agent_t *a)
{
    while (a->parent >= 0) a = &a->all->a[a->parent];
    return a;
}

/* Depth first below p; fn on each agent, with the child of `from` it lies under. */
static void walk(tprun_agents_t *A, int p, int under, void (*fn)(tprun_agents_t *A, int d, int under, void *arg),
                 void *arg)
{
    if (A->fanout == 0) return;
    for (int c = first_child(A, p); c < A->n && c < first_child(A, p) + A->fanout; c++) {
        fn(A, c, under < 0 ? c : under, arg);
        walk(A, c, under < 0 ? c : under, fn, arg);
    }
}

typedef struct each_arg {
    void (*fn)(tprun_agent_t *d, void *arg);
    void *arg;
} each_arg_t;

static void each_one(tprun_agents_t *A, int d, int under, void *arg)
{
    each_arg_t *e = arg;
    (void)under;
    e->fn(&A->a[d], e->arg);
}

void tprun_tree_each_below(tprun_agent_t *a, void (*fn)(tprun_agent_t *d, void *arg), void *arg)
{
    each_arg_t e = {fn, arg};
    walk(a->all, (int)(a - a->all->a), -1, each_one, &e);
}

typedef struct lines_arg {
    int (*add)(void *ctx, const char *key, const char *value);
    void *ctx;
    int failed;
} lines_arg_t;

/* "child AGENT HOST" for the agents it starts itself, "via AGENT CHILD" for the ones further down. */
static void route_line(tprun_agents_t *A, int d, int under, void *arg)
{
    lines_arg_t *la = arg;
    char v[320];
    if (d == under) snprintf(v, sizeof(v), "%d %s", d, A->a[d].name);
    else snprintf(v, sizeof(v), "%d %d", d, under);
    if (!la->failed && la->add(la->ctx, d == under ? "child" : "via", v) != 0) la->failed = 1;
}

int tprun_tree_plan_lines(const tprun_loop_t *L, int ai, int (*add)(void *ctx, const char *key, const char *value),
                          void *ctx)
{
    tprun_agents_t *A = L->agents;
    if (A->a[ai].subtree == 0) return 0;
    char num[32];
    snprintf(num, sizeof(num), "%g", L->plan->ssh_timeout_s);
    if (add(ctx, "ssh", L->plan->ssh != NULL ? L->plan->ssh : "ssh") != 0 || add(ctx, "sshto", num) != 0 ||
        add(ctx, "exe", A->exe) != 0)
        return -1;
    lines_arg_t la = {add, ctx, 0};
    walk(A, ai, -1, route_line, &la);
    return la.failed ? -1 : 0;
}

typedef struct wrap_arg {
    const tprun_loop_t *L;
    char *(*plan)(const tprun_loop_t *L, int ai, size_t *len);
    char **buf;
    size_t *len;
    int failed;
} wrap_arg_t;

/* Agent d's plan, each line as "c d LINE": its parent hands it on unwrapped. */
static void wrap_plan(tprun_agents_t *A, int d, int under, void *arg)
{
    wrap_arg_t *w = arg;
    size_t plen = 0, lines = 0;
    (void)A, (void)under;
    if (w->failed) return;
    char *p = w->plan(w->L, d, &plen), head[24];
    int hl = snprintf(head, sizeof(head), "c %d ", d);
    for (size_t i = 0; p != NULL && i < plen; i++) lines += p[i] == '\n';
    char *g = p != NULL ? realloc(*w->buf, *w->len + plen + lines * (size_t)hl + 1) : NULL;
    if (g == NULL) {
        free(p);
        w->failed = 1;
        return;
    }
    *w->buf = g;
    for (size_t i = 0; i < plen;) {
        char *nl = memchr(p + i, '\n', plen - i);
        size_t l = (nl != NULL ? (size_t)(nl - p) + 1 : plen) - i;
        memcpy(g + *w->len, head, (size_t)hl);
        memcpy(g + *w->len + hl, p + i, l);
        *w->len += (size_t)hl + l;
        i += l;
    }
    g[*w->len] = '\0';
    free(p);
}

int tprun_tree_wrapped_plans(const tprun_loop_t *L, int ai, char *(*plan)(const tprun_loop_t *L, int ai, size_t *len),
                             char **buf, size_t *len)
{
    wrap_arg_t w = {L, plan, buf, len, 0};
    walk(L->agents, ai, -1, wrap_plan, &w);
    return w.failed ? -1 : 0;
}

tprun_agent_t *tprun_tree_unwrap(tprun_agent_t *top, char *line, size_t len, char **rest, size_t *rest_len)
{
    tprun_agents_t *A = top->all;
    size_t used;
    if (len < 4 || line[0] != 'c' || line[1] != ' ') return NULL;
    long d = tprun_wire_parse_uint(line + 2, len - 2, A->n - 1, &used);
    if (d < 0 || 2 + used >= len || line[2 + used - 1] != ' ' || tprun_tree_top(&A->a[d]) != top || &A->a[d] == top)
        return NULL;
    *rest = line + 2 + used;
    *rest_len = len - 2 - used;
    return &A->a[d];
}

typedef struct started_arg {
    double now, timeout;
    int top_depth;
} started_arg_t;

static void started_one(tprun_agent_t *d, void *arg)
{
    started_arg_t *s = arg;
    d->state = AGENT_CONNECTING;
    d->deadline = s->now + s->timeout * (d->depth - s->top_depth + 1);
}

void tprun_tree_started(tprun_agent_t *a, double now, double ssh_timeout_s)
{
    started_arg_t s = {now, ssh_timeout_s, a->depth};
    tprun_tree_each_below(a, started_one, &s);
}
