/* runtime_iface.c: this host's IPv4 interfaces, the TP_IFNAME filter, and per-peer address candidates. */
#include "runtime_iface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_log.h"
#include "runtime_world.h"

int tp_ifname_match(const char *spec, const char *name)
{
    if (spec == NULL || spec[0] == '\0') return 1;
    int exclude = 0, exact = 0;
    if (*spec == '^') exclude = 1, spec++;
    if (*spec == '=') exact = 1, spec++;
    int hit = 0;
    for (const char *p = spec; *p != '\0' && !hit;) {
        size_t len = strcspn(p, ",");
        if (len > 0) hit = exact ? strlen(name) == len && strncmp(name, p, len) == 0 : strncmp(name, p, len) == 0;
        p += len + (p[len] == ',');
    }
    return exclude ? !hit : hit;
}

static uint32_t ip_of(const char *text)
{
    struct in_addr a;
    return inet_pton(AF_INET, text, &a) == 1 ? ntohl(a.s_addr) : 0;
}

int tp_iface_list(const char *spec, tp_iface_t *out, int max, tp_iface_t *rejected, int *num_rejected)
{
    struct ifaddrs *all = NULL;
    int n = 0, nr = 0;
    if (getifaddrs(&all) != 0) return 0;
    for (struct ifaddrs *i = all; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        tp_iface_t f;
        memset(&f, 0, sizeof(f));
        snprintf(f.name, sizeof(f.name), "%s", i->ifa_name);
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, f.ip, sizeof(f.ip));
        uint32_t mask = i->ifa_netmask ? ntohl(((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr) : 0;
        while (mask & 0x80000000u) f.prefix++, mask <<= 1;
        if (!tp_ifname_match(spec, f.name)) {
            if (rejected != NULL && nr < max) rejected[nr++] = f;
            continue;
        }
        if (n < max) out[n++] = f;
    }
    freeifaddrs(all);
    if (num_rejected != NULL) *num_rejected = nr;
    return n;
}

tp_status_t tp_iface_boot_ips(const char *spec, const char *preferred, char *out, size_t len)
{
    tp_iface_t ifs[TP_IFACES_MAX];
    int n = tp_iface_list(spec, ifs, TP_IFACES_MAX, NULL, NULL), with_spec = spec != NULL && spec[0] != '\0';
    if (with_spec && n == 0) return TP_ERR_NOT_FOUND;
    size_t o = (size_t)snprintf(out, len, "%s", with_spec ? "" : preferred);
    for (int i = 0; i < n && o + 17 < len; i++)
        if (with_spec || strcmp(ifs[i].ip, preferred) != 0)
            o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", ifs[i].ip);
    return TP_OK;
}

int tp_iface_format(const tp_iface_t *ifs, int n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        int w = snprintf(out + used, len - used, "%s%s:%s/%d", i ? "," : "", ifs[i].name, ifs[i].ip, ifs[i].prefix);
        if (w < 0 || (size_t)w >= len - used) return -1;
        used += (size_t)w;
    }
    return (int)used;
}

int tp_iface_parse(const char *text, tp_iface_t *out, int max)
{
    int n = 0;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ",");
        char item[80], *colon, *slash;
        if (len == 0 || len >= sizeof(item) || n >= max) return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        if ((colon = strrchr(item, ':')) == NULL || (slash = strchr(colon, '/')) == NULL) return -1;
        *colon = *slash = '\0';
        char *end;
        long prefix = strtol(slash + 1, &end, 10);
        struct in_addr a;
        if (colon == item || (size_t)(colon - item) >= sizeof(out[n].name) || *end != '\0' || slash[1] == '\0' ||
            prefix < 0 || prefix > 32 || inet_pton(AF_INET, colon + 1, &a) != 1)
            return -1;
        memcpy(out[n].name, item, (size_t)(colon - item) + 1);
        snprintf(out[n].ip, sizeof(out[n].ip), "%.15s", colon + 1);
        out[n++].prefix = (int)prefix;
        p += len + (p[len] == ',');
        if (p[-1] == ',' && *p == '\0') return -1;
    }
    return n;
}

int tp_iface_candidates(const tp_iface_t *mine, int nmine, const tp_iface_t *peer, int npeer, const char *routed_ip,
                        char cands[][16], char via[][32], int max, int *shared)
{
    int n = 0;
    for (int i = 0; i < nmine && n < max; i++) {
        uint32_t net = ip_of(mine[i].ip) & 0xffffff00u;
        for (int j = 0; j < npeer && n < max; j++) {
            if ((ip_of(peer[j].ip) & 0xffffff00u) != net) continue;
            int dup = 0;
            for (int k = 0; k < n; k++) dup |= strcmp(cands[k], peer[j].ip) == 0;
            if (dup) continue;
            snprintf(cands[n], 16, "%s", peer[j].ip);
            snprintf(via[n], 32, "%s", mine[i].name);
            n++;
        }
    }
    *shared = n;
    int dup = 0;
    for (int k = 0; k < n; k++) dup |= strcmp(cands[k], routed_ip) == 0;
    if (!dup && n < max && routed_ip[0] != '\0') {
        snprintf(cands[n], 16, "%s", routed_ip);
        via[n][0] = '\0';
        n++;
    }
    return n;
}

/* ---- the world's links ---- */

typedef struct tp_iface_link {
    char local_ip[16], peer_ip[16]; /* the connection's two ends */
    int shared;                     /* on a /24 both share (else the routed address) */
    int same_host;                  /* over loopback */
} tp_iface_link_t;

typedef struct tp_iface_state {
    tp_iface_t mine[TP_IFACES_MAX];
    int nmine;
    tp_iface_link_t *links; /* by world rank */
    int any;                /* some peer is on another host */
} tp_iface_state_t;

void tp_iface_publish(char *out, size_t len)
{
    tp_iface_t ifs[TP_IFACES_MAX];
    int n = tp_iface_list(tp_config_value("TP_IFNAME"), ifs, TP_IFACES_MAX, NULL, NULL);
    while (n > 0 && tp_iface_format(ifs, n, out, len) < 0) n--; /* too many to publish: the first ones */
    if (n == 0) out[0] = '\0';
}

static int is_loopback_ip(const char *ip) { return strncmp(ip, "127.", 4) == 0 || ip[0] == '\0'; }

static tp_iface_state_t *state_of(tp_world_t *w)
{
    if (w->iface_state == NULL) {
        tp_iface_state_t *st = calloc(1, sizeof(*st));
        if (st == NULL) return NULL;
        st->links = calloc((size_t)w->size, sizeof(*st->links));
        if (st->links == NULL) {
            free(st);
            return NULL;
        }
        st->nmine = tp_iface_parse(w->peers[w->rank].ifaces, st->mine, TP_IFACES_MAX);
        if (st->nmine < 0) st->nmine = 0;
        w->iface_state = st;
    }
    return w->iface_state;
}

/*
 * The pair's addresses as the dialer tries them, best first (cands; *shared: how many on a /24 both have): this
 * rank's interfaces against peer p's when this rank dials (p < rank), else p's against ours, as p computes them.
 * theirs gets p's interfaces (*nt of them).
 */
static int pair_candidates(const tp_world_t *w, const tp_iface_state_t *st, int p, tp_iface_t *theirs, int *nt,
                           char cands[][16], int *shared)
{
    char via[TP_IFACE_CANDIDATES][32];
    int n = tp_iface_parse(w->peers[p].ifaces, theirs, TP_IFACES_MAX);
    *nt = n > 0 ? n : 0;
    *shared = 0;
    if (p < w->rank)
        return tp_iface_candidates(st->mine, st->nmine, theirs, *nt, w->peers[p].boot_ip, cands, via,
                                   TP_IFACE_CANDIDATES, shared);
    return tp_iface_candidates(theirs, *nt, st->mine, st->nmine, w->peers[w->rank].boot_ip, cands, via,
                               TP_IFACE_CANDIDATES, shared);
}

void tp_iface_choose(tp_world_t *w, int p, char *addr, size_t len)
{
    const char *colon = strrchr(addr, ':');
    tp_iface_state_t *st = state_of(w);
    if (colon == NULL || st == NULL || is_loopback_ip(w->advertise_ip) || is_loopback_ip(w->peers[p].boot_ip)) return;
    st->any = 1;
    tp_iface_link_t *l = &st->links[p];
    char port[16];
    snprintf(port, sizeof(port), "%.15s", colon + 1);
    if (strcmp(w->peers[p].host, w->peers[w->rank].host) == 0) {
        /* Same host (as the launcher named it): loopback, whatever interfaces the two "share". */
        l->same_host = 1;
        if (p < w->rank) snprintf(addr, len, "127.0.0.1:%s", port);
        return;
    }
    if (p > w->rank) return; /* the peer dials this rank, on its own list */
    tp_iface_t theirs[TP_IFACES_MAX];
    char cands[TP_IFACE_CANDIDATES][16];
    int nt, shared, n = pair_candidates(w, st, p, theirs, &nt, cands, &shared);
    if (shared == 0)
        tp_log(TP_LOG_WARN, "iface",
               "rank %d (host %s): no /24 shared with it (this rank: %s; it: %s)%s; using "
               "the routed address %s, where its bootstrap connection came from",
               p, w->peers[p].host, w->peers[w->rank].ifaces[0] ? w->peers[w->rank].ifaces : "none",
               w->peers[p].ifaces[0] ? w->peers[p].ifaces : "none",
               tp_config_value("TP_IFNAME")[0] ? " (after TP_IFNAME)" : "", n > 0 ? cands[0] : w->peers[p].boot_ip);
    size_t o = 0;
    for (int i = 0; i < n && o + 24 < len; i++)
        o += (size_t)snprintf(addr + o, len - o, "%s%s:%s", i ? "," : "", cands[i], port);
    if (n == 0) snprintf(addr, len, "%s:%s", w->peers[p].boot_ip, port);
}

void tp_iface_predict_inbound(tp_world_t *w, int p)
{
    tp_iface_state_t *st = state_of(w);
    if (st == NULL || p <= w->rank || st->links[p].same_host || is_loopback_ip(w->advertise_ip) ||
        is_loopback_ip(w->peers[p].boot_ip))
        return;
    tp_iface_t theirs[TP_IFACES_MAX];
    char cands[TP_IFACE_CANDIDATES][16];
    int nt, shared, n = pair_candidates(w, st, p, theirs, &nt, cands, &shared); /* the peer's own choice */
    if (n == 0) return;
    const char *remote = w->peers[p].boot_ip;
    for (int j = 0; j < nt; j++)
        if ((ip_of(theirs[j].ip) & 0xffffff00u) == (ip_of(cands[0]) & 0xffffff00u)) remote = theirs[j].ip;
    tp_iface_connected(w, p, cands[0], remote);
}

/* "ip:port" to "ip". */
static void ip_part(const char *endpoint, char *ip)
{
    const char *colon = strrchr(endpoint, ':');
    size_t n = colon != NULL ? (size_t)(colon - endpoint) : strlen(endpoint);
    snprintf(ip, 16, "%.*s", (int)(n < 15 ? n : 15), endpoint);
}

void tp_iface_connected(void *ctx, int peer, const char *local, const char *remote)
{
    tp_world_t *w = ctx;
    tp_iface_state_t *st = state_of(w);
    if (st == NULL || peer < 0 || peer >= w->size || st->links[peer].same_host) return;
    tp_iface_link_t *l = &st->links[peer];
    if (l->local_ip[0] != '\0') return; /* the pair's first connection is the one reported */
    ip_part(local, l->local_ip);
    ip_part(remote, l->peer_ip);
    l->shared = 0;
    for (int i = 0; i < st->nmine; i++)
        if (strcmp(st->mine[i].ip, l->local_ip) == 0 &&
            (ip_of(st->mine[i].ip) & 0xffffff00u) == (ip_of(l->peer_ip) & 0xffffff00u))
            l->shared = 1;
}

static const char *iface_of_ip(const tp_iface_state_t *st, const char *ip)
{
    for (int i = 0; i < st->nmine; i++)
        if (strcmp(st->mine[i].ip, ip) == 0) return st->mine[i].name;
    return NULL;
}

/* The per-peer detail behind --report-bindings' table: debug level (TP_LOG_LEVEL=debug). */
static void report(const tp_world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(const tp_world_t *w, const char *fmt, ...)
{
    (void)w;
    va_list ap;
    va_start(ap, fmt);
    tp_log_v(TP_LOG_DEBUG, "iface", fmt, ap);
    va_end(ap);
}

/* A peer reached without a network interface (shm, or TCP when the whole job is on loopback). */
static void report_same_host(const tp_world_t *w, int p, const char *(*transport_of)(const tp_world_t *, int, int *))
{
    int ip = 0;
    const char *name = transport_of(w, p, &ip);
    report(w, "rank %d (host %s): %s, the same host (%s)", p, w->peers[p].host, name,
           ip ? "over loopback 127.0.0.1" : "no network interface");
}

void tp_iface_finish(tp_world_t *w, const char *(*transport_of)(const tp_world_t *w, int peer, int *ip_endpoints))
{
    tp_iface_state_t *st = w->iface_state;
    int rep = tp_log_enabled(TP_LOG_DEBUG);
    if (st == NULL || !st->any) { /* one host: no interface was chosen, but every peer still gets its line */
        for (int p = 0; rep && p < w->size; p++)
            if (p != w->rank) report_same_host(w, p, transport_of);
        return;
    }
    char used[256] = "";
    size_t ulen = 0;
    for (int p = 0; p < w->size; p++) {
        tp_iface_link_t *l = &st->links[p];
        if (p == w->rank) continue;
        if (l->local_ip[0] == '\0' && !l->same_host) {
            if (rep) report_same_host(w, p, transport_of);
            continue;
        }
        if (l->same_host) {
            if (rep) report(w, "rank %d (host %s): loopback, the same host", p, w->peers[p].host);
            continue;
        }
        const char *name = iface_of_ip(st, l->local_ip);
        if (name == NULL) name = "?";
        char key[40];
        snprintf(key, sizeof(key), ",%s,", name);
        char have[260];
        snprintf(have, sizeof(have), ",%s,", used);
        if (strstr(have, key) == NULL && ulen < sizeof(used))
            ulen += (size_t)snprintf(used + ulen, sizeof(used) - ulen, "%s%s", ulen ? "," : "", name);
        if (rep)
            report(w, "rank %d (host %s): %s %s %s %s (%s; %s)", p, w->peers[p].host, name, l->local_ip,
                   p < w->rank ? "->" : "<-", l->peer_ip, l->shared ? "a /24 both share" : "routed: no /24 shared",
                   strcmp(tp_config_value("TP_CONNECT"), "eager") == 0 ? "the TCP connect on it succeeded"
                                                                       : "the first address dialed on first use");
    }
    if (rep) {
        tp_iface_t rejected[TP_IFACES_MAX], all[TP_IFACES_MAX];
        int nrej = 0;
        tp_iface_list(tp_config_value("TP_IFNAME"), all, TP_IFACES_MAX, rejected, &nrej);
        for (int i = 0; i < nrej; i++)
            report(w, "%s %s: not used: excluded by TP_IFNAME=\"%s\"", rejected[i].name, rejected[i].ip,
                   tp_config_value("TP_IFNAME"));
        for (int i = 0; i < st->nmine; i++) {
            char key[40], have[260];
            snprintf(key, sizeof(key), ",%s,", st->mine[i].name);
            snprintf(have, sizeof(have), ",%s,", used);
            if (strstr(have, key) != NULL) continue;
            uint32_t net = ip_of(st->mine[i].ip) & 0xffffff00u;
            int peer_has = -1;
            for (int p = 0; p < w->size && peer_has < 0; p++) {
                tp_iface_t theirs[TP_IFACES_MAX];
                int nt = p == w->rank ? 0 : tp_iface_parse(w->peers[p].ifaces, theirs, TP_IFACES_MAX);
                for (int j = 0; j < nt; j++)
                    if ((ip_of(theirs[j].ip) & 0xffffff00u) == net) peer_has = p;
            }
            char subnet[20];
            struct in_addr a = {htonl(net)};
            inet_ntop(AF_INET, &a, subnet, sizeof(subnet));
            if (peer_has < 0) report(w, "%s %s: not used: no peer has %s/24", st->mine[i].name, st->mine[i].ip, subnet);
            else
                report(w, "%s %s: not used: rank %d shares %s/24, but an interface listed before it was chosen",
                       st->mine[i].name, st->mine[i].ip, peer_has, subnet);
        }
    }
    /* NCCL and Gloo, created by the engine after tp_init, use the same interfaces. */
    if (used[0] != '\0') {
        char nccl[260];
        snprintf(nccl, sizeof(nccl), "=%s", used);
        if (getenv("NCCL_SOCKET_IFNAME") != NULL && rep)
            report(w, "NCCL_SOCKET_IFNAME is already set (\"%s\"): left as it is", getenv("NCCL_SOCKET_IFNAME"));
        setenv("NCCL_SOCKET_IFNAME", nccl, 0);
        setenv("GLOO_SOCKET_IFNAME", used, 0);
        if (rep)
            report(w, "NCCL_SOCKET_IFNAME=%s GLOO_SOCKET_IFNAME=%s", getenv("NCCL_SOCKET_IFNAME"),
                   getenv("GLOO_SOCKET_IFNAME"));
    }
}

void tp_iface_describe(const tp_world_t *w, int p, char *out, size_t len)
{
    const tp_iface_state_t *st = w->iface_state;
    snprintf(out, len, "%s", p != w->rank && strcmp(w->peers[p].host, w->peers[w->rank].host) == 0 ? "same host" : "-");
    if (st == NULL || !st->any) return;
    if (p == w->rank) { /* this rank's interfaces toward every peer */
        size_t o = 0;
        for (int q = 0; q < w->size; q++) {
            const char *name = st->links[q].local_ip[0] ? iface_of_ip(st, st->links[q].local_ip) : NULL;
            char key[40], have[260];
            snprintf(key, sizeof(key), ",%s,", name ? name : "");
            snprintf(have, sizeof(have), ",%.*s,", (int)o, out);
            if (name == NULL || (o > 0 && strstr(have, key) != NULL)) continue;
            o += (size_t)snprintf(out + o, len > o ? len - o : 0, "%s%s %s", o ? "," : "", name, st->links[q].local_ip);
        }
        if (o == 0) snprintf(out, len, "-");
        return;
    }
    const tp_iface_link_t *l = &st->links[p];
    if (l->same_host || l->local_ip[0] == '\0') {
        snprintf(out, len, "same host");
        return;
    }
    tp_iface_t theirs[TP_IFACES_MAX];
    int nt = tp_iface_parse(w->peers[p].ifaces, theirs, TP_IFACES_MAX);
    const char *name = "?";
    for (int j = 0; j < nt; j++)
        if (strcmp(theirs[j].ip, l->peer_ip) == 0) name = theirs[j].name;
    snprintf(out, len, "%s %s", name, l->peer_ip);
}

void tp_iface_free(tp_world_t *w)
{
    tp_iface_state_t *st = w->iface_state;
    if (st == NULL) return;
    free(st->links);
    free(st);
    w->iface_state = NULL;
}
