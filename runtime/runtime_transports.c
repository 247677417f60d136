/* runtime_transports.c: every transport in one ordered array; per peer, the first that reaches it wins. */
#include "runtime_transports.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_iface.h"

extern const tp_transport_ops_t tp_tcp_ops;

/* In order of preference; TP_TRANSPORTS may reorder or drop them. */
static const tp_transport_ops_t *const tp_transport_list[] = {
    &tp_tcp_ops,
};
#define NUM_TRANSPORTS ((int)(sizeof(tp_transport_list) / sizeof(tp_transport_list[0])))

typedef struct tp_transports {
    int n;
    const tp_transport_ops_t *ops[TP_TRANSPORTS_MAX];
    void *state[TP_TRANSPORTS_MAX];
    int *peer_tr; /* by world rank: index into ops, -1 for this rank */
} tp_transports_t;

int tp_transports_names(const char **names, int max)
{
    for (int i = 0; i < NUM_TRANSPORTS && i < max; i++) names[i] = tp_transport_list[i]->name;
    return NUM_TRANSPORTS;
}

const tp_transport_ops_t *tp_transport_at(int index)
{
    return index >= 0 && index < NUM_TRANSPORTS ? tp_transport_list[index] : NULL;
}

tp_status_t tp_transport_unsupported_register(void *state, void *buf, size_t len, void **handle)
{
    return TP_ERR_UNSUPPORTED;
}

int tp_transports_parse(const char *spec, const char *const *names, int n, int *order, char *unknown,
                        size_t unknown_len)
{
    int keep[TP_TRANSPORTS_MAX] = {0}, listed = 0, count = 0, positive = 0;
    size_t uoff = 0;
    char item[64];
    if (unknown_len > 0) unknown[0] = '\0';
    for (const char *p = spec; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(item, sizeof(item), "%.*s", (int)len, p);
        p = end ? end + 1 : NULL;
        int neg = item[0] == '^';
        const char *name = item + neg;
        if (name[0] == '\0') continue;
        positive |= !neg;
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], name) == 0) found = i;
        if (found < 0) {
            if (uoff < unknown_len)
                uoff += (size_t)snprintf(unknown + uoff, unknown_len - uoff, "%s%s", uoff ? "," : "", name);
            continue;
        }
        if (neg) {
            keep[found] = -1;
        } else if (keep[found] == 0) { /* an exclusion anywhere in the list wins */
            keep[found] = 1;
            order[listed++] = found; /* provisional: filtered below */
        }
    }
    if (positive) {
        for (int i = 0; i < listed; i++)
            if (keep[order[i]] == 1) order[count++] = order[i];
        return count;
    }
    for (int i = 0; i < n; i++)
        if (keep[i] != -1) order[count++] = i;
    return count;
}

tp_status_t tp_transports_open(tp_world_t *w)
{
    const char *names[TP_TRANSPORTS_MAX];
    int order[TP_TRANSPORTS_MAX];
    char unknown[256];
    for (int i = 0; i < NUM_TRANSPORTS; i++) names[i] = tp_transport_list[i]->name;
    int n = tp_transports_parse(w->transports, names, NUM_TRANSPORTS, order, unknown, sizeof(unknown));
    if (unknown[0] != '\0')
        tp_log(TP_LOG_WARN, "transport", "TP_TRANSPORTS=\"%s\": unknown transport %s (known: tcp)", w->transports,
               unknown);
    tp_transports_t *t = calloc(1, sizeof(*t));
    if (t == NULL) return TP_ERR_NO_MEMORY;
    t->peer_tr = malloc((size_t)w->size * sizeof(int));
    if (t->peer_tr == NULL) {
        free(t);
        return TP_ERR_NO_MEMORY;
    }
    tp_transport_env_t env = {.rank = w->rank, .size = w->size, .job_key = w->job_key,
                              .connect_timeout_s = w->boot_timeout_s, .spin_us = w->spin_us,
                              .part_bytes = w->part_bytes, .advertise_ip = w->advertise_ip,
                              .boot_host = w->boot_host, .on_connected = tp_iface_connected,
                              .on_connected_ctx = w};
    for (int k = 0; k < n; k++) {
        const tp_transport_ops_t *ops = tp_transport_list[order[k]];
        if (ops->abi_version != TP_TRANSPORT_ABI || ops->ops_size != sizeof(tp_transport_ops_t)) {
            tp_log(TP_LOG_WARN, "transport", "%s: built for transport ABI %u (size %u), this runtime has %u: skipped",
                   ops->name, ops->abi_version, ops->ops_size, TP_TRANSPORT_ABI);
            continue;
        }
        char addr[256];
        void *state = NULL;
        if (ops->open(&env, &state, addr, sizeof(addr)) != TP_OK) {
            tp_log(TP_LOG_DEBUG, "transport", "%s: not available on this rank", ops->name);
            continue;
        }
        size_t off = strlen(w->my_addresses);
        snprintf(w->my_addresses + off, sizeof(w->my_addresses) - off, "%s%s=%s", off ? ";" : "", ops->name, addr);
        t->ops[t->n] = ops;
        t->state[t->n++] = state;
    }
    w->transport_state = t;
    if (t->n == 0 && w->size > 1) {
        tp_log(TP_LOG_ERROR, "transport", "no transport could open (TP_TRANSPORTS=\"%s\")", w->transports);
        return TP_ERR_UNSUPPORTED;
    }
    return TP_OK;
}

tp_status_t tp_transports_connect(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    int *use = calloc((size_t)w->size, sizeof(int));
    const char **addrs = calloc((size_t)w->size, sizeof(char *));
    char *buf = calloc((size_t)w->size, TP_ADDRS_MAX);
    tp_status_t s = TP_OK;
    if (use == NULL || addrs == NULL || buf == NULL) {
        s = TP_ERR_NO_MEMORY;
        goto out;
    }
    for (int p = 0; p < w->size; p++) {
        t->peer_tr[p] = -1;
        if (p == w->rank) continue;
        for (int k = 0; k < t->n && t->peer_tr[p] < 0; k++) {
            char *a = buf + (size_t)p * TP_ADDRS_MAX;
            int have = tp_peer_address(&w->peers[p], t->ops[k]->name, a, TP_ADDRS_MAX) != 0;
            if (t->ops[k]->can_reach(t->state[k], p, have ? a : NULL)) t->peer_tr[p] = k;
        }
        if (t->peer_tr[p] < 0) {
            tp_log(TP_LOG_ERROR, "transport", "no transport reaches rank %d on %s (its addresses: \"%s\")", p,
                   w->peers[p].host, w->peers[p].addresses);
            s = TP_ERR_UNSUPPORTED;
            goto out;
        }
    }
    for (int k = 0; k < t->n; k++) {
        for (int p = 0; p < w->size; p++) {
            use[p] = t->peer_tr[p] == k;
            addrs[p] = buf + (size_t)p * TP_ADDRS_MAX;
            /* Across hosts TCP dials the peer on each /24 both share in turn, then where its bootstrap came from. */
            if (use[p] && strcmp(t->ops[k]->name, "tcp") == 0) tp_iface_choose(w, p, buf + (size_t)p * TP_ADDRS_MAX, TP_ADDRS_MAX);
        }
        if ((s = t->ops[k]->connect(t->state[k], use, addrs)) != TP_OK) goto out;
    }
out:
    free(use);
    free(addrs);
    free(buf);
    return s;
}

void tp_transports_close(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    if (t == NULL) return;
    for (int k = 0; k < t->n; k++) t->ops[k]->close(t->state[k]);
    free(t->peer_tr);
    free(t);
    w->transport_state = NULL;
}

tp_status_t tp_transports_post(tp_world_t *w, tp_xfer_t *x)
{
    tp_transports_t *t = w->transport_state;
    int k = t->peer_tr[x->peer];
    if (k < 0) return TP_ERR_INVALID;
    return t->ops[k]->post(t->state[k], x);
}

tp_status_t tp_transports_progress(tp_world_t *w, int wait)
{
    tp_transports_t *t = w->transport_state;
    if (t->n == 1) return t->ops[0]->progress(t->state[0], wait);
    for (int k = 0; k < t->n; k++) { /* several transports: poll each in turn */
        tp_status_t s = t->ops[k]->progress(t->state[k], 0);
        if (s != TP_OK) return s;
    }
    return TP_OK;
}

void tp_transports_cancel(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    for (int k = 0; k < t->n; k++) t->ops[k]->cancel(t->state[k]);
}

const char *tp_transports_name(const tp_world_t *w, int peer)
{
    const tp_transports_t *t = w->transport_state;
    int k = t->peer_tr[peer];
    return k < 0 ? "self" : t->ops[k]->name;
}
