/* runtime_transports.c: the registered transports in the list's order; per peer, the one that reaches it best wins. */
#include "runtime_transports.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime_components.h"
#include "runtime_config.h"
#include "runtime_fate.h"
#include "runtime_iface.h"
#include "runtime_pairs.h"
#include "runtime_record.h"
#include "runtime_stop.h"

/* The transports of the registration list (runtime_components.c), in its order of preference; TP_TRANSPORTS may
 * reorder or drop them. */
static int transport_list(const tp_transport_ops_t **list)
{
    int n = 0;
    for (size_t i = 0; i < tp_components_len && n < TP_TRANSPORTS_MAX; i++)
        if (tp_components[i].kind == TP_COMPONENT_TRANSPORT) list[n++] = tp_components[i].ops;
    return n;
}

/* Transports added with tp_transport_register, after the built-in ones. */
static const tp_transport_ops_t *registered[TP_TRANSPORTS_MAX];
static int num_registered;

/* Adds the CPUs of a record's list ("0-3,8") to set; -1 when it is no such list ("-", or garbage from a peer). */
static int cpus_add(const char *list, cpu_set_t *set)
{
    for (const char *p = list;;) {
        char *end;
        if (*p < '0' || *p > '9') return -1;
        unsigned long a = strtoul(p, &end, 10), b = a;
        if (*end == '-') {
            p = end + 1;
            if (*p < '0' || *p > '9') return -1;
            b = strtoul(p, &end, 10);
        }
        if (b < a || b >= CPU_SETSIZE) return -1;
        for (unsigned long c = a; c <= b; c++) CPU_SET(c, set);
        if (*end == '\0') return 0;
        if (*end != ',') return -1;
        p = end + 1;
    }
}

#define TP_SPIN_BUSY_NS 3000 /* the first part of a spin makes no system call (one costs ~2 us in a VM) */
#define TP_SPIN_LOOKS   8    /* looks between clock reads in a spin that does not yield */

typedef struct tp_transports {
    int n;
    const tp_transport_ops_t *ops[TP_TRANSPORTS_MAX];
    void *state[TP_TRANSPORTS_MAX];
    tp_transport_caps_t caps[TP_TRANSPORTS_MAX];
    int *peer_tr;          /* by world rank: index into ops, -1 for this rank */
    tp_peer_view_t *views; /* by world rank: as the chosen transport sees the peer */
    char **addrs;          /* by world rank: the chosen transport's published address */
    uint8_t *pair_msg;     /* the exchange's message the pair blobs point into */
    tp_pair_blob_t *pairs; /* what each peer wrote this rank, by the exchange */
    int npairs;
    struct pollfd *pfds; /* several transports: every one's event fds, polled together */
    int pfds_len;
    int yield; /* more ranks on this kernel than CPUs they may run on: a spinning rank lets the one it waits for run */
    int apart; /* no other rank on this kernel may run on this rank's CPUs: its spin never delays a peer */
} tp_transports_t;

int tp_transports_names(const char **names, int max)
{
    const tp_transport_ops_t *list[TP_TRANSPORTS_MAX];
    int n = transport_list(list);
    for (int i = 0; i < n && i < max; i++) names[i] = list[i]->name;
    return n;
}

/* Built-in and registered transports, in that order. */
static int all_transports(const tp_transport_ops_t **ops)
{
    int n = transport_list(ops);
    for (int i = 0; i < num_registered && n < TP_TRANSPORTS_MAX; i++) ops[n++] = registered[i];
    return n;
}

tp_status_t tp_transport_unsupported_pair_info(void *state, const tp_peer_view_t *peer, void *data, size_t *len)
{
    return TP_ERR_UNSUPPORTED;
}

int tp_transport_unsupported_event_fds(void *state, struct pollfd *fds, int max) { return -1; }

const tp_transport_ops_t *tp_transport_at(int index)
{
    const tp_transport_ops_t *all[TP_TRANSPORTS_MAX];
    int n = all_transports(all);
    return index >= 0 && index < n ? all[index] : NULL;
}

tp_status_t tp_transport_unsupported_register(void *state, void *buf, size_t len, void **handle)
{
    return TP_ERR_UNSUPPORTED;
}

void tp_transport_unsupported_deregister(void *state, void *handle) {}

/* Why an ops table cannot be used (NULL when it can): a table built for another ABI, or an op left NULL. */
static const char *ops_invalid(const tp_transport_ops_t *o)
{
    if (o->abi_version != TP_TRANSPORT_ABI || o->ops_size != sizeof(tp_transport_ops_t))
        return "built for another transport ABI";
    if (o->name == NULL || o->name[0] == '\0' || strlen(o->name) >= 32 || strpbrk(o->name, "=;,^ ") != NULL)
        return "its name is empty, longer than 31 bytes or has one of \"=;,^ \"";
    if (!o->open || !o->caps || !o->reach || !o->pair_info || !o->connect || !o->post || !o->progress ||
        !o->event_fds || !o->cancel || !o->mem_register || !o->mem_deregister || !o->close)
        return "an op is NULL (point unsupported ones at the tp_transport_unsupported_* stubs)";
    return NULL;
}

tp_status_t tp_transport_register(const tp_transport_ops_t *ops)
{
    const tp_transport_ops_t *all[TP_TRANSPORTS_MAX];
    int n = all_transports(all);
    const char *why = ops == NULL ? "no ops table" : ops_invalid(ops);
    for (int i = 0; why == NULL && i < n; i++)
        if (strcmp(all[i]->name, ops->name) == 0) why = "a transport of that name exists";
    if (why == NULL && n >= TP_TRANSPORTS_MAX) why = "too many transports";
    if (why != NULL) {
        tp_log(TP_LOG_ERROR, "transport", "tp_transport_register(%s): %s",
               ops && ops->abi_version == TP_TRANSPORT_ABI && ops->name ? ops->name : "?", why);
        return TP_ERR_INVALID;
    }
    registered[num_registered++] = ops;
    return TP_OK;
}

const tp_transport_ops_t *tp_transport_find(const char *name)
{
    const tp_transport_ops_t *all[TP_TRANSPORTS_MAX];
    int n = all_transports(all);
    for (int i = 0; name != NULL && i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    return NULL;
}

int tp_transports_pick(const int *priority, int n)
{
    int best = -1;
    for (int k = 0; k < n; k++)
        if (priority[k] > TP_REACH_NO && (best < 0 || priority[k] > priority[best])) best = k;
    return best;
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

/* An address is one record field: printable text without the list's separator. */
static int address_valid(const char *a)
{
    for (; *a != '\0'; a++)
        if (!isprint((unsigned char)*a) || *a == ';') return 0;
    return 1;
}

/* The env's abandoned: fate reached a verdict, so a connection still in the making for a call is not waited for. */
static int job_failed(void *ctx)
{
    (void)ctx;
    return tp_fate_failed() != TP_OK;
}

tp_status_t tp_transports_open(tp_world_t *w)
{
    const tp_transport_ops_t *all[TP_TRANSPORTS_MAX];
    const char *names[TP_TRANSPORTS_MAX];
    int order[TP_TRANSPORTS_MAX], nall = all_transports(all);
    char unknown[256], known[256] = "";
    size_t ko = 0;
    for (int i = 0; i < nall; i++) {
        names[i] = all[i]->name;
        ko += (size_t)snprintf(known + ko, ko < sizeof(known) ? sizeof(known) - ko : 0, "%s%s", i ? "," : "", names[i]);
    }
    int n = tp_transports_parse(w->transports, names, nall, order, unknown, sizeof(unknown));
    if (unknown[0] != '\0')
        tp_log(TP_LOG_WARN, "transport", "TP_TRANSPORTS=\"%s\": unknown transport %s (known: %s)", w->transports,
               unknown, known);
    tp_transports_t *t = calloc(1, sizeof(*t));
    char *addr = malloc(TP_TRANSPORT_ADDRESS_MAX);
    if (t == NULL || addr == NULL) goto err_oom;
    w->transport_state = t;
    t->peer_tr = malloc((size_t)w->size * sizeof(int));
    t->views = calloc((size_t)w->size, sizeof(*t->views));
    t->addrs = calloc((size_t)w->size, sizeof(*t->addrs));
    if (t->peer_tr == NULL || t->views == NULL || t->addrs == NULL) goto err_oom;
    int loopback = w->boot_host[0] == '\0' || strncmp(w->boot_host, "127.", 4) == 0 ||
                   strcmp(w->boot_host, "localhost") == 0 || strcmp(w->boot_host, "::1") == 0;
    tp_transport_env_t env = {.rank = w->rank,
                              .size = w->size,
                              .job_key = w->job_key,
                              .connect_timeout_s = w->boot_timeout_s,
                              .spin_us = w->spin_us,
                              .part_bytes = w->part_bytes,
                              .ip = w->advertise_ip,
                              .on_loopback = loopback,
                              .connected = tp_iface_connected,
                              .connected_ctx = w,
                              .connect_lazy = strcmp(tp_config_value("TP_CONNECT"), "eager") != 0,
                              .abandoned = job_failed};
    for (int k = 0; k < n; k++) {
        const tp_transport_ops_t *ops = all[order[k]];
        const char *why = ops_invalid(ops);
        if (why != NULL) {
            tp_log(TP_LOG_WARN, "transport", "%s: %s (this runtime has ABI %u): skipped", ops->name, why,
                   TP_TRANSPORT_ABI);
            continue;
        }
        void *state = NULL;
        addr[0] = '\0';
        if (ops->open(&env, &state, addr, TP_TRANSPORT_ADDRESS_MAX) != TP_OK) {
            tp_log(TP_LOG_DEBUG, "transport", "%s: not available on this rank", ops->name);
            continue;
        }
        size_t off = strlen(w->my_addresses);
        addr[TP_TRANSPORT_ADDRESS_MAX - 1] = '\0';
        if (!address_valid(addr) ||
            (size_t)snprintf(w->my_addresses + off, sizeof(w->my_addresses) - off, "%s%s=%s", off ? ";" : "", ops->name,
                             addr) >= sizeof(w->my_addresses) - off) {
            w->my_addresses[off] = '\0';
            tp_log(TP_LOG_ERROR, "transport",
                   "%s: its address \"%.80s\" is not printable text without ';' that "
                   "fits beside the others: not used",
                   ops->name, addr);
            ops->close(state);
            continue;
        }
        t->ops[t->n] = ops;
        ops->caps(state, &t->caps[t->n]);
        t->state[t->n++] = state;
    }
    free(addr);
    if (t->n == 0 && w->size > 1) {
        tp_log(TP_LOG_ERROR, "transport", "no transport could open (TP_TRANSPORTS=\"%s\")", w->transports);
        return TP_ERR_UNSUPPORTED;
    }
    return TP_OK;
err_oom:
    free(addr);
    if (t != NULL && w->transport_state == NULL) free(t);
    return TP_ERR_NO_MEMORY;
}

/* What peer p published for a transport, as it sees the peer; address NULL when it did not open there. */
static void view_of(const tp_world_t *w, int p, const char *address, tp_peer_view_t *v)
{
    const tp_peer_record_t *me = &w->peers[w->rank], *r = &w->peers[p];
    *v = (tp_peer_view_t){.rank = p,
                          .same_host = strcmp(r->host, me->host) == 0,
                          .same_kernel = me->kernel[0] != '\0' && strcmp(r->kernel, me->kernel) == 0,
                          .host = r->host,
                          .ip = r->boot_ip,
                          .address = address};
}

tp_status_t tp_transports_select(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    char *a = malloc(TP_PUBLISHED_MAX);
    if (a == NULL) return TP_ERR_NO_MEMORY;
    for (int p = 0; p < w->size; p++) {
        int prio[TP_TRANSPORTS_MAX];
        t->peer_tr[p] = -1;
        if (p == w->rank) continue;
        for (int k = 0; k < t->n; k++) {
            tp_peer_view_t v;
            int have = tp_peer_address(&w->peers[p], t->ops[k]->name, a, TP_PUBLISHED_MAX) != 0;
            view_of(w, p, have ? a : NULL, &v);
            prio[k] = t->ops[k]->reach(t->state[k], &v);
        }
        int k = tp_transports_pick(prio, t->n);
        if (k < 0) {
            tp_log(TP_LOG_ERROR, "transport", "no transport reaches rank %d on %s (its addresses: \"%s\")", p,
                   w->peers[p].host, w->peers[p].addresses);
            free(a);
            return TP_ERR_UNSUPPORTED;
        }
        int have = tp_peer_address(&w->peers[p], t->ops[k]->name, a, TP_PUBLISHED_MAX) != 0;
        if (have && (t->addrs[p] = strdup(a)) == NULL) {
            free(a);
            return TP_ERR_NO_MEMORY;
        }
        t->peer_tr[p] = k;
        view_of(w, p, t->addrs[p], &t->views[p]);
    }
    free(a);
    /* this rank and every peer on its kernel, and the CPUs they may run on: all the kernel has, or fewer where every
     * record names its set (taskset, a cgroup) */
    int here = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t shared, own, peer;
    CPU_ZERO(&own);
    int named = cpus_add(w->peers[w->rank].cpus, &own) == 0;
    shared = own;
    t->apart = named;
    for (int p = 0; p < w->size; p++)
        if (p != w->rank && t->views[p].same_kernel) {
            here++;
            CPU_ZERO(&peer);
            named = named && cpus_add(w->peers[p].cpus, &peer) == 0;
            CPU_OR(&shared, &shared, &peer);
            CPU_AND(&peer, &peer, &own);
            t->apart = t->apart && named && CPU_COUNT(&peer) == 0;
        }
    if (named && CPU_COUNT(&shared) < cpus) cpus = CPU_COUNT(&shared);
    t->yield = cpus < 1 || here > cpus;
    if (t->yield)
        tp_log(TP_LOG_DEBUG, "transport", "%d ranks on this kernel share %ld CPUs: a waiting rank yields at once", here,
               cpus);
    else if (t->apart)
        tp_log(TP_LOG_DEBUG, "transport", "no other rank on this kernel may run on CPUs %s: a waiting rank never yields",
               w->peers[w->rank].cpus);
    return TP_OK;
}

/* Whether any rank opened a transport that exchanges per-pair data: every rank decides the same from the table. */
static int exchange_needed(const tp_world_t *w)
{
    const tp_transport_ops_t *all[TP_TRANSPORTS_MAX];
    int nall = all_transports(all);
    char *a = malloc(TP_PUBLISHED_MAX);
    int need = a == NULL; /* out of memory: exchange, so no rank waits for this one in vain */
    for (int i = 0; !need && i < nall; i++) {
        if (all[i]->pair_info == tp_transport_unsupported_pair_info) continue;
        for (int r = 0; r < w->size && !need; r++)
            need = tp_peer_address(&w->peers[r], all[i]->name, a, TP_PUBLISHED_MAX);
    }
    free(a);
    return need;
}

tp_status_t tp_transports_exchange(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    if (w->size == 1 || !exchange_needed(w)) return TP_OK;
    uint8_t *mine = NULL, *data = malloc(TP_TRANSPORT_PAIR_MAX);
    size_t len = 0, cap = 0;
    tp_status_t s = data == NULL ? TP_ERR_NO_MEMORY : TP_OK;
    for (int p = 0; p < w->size && s == TP_OK; p++) {
        int k = t->peer_tr[p];
        if (k < 0 || t->ops[k]->pair_info == tp_transport_unsupported_pair_info) continue;
        size_t dlen = TP_TRANSPORT_PAIR_MAX;
        if ((s = t->ops[k]->pair_info(t->state[k], &t->views[p], data, &dlen)) != TP_OK) {
            tp_log(TP_LOG_ERROR, "transport", "%s: no connection data for rank %d: %s", t->ops[k]->name, p,
                   tp_status_string(s));
            break;
        }
        if (dlen > TP_TRANSPORT_PAIR_MAX) {
            tp_log(TP_LOG_ERROR, "transport", "%s: %zu bytes of connection data for rank %d exceed the %d allowed",
                   t->ops[k]->name, dlen, p, TP_TRANSPORT_PAIR_MAX);
            s = TP_ERR_INVALID;
            break;
        }
        tp_pair_blob_t b = {.from = w->rank, .to = p, .len = (uint32_t)dlen, .data = data};
        snprintf(b.transport, sizeof(b.transport), "%s", t->ops[k]->name);
        if (tp_pairs_append(&mine, &len, &cap, &b) != 0) s = TP_ERR_NO_MEMORY;
    }
    /* A rank that failed still takes part with nothing, so rank 0 is not left waiting; then it fails. */
    tp_status_t x =
        tp_pairs_exchange(w, s == TP_OK ? mine : NULL, s == TP_OK ? len : 0, &t->pair_msg, &t->pairs, &t->npairs);
    free(mine);
    free(data);
    if (s != TP_OK) return s;
    if (x != TP_OK) return x;
    for (int i = 0; i < t->npairs; i++) { /* both ends must have chosen the same transport for the pair */
        const tp_pair_blob_t *b = &t->pairs[i];
        int k = t->peer_tr[b->from];
        if (k < 0 || strcmp(t->ops[k]->name, b->transport) != 0) {
            tp_log(TP_LOG_ERROR, "transport", "rank %d (host %s) reaches this rank over %s, this rank chose %s for it",
                   b->from, w->peers[b->from].host, b->transport, k < 0 ? "none" : t->ops[k]->name);
            return TP_ERR_UNSUPPORTED;
        }
    }
    return TP_OK;
}

/* On demand, the interface report and NCCL_SOCKET_IFNAME cannot wait for a first call: the first address to dial
 * and the local address the kernel routes it from (a UDP connect sends nothing) stand for the connection. */
static void iface_predict(tp_world_t *w, int p, const char *dial)
{
    char first[96], ip[64], local[96];
    size_t n = strcspn(dial, ",");
    const char *colon = memchr(dial, ':', n);
    if (n >= sizeof(first) || colon == NULL || (size_t)(colon - dial) >= sizeof(ip)) return;
    snprintf(first, sizeof(first), "%.*s", (int)n, dial);
    snprintf(ip, sizeof(ip), "%.*s", (int)(colon - dial), dial);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) return;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        tp_sockaddr_string(fd, 0, local, sizeof(local));
        tp_iface_connected(w, p, local, first);
    }
    close(fd);
}

tp_status_t tp_transports_connect(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    tp_transport_peer_t *peers = calloc((size_t)w->size, sizeof(*peers));
    char *dial = calloc((size_t)w->size, TP_ADDRS_MAX);
    tp_status_t s = TP_OK;
    int lazy = strcmp(tp_config_value("TP_CONNECT"), "eager") != 0;
    if (peers == NULL || dial == NULL) {
        s = TP_ERR_NO_MEMORY;
        goto out;
    }
    for (int k = 0; k < t->n; k++) {
        for (int p = 0; p < w->size; p++) {
            int use = t->peer_tr[p] == k;
            peers[p] = (tp_transport_peer_t){.use = use,
                                             .view = &t->views[p],
                                             .dial = t->addrs[p],
                                             .crowded = t->views[p].same_kernel && t->yield};
            if (!use) continue;
            for (int i = 0; i < t->npairs; i++)
                if (t->pairs[i].from == p) peers[p].pair = t->pairs[i].data, peers[p].pair_len = t->pairs[i].len;
            /* Across hosts an IP transport dials the peer on each /24 both share in turn, then where its bootstrap
             * came from. */
            if ((t->caps[k].flags & TP_TRANSPORT_IP_ENDPOINTS) && t->addrs[p] != NULL) {
                char *d = dial + (size_t)p * TP_ADDRS_MAX;
                snprintf(d, TP_ADDRS_MAX, "%s", t->addrs[p]);
                tp_iface_choose(w, p, d, TP_ADDRS_MAX);
                peers[p].dial = d;
                if (lazy && !t->views[p].same_host && p < w->rank) iface_predict(w, p, d); /* this rank dials */
                else if (lazy && !t->views[p].same_host) tp_iface_predict_inbound(w, p);
            }
        }
        if ((s = t->ops[k]->connect(t->state[k], peers)) != TP_OK) goto out;
    }
out:
    free(peers);
    free(dial);
    return s;
}

void tp_transports_close(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    if (t == NULL) return;
    for (int k = 0; k < t->n; k++) t->ops[k]->close(t->state[k]);
    for (int p = 0; t->addrs != NULL && p < w->size; p++) free(t->addrs[p]);
    free(t->addrs);
    free(t->views);
    free(t->pairs);
    free(t->pair_msg);
    free(t->pfds);
    free(t->peer_tr);
    free(t);
    w->transport_state = NULL;
}

tp_status_t tp_transports_post(tp_world_t *w, tp_xfer_t *x)
{
    tp_transports_t *t = w->transport_state;
    int k = t->peer_tr[x->peer];
    if (k < 0) return TP_ERR_INVALID;
    if ((unsigned)x->mem >= TP_MEM_TYPES || !(t->caps[k].mem_types & (1u << x->mem))) {
        static const char *const names[TP_MEM_TYPES] = {"host", "CUDA", "HIP"};
        tp_log(TP_LOG_ERROR, "transport", "%s cannot move %s memory (to or from rank %d)", t->ops[k]->name,
               (unsigned)x->mem < TP_MEM_TYPES ? names[x->mem] : "unknown", x->peer);
        return TP_ERR_UNSUPPORTED;
    }
    uint32_t want = (x->deliver != NULL ? TP_TRANSPORT_DELIVER : 0) | (x->mirror != NULL ? TP_TRANSPORT_MIRROR : 0);
    if ((t->caps[k].flags & want) != want) { /* the engine checks the flags first: this is its bug */
        tp_log(TP_LOG_ERROR, "transport", "%s cannot %s (to or from rank %d)", t->ops[k]->name,
               x->deliver != NULL ? "lend what it receives" : "mirror what it sends", x->peer);
        return TP_ERR_INVALID;
    }
    return t->ops[k]->post(t->state[k], x);
}

/* Every transport once without waiting; *moved says whether any moved something. */
static tp_status_t progress_all(tp_transports_t *t, int *moved)
{
    *moved = 0;
    for (int k = 0; k < t->n; k++) {
        int m = 0;
        tp_status_t s = t->ops[k]->progress(t->state[k], &m);
        *moved |= m;
        if (s != TP_OK) return s;
    }
    return TP_OK;
}

tp_status_t tp_transports_progress(tp_world_t *w, int wait)
{
    tp_transports_t *t = w->transport_state;
    int moved = 0;
    tp_status_t s = progress_all(t, &moved); /* each transport in turn, then one poll over all */
    if (s != TP_OK || moved || !wait) return s;
    /* the spin's budget starts at its first clock read: a wait that ends within the first looks reads no clock */
    int64_t spin_end = -1, busy_end = 0;
    for (unsigned k = 1; w->spin_us > 0; k++) {
        /* the clock only every few looks while nothing yields: a look is ~20 ns, the clock ~25 more (a VM's vDSO),
         * and a frame that lands is seen one look later (BENCHMARKS.md, fourteenth pass) */
        if (t->yield || k % TP_SPIN_LOOKS == 0) {
            int64_t now = tp_now_ns();
            if (spin_end < 0) spin_end = now + (int64_t)w->spin_us * 1000, busy_end = now + TP_SPIN_BUSY_NS;
            else if (now >= spin_end) break;
            /* a rank that may share a CPU with a peer lets it run: at once when the kernel has more ranks than
             * CPUs, else once it waits longer than a peer on another CPU takes to answer; never where no peer may
             * use its CPUs */
            if (t->yield || (!t->apart && now > busy_end)) sched_yield();
        }
        if ((s = progress_all(t, &moved)) != TP_OK || moved) return s;
    }
    /* Slot 0 is the wake fd: a failure or finalize news wakes the call, which decides whether to go on waiting. */
    int n = 1, blockable = 1, wake = tp_stop_wake_fd();
    for (int k = 0; k < t->n; k++) {
        for (;;) {
            int room = t->pfds_len - n, got = room > 0 ? t->ops[k]->event_fds(t->state[k], t->pfds + n, room) : 1;
            if (got < 0) blockable = 0;
            if (room > 0 && got <= room) {
                n += got > 0 ? got : 0;
                break;
            }
            struct pollfd *np = realloc(t->pfds, (size_t)(n + got) * 2 * sizeof(*np)); /* got: how many it needs */
            if (np == NULL) return TP_ERR_NO_MEMORY;
            t->pfds = np;
            t->pfds_len = (n + got) * 2;
        }
    }
    /* A transport without fds is polled, not waited on: the caller calls again at once. */
    if (n > 1) {
        struct pollfd *fds = t->pfds + (wake < 0);
        t->pfds[0] = (struct pollfd){.fd = wake, .events = POLLIN};
        if (poll(fds, (nfds_t)(n - (wake < 0)), blockable ? 1000 : 0) < 0 && errno != EINTR) return TP_ERR_SYSTEM;
    }
    return progress_all(t, &moved);
}

void tp_transports_cancel(tp_world_t *w)
{
    tp_transports_t *t = w->transport_state;
    for (int k = 0; k < t->n; k++) t->ops[k]->cancel(t->state[k]);
}

uint32_t tp_transports_flags(const tp_world_t *w, int peer)
{
    const tp_transports_t *t = w->transport_state;
    int k = t->peer_tr[peer];
    return k < 0 ? 0 : t->caps[k].flags;
}

const char *tp_transports_name(const tp_world_t *w, int peer, int *ip_endpoints)
{
    const tp_transports_t *t = w->transport_state;
    int k = t->peer_tr[peer];
    if (ip_endpoints != NULL) *ip_endpoints = k >= 0 && (t->caps[k].flags & TP_TRANSPORT_IP_ENDPOINTS);
    return k < 0 ? "self" : t->ops[k]->name;
}
