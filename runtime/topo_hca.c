/* topo_hca.c: RoCE ports and GIDs from sysfs, the TP_HCA grammar, PCI distance, and the per-peer /24 pick. */
#include "topo_hca.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_log.h"
#include "topo_sysfs.h"

tp_status_t tp_hca_spec_check(const char *spec, char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN], qi[TP_QUOTE_LEN];
    const char *p = spec;
    if (*p == '^') p++;
    if (*p == '=') p++;
    if (*p == '\0' && p != spec) goto err_empty;
    for (; *p != '\0';) {
        size_t l = strcspn(p, ",");
        char item[96];
        snprintf(item, sizeof(item), "%.*s", (int)(l < 95 ? l : 95), p);
        const char *colon = strchr(item, ':');
        size_t nl = colon != NULL ? (size_t)(colon - item) : strlen(item);
        int bad = nl == 0 || nl >= 32 || l >= sizeof(item) || strpbrk(item, "^= /") != NULL;
        if (!bad && colon != NULL) {
            char *end;
            errno = 0;
            long port = strtol(colon + 1, &end, 10);
            bad = colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 || port < 1 || port > 255;
        }
        if (bad) {
            snprintf(err, err_len,
                     "TP_HCA: bad entry \"%s\" in \"%s\" (expected HCA names or name:port, comma-separated, after an "
                     "optional ^ to exclude and = for exact names, e.g. =mlx5_0:1,mlx5_1)",
                     tp_quote(item, qi, sizeof(qi)), tp_quote(spec, q, sizeof(q)));
            return TP_ERR_INVALID;
        }
        p += l + (p[l] == ',');
        if (p[-1] == ',' && *p == '\0') {
            snprintf(err, err_len, "TP_HCA: \"%s\" ends with a comma", tp_quote(spec, q, sizeof(q)));
            return TP_ERR_INVALID;
        }
    }
    return TP_OK;
err_empty:
    snprintf(err, err_len, "TP_HCA: \"%s\" names no HCA after ^ or =", tp_quote(spec, q, sizeof(q)));
    return TP_ERR_INVALID;
}

int tp_hca_spec_match(const char *spec, const char *name, int port)
{
    if (spec == NULL || spec[0] == '\0') return 1;
    int exclude = 0, exact = 0, hit = 0;
    if (*spec == '^') exclude = 1, spec++;
    if (*spec == '=') exact = 1, spec++;
    for (const char *p = spec; *p != '\0' && !hit;) {
        size_t l = strcspn(p, ",");
        const char *colon = memchr(p, ':', l);
        size_t nl = colon != NULL ? (size_t)(colon - p) : l;
        int name_ok = exact ? strlen(name) == nl && strncmp(name, p, nl) == 0 : strncmp(name, p, nl) == 0;
        hit = name_ok && (colon == NULL || atoi(colon + 1) == port);
        p += l + (p[l] == ',');
    }
    return exclude ? !hit : hit;
}

tp_status_t tp_hca_gid_index_parse(const char *text, int *out, char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN], *end;
    if (strcmp(text, "auto") == 0) {
        *out = -1;
        return TP_OK;
    }
    errno = 0;
    long v = strtol(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || v > 255) {
        snprintf(err, err_len, "TP_GID_INDEX: expected auto or a GID table index 0 to 255, got \"%s\"",
                 tp_quote(text, q, sizeof(q)));
        return TP_ERR_INVALID;
    }
    *out = (int)v;
    return TP_OK;
}

/* The number of '/'-separated components of a path. */
static int components(const char *p)
{
    int n = 0;
    for (; *p != '\0'; p++)
        if (*p == '/' && p[1] != '\0' && p[1] != '/') n++;
    return n;
}

int tp_hca_pci_distance(const char *a, const char *b)
{
    if (a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0') return TP_HCA_DIST_NONE;
    /* Hops up from each to their deepest common bridge: the whole components both paths begin with. */
    int common = 0;
    for (const char *p = a, *q = b;;) {
        while (*p == '/') p++;
        while (*q == '/') q++;
        size_t lp = strcspn(p, "/"), lq = strcspn(q, "/");
        if (lp == 0 || lp != lq || strncmp(p, q, lp) != 0) break;
        common++;
        p += lp;
        q += lq;
    }
    return components(a) + components(b) - 2 * common;
}

/* The IPv4 address of an IPv4-mapped GID text ("0000:...:ffff:0a00:0001"); 0 when it is not one. */
static uint32_t gid_ipv4(const char *text)
{
    unsigned short h[8];
    if (strlen(text) != 39) return 0;
    for (int i = 0; i < 8; i++) {
        char *end;
        if ((i < 7 && text[i * 5 + 4] != ':')) return 0;
        h[i] = (unsigned short)strtoul(text + i * 5, &end, 16);
        if (end != text + i * 5 + 4) return 0;
    }
    for (int i = 0; i < 5; i++)
        if (h[i] != 0) return 0;
    if (h[5] != 0xffff) return 0;
    uint32_t ip = ((uint32_t)h[6] << 16) | h[7];
    return ip;
}

static void add_skip(tp_hca_skip_t *skip, int *nskip, int max, const char *hca, int port, const char *why)
{
    if (skip == NULL || *nskip >= max) return;
    tp_hca_skip_t *s = &skip[(*nskip)++];
    snprintf(s->hca, sizeof(s->hca), "%s", hca);
    s->port = port;
    snprintf(s->why, sizeof(s->why), "%s", why);
}

/* The port's usable GIDs into out; returns how many were added, or -1 with why set when none. */
static int scan_port(const char *hca, int port, int gid_index, int dist, tp_hca_gid_t *out, int max, char *why,
                     size_t why_len)
{
    char path[512], line[128], **idx = NULL;
    tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/ports/%d/gids", hca, port);
    int n = tp_sysfs_list(path, &idx), found = 0;
    if (n < 0) {
        snprintf(why, why_len, "no GID table (%s)", strerror(-n));
        return -1;
    }
    for (int i = 0; i < n && found < max; i++) {
        char *end;
        long g = strtol(idx[i], &end, 10);
        if (*end != '\0' || g < 0 || (gid_index >= 0 && g != gid_index)) continue;
        /* Empty, link-local and entries the kernel cannot describe (EINVAL) are skipped, as NCCL does. */
        tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/ports/%d/gids/%ld", hca, port, g);
        if (tp_sysfs_read_line(path, line, sizeof(line)) != 0) continue;
        uint32_t ip = gid_ipv4(line);
        if (ip == 0) continue;
        tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/ports/%d/gid_attrs/types/%ld", hca, port, g);
        if (tp_sysfs_read_line(path, line, sizeof(line)) != 0 || strcasecmp(line, "RoCE v2") != 0) continue;
        tp_hca_gid_t *o = &out[found++];
        memset(o, 0, sizeof(*o));
        snprintf(o->hca, sizeof(o->hca), "%s", hca);
        o->port = port;
        o->gid = (int)g;
        o->ip = ip;
        o->dist = dist;
        tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%ld", hca, port, g);
        if (tp_sysfs_read_line(path, line, sizeof(line)) == 0) snprintf(o->netdev, sizeof(o->netdev), "%s", line);
    }
    free(idx);
    if (found > 0) return found;
    if (gid_index >= 0) snprintf(why, why_len, "no IPv4 RoCE v2 GID at TP_GID_INDEX=%d", gid_index);
    else snprintf(why, why_len, "no IPv4 RoCE v2 GID");
    return -1;
}

int tp_hca_scan(const char *spec, int gid_index, const char *gpu_pci, tp_hca_gid_t *out, int max, tp_hca_skip_t *skip,
                int *nskip, int max_skip)
{
    char path[512], line[128], why[96], **hcas = NULL;
    int n = 0, ns = 0;
    tp_sysfs_path(path, sizeof(path), "/class/infiniband");
    int nh = tp_sysfs_list(path, &hcas);
    for (int h = 0; h < nh && n < max; h++) {
        if (strlen(hcas[h]) >= sizeof(out->hca)) continue;
        char pci[512] = "", **ports = NULL;
        tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/device", hcas[h]);
        if (tp_sysfs_realpath(path, pci, sizeof(pci)) != 0) pci[0] = '\0';
        int dist = tp_hca_pci_distance(gpu_pci, pci);
        tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/ports", hcas[h]);
        int np = tp_sysfs_list(path, &ports);
        for (int i = 0; i < np && n < max; i++) {
            char *end;
            long port = strtol(ports[i], &end, 10);
            if (*end != '\0' || port < 1 || port > 255) continue;
            if (!tp_hca_spec_match(spec, hcas[h], (int)port)) {
                add_skip(skip, &ns, max_skip, hcas[h], (int)port, "excluded by TP_HCA");
                continue;
            }
            tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/ports/%ld/state", hcas[h], port);
            if (tp_sysfs_read_line(path, line, sizeof(line)) != 0 || strstr(line, "ACTIVE") == NULL) {
                snprintf(why, sizeof(why), "not active (state %s)", line[0] ? line : "unreadable");
                add_skip(skip, &ns, max_skip, hcas[h], (int)port, why);
                continue;
            }
            tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/ports/%ld/link_layer", hcas[h], port);
            if (tp_sysfs_read_line(path, line, sizeof(line)) != 0 || strcmp(line, "Ethernet") != 0) {
                snprintf(why, sizeof(why), "link layer %s, not Ethernet (RoCE)", line[0] ? line : "unreadable");
                add_skip(skip, &ns, max_skip, hcas[h], (int)port, why);
                continue;
            }
            int k = scan_port(hcas[h], (int)port, gid_index, dist, out + n, max - n, why, sizeof(why));
            if (k < 0) add_skip(skip, &ns, max_skip, hcas[h], (int)port, why);
            else n += k;
            line[0] = '\0';
        }
        free(ports);
    }
    free(hcas);
    if (nskip != NULL) *nskip = ns;
    return n;
}

int tp_hca_format(const tp_hca_gid_t *g, int n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        struct in_addr a = {htonl(g[i].ip)};
        char ip[16];
        inet_ntop(AF_INET, &a, ip, sizeof(ip));
        int w = snprintf(out + used, len - used, "%s%s:%d:%d:%s:%d", i ? "," : "", g[i].hca, g[i].port, g[i].gid, ip,
                         g[i].dist);
        if (w < 0 || (size_t)w >= len - used) return -1;
        used += (size_t)w;
    }
    return (int)used;
}

int tp_hca_parse(const char *text, tp_hca_gid_t *out, int max)
{
    int n = 0;
    for (const char *p = text; *p != '\0';) {
        size_t l = strcspn(p, ",");
        char item[96], name[32], ip[16];
        int port, gid, dist, used = 0;
        if (l == 0 || l >= sizeof(item) || n >= max) return -1;
        memcpy(item, p, l);
        item[l] = '\0';
        struct in_addr a;
        if (sscanf(item, "%31[^:]:%d:%d:%15[0-9.]:%d%n", name, &port, &gid, ip, &dist, &used) != 5 ||
            (size_t)used != l || port < 1 || port > 255 || gid < 0 || gid > 255 || dist < 0 ||
            dist > TP_HCA_DIST_NONE || inet_pton(AF_INET, ip, &a) != 1)
            return -1;
        memset(&out[n], 0, sizeof(out[n]));
        snprintf(out[n].hca, sizeof(out[n].hca), "%s", name);
        out[n].port = port;
        out[n].gid = gid;
        out[n].ip = ntohl(a.s_addr);
        out[n++].dist = dist;
        p += l + (p[l] == ',');
        if (p[-1] == ',' && *p == '\0') return -1;
    }
    return n;
}

static int same_port(const tp_hca_gid_t *a, const tp_hca_gid_t *b)
{
    return a->port == b->port && strcmp(a->hca, b->hca) == 0;
}

/* Keeps the first GID of each port among picks, then orders them nearest the GPU first (stable). */
static int order_picks(const tp_hca_gid_t *mine, int *pick, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= same_port(&mine[pick[j]], &mine[pick[i]]);
        if (!dup) pick[k++] = pick[i];
    }
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && mine[pick[j]].dist < mine[pick[j - 1]].dist; j--) {
            int t = pick[j];
            pick[j] = pick[j - 1];
            pick[j - 1] = t;
        }
    return k;
}

int tp_hca_pick(const tp_hca_gid_t *mine, int nmine, const tp_hca_gid_t *peer, int npeer, int *pick, int max)
{
    int n = 0;
    for (int i = 0; i < nmine && n < max; i++) {
        int shared = 0;
        for (int j = 0; j < npeer && !shared; j++) shared = (mine[i].ip & 0xffffff00u) == (peer[j].ip & 0xffffff00u);
        if (shared) pick[n++] = i;
    }
    return order_picks(mine, pick, n);
}

int tp_hca_fallback(const tp_hca_gid_t *mine, int nmine, int *pick, int max)
{
    int n = 0;
    for (int i = 0; i < nmine && n < max; i++) pick[n++] = i;
    return order_picks(mine, pick, n);
}
