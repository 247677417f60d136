/* topo_report.c: HCA ports per peer from the records, NCCL's environment to match, and rank 0's one-table report. */
#include "topo_report.h"

#include <arpa/inet.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_iface.h"
#include "runtime_log.h"
#include "topo_gpu.h"
#include "topo_sysfs.h"

extern char **environ;

/* An environment value made one record line: newlines would end the record. */
static void copy_line(char *dst, size_t len, const char *v, const char *fallback)
{
    snprintf(dst, len, "%s", v != NULL && v[0] != '\0' ? v : fallback);
    for (char *p = dst; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

/* This process's CPUs as a list ("0-3,8"), when tprun did not say. */
static void affinity_list(char *out, size_t len)
{
    cpu_set_t set;
    size_t o = 0;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE && o + 16 < len; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) e++;
        o += (size_t)(e > c ? snprintf(out + o, len - o, "%s%d-%d", o ? "," : "", c, e)
                            : snprintf(out + o, len - o, "%s%d", o ? "," : "", c));
        c = e;
    }
}

void tp_topo_publish(int local_rank, int local_size, tp_record_room_t *me)
{
    const char *bus = getenv("TP_GPU_BUS_ID");
    char gpu_pci[512] = "", path[512], err[256], gpu_err[512];
    tp_gpu_t own;
    /* Started by another launcher (torchrun, srun, mpirun; tprun's ranks have TP_BIND_WHY, and a GPU when it gave one):
     * the GPU its local rank takes, as tprun would give it. */
    if (bus == NULL && getenv("TP_BIND_WHY") == NULL && local_rank >= 0 && local_size > 0) {
        if (tp_gpu_of_local_rank(local_rank, local_size, environ, &own, gpu_err, sizeof(gpu_err)) != TP_OK)
            tp_log(TP_LOG_WARN, "topo", "no GPU known for this rank: %s", gpu_err);
        else if (own.bus_id[0] != '\0') bus = own.bus_id;
    }
    copy_line(me->gpu, sizeof(me->gpu), bus, "-");
    if (bus != NULL && bus[0] != '\0' && strchr(bus, '/') == NULL &&
        tp_sysfs_path(path, sizeof(path), "/bus/pci/devices/%s", bus) == 0 &&
        tp_sysfs_realpath(path, gpu_pci, sizeof(gpu_pci)) != 0)
        gpu_pci[0] = '\0';
    const char *cpus = getenv("TP_BIND_CPUS");
    if (cpus != NULL && cpus[0] != '\0') {
        copy_line(me->cpus, sizeof(me->cpus), cpus, "-");
        copy_line(me->numa, sizeof(me->numa), getenv("TP_BIND_NUMA"), "-");
        copy_line(me->bind_why, sizeof(me->bind_why), getenv("TP_BIND_WHY"), "-");
    } else {
        affinity_list(me->cpus, sizeof(me->cpus));
        snprintf(me->numa, sizeof(me->numa), "-");
        snprintf(me->bind_why, sizeof(me->bind_why), "not bound by tprun");
    }
    int gid_index = -1;
    if (tp_hca_gid_index_parse(tp_config_value("TP_GID_INDEX"), &gid_index, err, sizeof(err)) != TP_OK) gid_index = -1;
    tp_hca_gid_t g[TP_HCA_GIDS_MAX];
    tp_hca_skip_t skip[TP_HCA_GIDS_MAX];
    int nskip = 0, n = tp_hca_scan(tp_config_value("TP_HCA"), gid_index, gpu_pci, g, TP_HCA_GIDS_MAX, skip, &nskip,
                                   TP_HCA_GIDS_MAX);
    while (n > 0 && tp_hca_format(g, n, me->hcas, sizeof(me->hcas)) < 0) n--; /* too many: the first ones */
    if (n == 0) me->hcas[0] = '\0';
    size_t o = 0;
    me->hca_skip[0] = '\0';
    for (int i = 0; i < nskip && o + 160 < sizeof(me->hca_skip); i++)
        o += (size_t)snprintf(me->hca_skip + o, sizeof(me->hca_skip) - o, "%s%s:%d %s", i ? "; " : "", skip[i].hca,
                              skip[i].port, skip[i].why);
    const char *spec = tp_config_value("TP_HCA");
    if (n == 0 && spec[0] != '\0')
        tp_log(TP_LOG_WARN, "hca", "TP_HCA=\"%s\" leaves no usable RoCE port (%s)", spec,
               me->hca_skip[0] ? me->hca_skip : "this host has none");
}

static int has_port(const tp_hca_gid_t *g, int n, const tp_hca_gid_t *x)
{
    for (int i = 0; i < n; i++)
        if (g[i].port == x->port && strcmp(g[i].hca, x->hca) == 0) return 1;
    return 0;
}

int tp_topo_hca_choice(const tp_world_t *w, int r, tp_hca_gid_t *out, int max, int *fallback_peer)
{
    tp_hca_gid_t mine[TP_HCA_GIDS_MAX], theirs[TP_HCA_GIDS_MAX];
    int pick[TP_HCA_GIDS_MAX], n = 0;
    int nmine = tp_hca_parse(w->peers[r].hcas, mine, TP_HCA_GIDS_MAX);
    *fallback_peer = -1;
    if (nmine <= 0) return 0;
    for (int p = 0; p < w->size; p++) {
        if (p == r || strcmp(w->peers[p].host, w->peers[r].host) == 0) continue; /* NCCL reaches those without HCAs */
        int nt = tp_hca_parse(w->peers[p].hcas, theirs, TP_HCA_GIDS_MAX);
        if (nt <= 0) continue; /* it has no RoCE port: nothing to agree on */
        int k = tp_hca_pick(mine, nmine, theirs, nt, pick, TP_HCA_GIDS_MAX);
        if (k == 0) {
            k = tp_hca_fallback(mine, nmine, pick, TP_HCA_GIDS_MAX);
            if (*fallback_peer < 0) *fallback_peer = p;
        }
        for (int i = 0; i < k && n < max; i++)
            if (!has_port(out, n, &mine[pick[i]])) out[n++] = mine[pick[i]];
    }
    /* Nearest the GPU first over the union, as each peer's pick is. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j].dist < out[j - 1].dist; j--) {
            tp_hca_gid_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static void ip_text(uint32_t ip, char *out)
{
    struct in_addr a = {htonl(ip)};
    inet_ntop(AF_INET, &a, out, 16);
}

/* Every usable port of rank r once, nearest its GPU first (no peer to match against). */
static int all_ports(const tp_world_t *w, int r, tp_hca_gid_t *out, int max)
{
    tp_hca_gid_t mine[TP_HCA_GIDS_MAX];
    int pick[TP_HCA_GIDS_MAX], nmine = tp_hca_parse(w->peers[r].hcas, mine, TP_HCA_GIDS_MAX);
    int k = nmine > 0 ? tp_hca_fallback(mine, nmine, pick, TP_HCA_GIDS_MAX) : 0;
    for (int i = 0; i < k && i < max; i++) out[i] = mine[pick[i]];
    return k < max ? k : max;
}

/* A record's GIDs for a message: "rocep1s0f0:1 10.1.1.1, ..." or "none". */
static const char *hca_brief(const char *hcas, char *out, size_t len)
{
    tp_hca_gid_t g[TP_HCA_GIDS_MAX];
    int n = tp_hca_parse(hcas, g, TP_HCA_GIDS_MAX);
    size_t o = 0;
    snprintf(out, len, "none");
    for (int i = 0; i < n && o + 64 < len; i++) {
        char ip[16];
        ip_text(g[i].ip, ip);
        o += (size_t)snprintf(out + o, len - o, "%s%s:%d %s", i ? ", " : "", g[i].hca, g[i].port, ip);
    }
    return out;
}

static int has_gid(const tp_hca_gid_t *g, int n, const tp_hca_gid_t *x)
{
    for (int i = 0; i < n; i++)
        if (g[i].port == x->port && g[i].gid == x->gid && strcmp(g[i].hca, x->hca) == 0) return 1;
    return 0;
}

/* Whether a rank on another host than r lists a GID on ip's /24. */
static int remote_lists(const tp_world_t *w, int r, uint32_t ip)
{
    tp_hca_gid_t g[TP_HCA_GIDS_MAX];
    for (int p = 0; p < w->size; p++) {
        if (strcmp(w->peers[p].host, w->peers[r].host) == 0) continue;
        int n = tp_hca_parse(w->peers[p].hcas, g, TP_HCA_GIDS_MAX);
        for (int i = 0; i < n; i++)
            if ((g[i].ip & 0xffffff00u) == (ip & 0xffffff00u)) return 1;
    }
    return 0;
}

/* "rocep1s0f1:1 10.1.2.1 gid 3,..." or "-". */
static void ports_text(const tp_hca_gid_t *g, int n, char *out, size_t len)
{
    size_t o = 0;
    snprintf(out, len, "-");
    for (int i = 0; i < n && o + 64 < len; i++) {
        char ip[16];
        ip_text(g[i].ip, ip);
        o += (size_t)snprintf(out + o, len - o, "%s%s:%d %s gid %d", i ? ", " : "", g[i].hca, g[i].port, ip, g[i].gid);
    }
}

/* Exports NCCL_IB_HCA (exact names and ports) and NCCL_IB_GID_INDEX for this rank's choice, unless the user set
 * them; returns what it did as one phrase for the report. */
static void export_nccl(const tp_hca_gid_t *g, int n, char *did, size_t len)
{
    char hca[512] = "=";
    size_t o = 1;
    int gid = n > 0 ? g[0].gid : -1;
    for (int i = 0; i < n && o + 40 < sizeof(hca); i++) {
        o += (size_t)snprintf(hca + o, sizeof(hca) - o, "%s%s:%d", i ? "," : "", g[i].hca, g[i].port);
        if (g[i].gid != gid) gid = -2;
    }
    const char *user_hca = getenv("NCCL_IB_HCA"), *user_gid = getenv("NCCL_IB_GID_INDEX");
    size_t d = 0;
    did[0] = '\0';
    if (user_hca != NULL)
        d += (size_t)snprintf(did + d, len - d, "NCCL_IB_HCA=%s set by the user: left as it is", user_hca);
    else {
        setenv("NCCL_IB_HCA", hca, 1);
        d += (size_t)snprintf(did + d, len - d, "NCCL_IB_HCA=%s", hca);
    }
    if (d >= len) return;
    if (user_gid != NULL) snprintf(did + d, len - d, "; NCCL_IB_GID_INDEX=%s set by the user: left as it is", user_gid);
    else if (gid >= 0) {
        char v[16];
        snprintf(v, sizeof(v), "%d", gid);
        setenv("NCCL_IB_GID_INDEX", v, 1);
        snprintf(did + d, len - d, " NCCL_IB_GID_INDEX=%d", gid);
    } else {
        snprintf(did + d, len - d, "; NCCL_IB_GID_INDEX not set: the ports' GIDs have different indexes");
        tp_log(TP_LOG_WARN, "hca",
               "the chosen ports' IPv4 RoCE v2 GIDs have different indexes and NCCL takes one: NCCL_IB_GID_INDEX is "
               "not set; set TP_GID_INDEX to one index every port has");
    }
}

/* The report's lines, written at once so no other output splits the table. */
typedef struct tp_out {
    char *buf;
    size_t len, cap;
} tp_out_t;

static void out_add(tp_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_add(tp_out_t *o, const char *fmt, ...)
{
    va_list ap;
    for (int tries = 0; tries < 2; tries++) {
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 + (size_t)n;
        char *b = realloc(o->buf, cap);
        if (b == NULL) return;
        o->buf = b;
        o->cap = cap;
    }
}

#define COLS 8

static void print_table(const tp_world_t *w)
{
    static const char *const head[COLS] = {"host", "rank", "local",     "cpus",
                                           "numa", "gpu",  "hca ports", "tcp to rank 0"};
    size_t cell = 512;
    char *cells = calloc((size_t)(w->size + 1) * COLS, cell);
    tp_out_t o = {malloc(4096), 0, 4096};
    if (cells == NULL || o.buf == NULL) goto err_mem;
    int width[COLS];
    for (int c = 0; c < COLS; c++) {
        snprintf(cells + c * cell, cell, "%s", head[c]);
        width[c] = (int)strlen(head[c]);
    }
    for (int r = 0; r < w->size; r++) {
        const tp_peer_record_t *p = &w->peers[r];
        char *row = cells + (size_t)(r + 1) * COLS * cell;
        tp_hca_gid_t g[TP_HCA_GIDS_MAX];
        int fb, n = tp_topo_hca_choice(w, r, g, TP_HCA_GIDS_MAX, &fb);
        if (n == 0) n = all_ports(w, r, g, TP_HCA_GIDS_MAX);
        snprintf(row, cell, "%s", p->host);
        snprintf(row + cell, cell, "%d", r);
        snprintf(row + 2 * cell, cell, "%d", p->local_rank);
        snprintf(row + 3 * cell, cell, "%s", p->cpus);
        snprintf(row + 4 * cell, cell, "%s", p->numa);
        snprintf(row + 5 * cell, cell, "%s", p->gpu);
        ports_text(g, n, row + 6 * cell, cell);
        tp_iface_describe(w, r, row + 7 * cell, cell);
        for (int c = 0; c < COLS; c++)
            if ((int)strlen(row + c * cell) > width[c]) width[c] = (int)strlen(row + c * cell);
    }
    char prefix[TP_HOST_MAX + 64];
    snprintf(prefix, sizeof(prefix), "tp rank %d (%s:%d) bindings: ", w->rank, w->peers[w->rank].host, (int)getpid());
    for (int r = 0; r <= w->size; r++) {
        out_add(&o, "%s", prefix);
        for (int c = 0; c < COLS; c++)
            out_add(&o, c + 1 < COLS ? "%-*s  " : "%-*s", c + 1 < COLS ? width[c] : 0,
                    cells + ((size_t)r * COLS + (size_t)c) * cell);
        while (o.len > 0 && o.buf[o.len - 1] == ' ') o.len--;
        out_add(&o, "\n");
    }
    for (int r = 0; r < w->size; r++) {
        const tp_peer_record_t *p = &w->peers[r];
        tp_hca_gid_t g[TP_HCA_GIDS_MAX], theirs[TP_HCA_GIDS_MAX];
        int fb, n = tp_topo_hca_choice(w, r, g, TP_HCA_GIDS_MAX, &fb);
        int nmine = tp_hca_parse(p->hcas, theirs, TP_HCA_GIDS_MAX);
        out_add(&o, "%swhy: rank %d: cpus: %s; hca: ", prefix, r, p->bind_why);
        if (nmine <= 0) out_add(&o, "no usable RoCE port");
        else if (n == 0) out_add(&o, "no peer on another host has RoCE ports: every port, nearest the GPU first");
        else if (fb >= 0)
            out_add(&o, "no /24 shared with rank %d (host %s): every port, nearest the GPU first (set TP_HCA)", fb,
                    w->peers[fb].host);
        else if (strcmp(p->gpu, "-") == 0) out_add(&o, "on a /24 its peers on other hosts also list (no GPU known)");
        else out_add(&o, "on a /24 its peers on other hosts also list, nearest the GPU %s first", p->gpu);
        for (const char *k = p->hca_skip; *k != '\0';) { /* "hca:port why; ..." */
            const char *e = strstr(k, "; ");
            int l = e != NULL ? (int)(e - k) : (int)strlen(k);
            out_add(&o, "; not used: %.*s", l, k);
            k += l + (e != NULL ? 2 : 0);
        }
        for (int i = 0; i < nmine; i++)
            if (n > 0 && !has_gid(g, n, &theirs[i]) && !remote_lists(w, r, theirs[i].ip)) {
                char ip[16];
                ip_text(theirs[i].ip & 0xffffff00u, ip);
                out_add(&o, "; not used: %s:%d gid %d: no peer on another host lists %s/24", theirs[i].hca,
                        theirs[i].port, theirs[i].gid, ip);
            }
        out_add(&o, "\n");
    }
    tp_log_write_all(STDERR_FILENO, o.buf, o.len);
err_mem:
    free(o.buf);
    free(cells);
}

void tp_topo_finish(tp_world_t *w)
{
    tp_hca_gid_t g[TP_HCA_GIDS_MAX];
    int fb, rep = 0, n = tp_topo_hca_choice(w, w->rank, g, TP_HCA_GIDS_MAX, &fb);
    char ignore[128], did[1024] = "";
    tp_config_parse_bool("TP_REPORT_BINDINGS", tp_config_value("TP_REPORT_BINDINGS"), &rep, ignore, sizeof(ignore));
    if (fb >= 0) {
        char mine[TP_ADDRS_MAX], theirs[TP_ADDRS_MAX];
        tp_log(TP_LOG_WARN, "hca",
               "rank %d (host %s): no RoCE port on a /24 it also lists (this rank: %s; it: %s); using every port, "
               "nearest the GPU first: set TP_HCA to the ports cabled to it",
               fb, w->peers[fb].host, hca_brief(w->peers[w->rank].hcas, mine, sizeof(mine)),
               hca_brief(w->peers[fb].hcas, theirs, sizeof(theirs)));
    }
    if (n > 0) export_nccl(g, n, did, sizeof(did));
    if (rep && did[0] != '\0') {
        char line[1400];
        int k = snprintf(line, sizeof(line), "tp rank %d (%s:%d) bindings: %s\n", w->rank, w->peers[w->rank].host,
                         (int)getpid(), did);
        if (k > 0) tp_log_write_all(STDERR_FILENO, line, (size_t)(k < (int)sizeof(line) ? k : (int)sizeof(line) - 1));
    }
    if (rep && w->rank == 0) print_table(w);
}
