/* runtime_record.c: peer records as strict key=value text, settings comparison, rank lists. */
#include "runtime_record.h"

#include "runtime_log.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime_iface.h"
#include "topo_hca.h"

void tp_record_room_point(tp_record_room_t *room, tp_peer_record_t *r)
{
    r->host = room->host;
    r->boot_ip = room->boot_ip;
    r->kernel = room->kernel;
    r->addresses = room->addresses;
    r->ifaces = room->ifaces;
    r->hcas = room->hcas;
    r->hca_skip = room->hca_skip;
    r->gpu = room->gpu;
    r->cpus = room->cpus;
    r->numa = room->numa;
    r->bind_why = room->bind_why;
}

int tp_setting_valid(const char *key, const char *value, char *why, size_t why_len)
{
    size_t klen = key ? strlen(key) : 0;
    if (klen == 0 || klen > TP_SETTING_KEY_MAX) {
        snprintf(why, why_len, "setting key must have 1 to %d characters", TP_SETTING_KEY_MAX);
        return 0;
    }
    for (size_t i = 0; i < klen; i++) {
        char c = key[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-')) {
            snprintf(why, why_len, "setting key \"%s\" may hold only letters, digits, '_', '.' and '-'", key);
            return 0;
        }
    }
    if (value == NULL || strlen(value) > TP_SETTING_VALUE_MAX || strchr(value, '\n') != NULL) {
        snprintf(why, why_len, "setting %s: the value must be one line of at most %d bytes", key, TP_SETTING_VALUE_MAX);
        return 0;
    }
    return 1;
}

void tp_kernel_identity(char *out, size_t len)
{
    char boot_id[48] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot_id, sizeof(boot_id), f) == NULL) boot_id[0] = '\0';
        fclose(f);
    }
    boot_id[strcspn(boot_id, "\n")] = '\0';
    struct stat st;
    if (boot_id[0] == '\0' || stat("/proc/self/ns/pid", &st) != 0) {
        out[0] = '\0'; /* unknown: no peer will be watched through its pid */
        return;
    }
    snprintf(out, len, "%s/%llu", boot_id, (unsigned long long)st.st_ino);
}

static int parse_int_field(const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno != 0 || x < lo || x > hi) return 0;
    *out = (int)x;
    return 1;
}

static int ifaces_valid(const char *v)
{
    tp_iface_t ifs[TP_IFACES_MAX];
    return tp_iface_parse(v, ifs, TP_IFACES_MAX) >= 0;
}

static int hcas_valid(const char *v)
{
    tp_hca_gid_t g[TP_HCA_GIDS_MAX];
    return tp_hca_parse(v, g, TP_HCA_GIDS_MAX) >= 0;
}

static int nonempty(const char *v) { return v[0] != '\0'; }

/* A record's string fields: where the pointer is, the bound (tp_record_room_t's), and what else must hold. */
typedef struct record_string {
    const char *key;
    size_t at;
    size_t bound;
    int (*valid)(const char *v);
} record_string_t;

#define RECORD_STRING(name) #name, offsetof(tp_peer_record_t, name), sizeof(((tp_record_room_t *)0)->name)
static const record_string_t record_strings[] = {
    {RECORD_STRING(host), nonempty},       {RECORD_STRING(boot_ip), NULL},  {RECORD_STRING(addresses), NULL},
    {RECORD_STRING(ifaces), ifaces_valid}, {RECORD_STRING(kernel), NULL},   {RECORD_STRING(hcas), hcas_valid},
    {RECORD_STRING(hca_skip), NULL},       {RECORD_STRING(gpu), NULL},      {RECORD_STRING(cpus), NULL},
    {RECORD_STRING(numa), NULL},           {RECORD_STRING(bind_why), NULL},
};
#define RECORD_INTS    5 /* rank, pid, local_rank, local_size, node_rank: bits 0-4; the strings follow */
#define RECORD_STRINGS (sizeof(record_strings) / sizeof(record_strings[0]))
#define RECORD_SEEN    ((1u << (RECORD_INTS + RECORD_STRINGS)) - 1)
#define SAME_MARK      '^' /* "key^": in a table, the previous record's value (ranks of a host share most fields) */

static const char *record_string(const tp_peer_record_t *r, size_t i)
{
    return *(const char *const *)((const char *)r + record_strings[i].at);
}

int tp_record_format_after(const tp_peer_record_t *r, const tp_peer_record_t *prev, const tp_setting_t *settings,
                           int num_settings, char *out, size_t out_len)
{
    size_t used = 0;
    int n = snprintf(out, out_len, "rank=%d\npid=%d\nlocal_rank=%d\nlocal_size=%d\nnode_rank=%d\n", r->rank,
                     (int)r->pid, r->local_rank, r->local_size, r->node_rank);
    for (size_t i = 0; n >= 0 && (size_t)n < out_len - used; i++) {
        used += (size_t)n;
        if (i == RECORD_STRINGS) break;
        const char *v = record_string(r, i);
        if (prev != NULL && strcmp(v, record_string(prev, i)) == 0)
            n = snprintf(out + used, out_len - used, "%s%c\n", record_strings[i].key, SAME_MARK);
        else n = snprintf(out + used, out_len - used, "%s=%s\n", record_strings[i].key, v);
    }
    if (n < 0 || (size_t)n >= out_len - used) return -1;
    for (int i = 0; i < num_settings; i++) {
        n = snprintf(out + used, out_len - used, "set.%s=%s\n", settings[i].key, settings[i].value);
        if (n < 0 || (size_t)n >= out_len - used) return -1;
        used += (size_t)n;
    }
    n = snprintf(out + used, out_len - used, "end\n");
    if (n < 0 || (size_t)n >= out_len - used) return -1;
    return (int)(used + (size_t)n);
}

int tp_record_format(const tp_peer_record_t *r, const tp_setting_t *settings, int num_settings, char *out,
                     size_t out_len)
{
    return tp_record_format_after(r, NULL, settings, num_settings, out, out_len);
}

/* "key^" in a table: the string field k takes the previous record's value; its bit, or 0 when k is not one. */
static unsigned same_field(tp_peer_record_t *r, const tp_peer_record_t *prev, const char *k)
{
    for (size_t i = 0; i < RECORD_STRINGS; i++) {
        if (strcmp(k, record_strings[i].key) != 0) continue;
        *(const char **)((char *)r + record_strings[i].at) = record_string(prev, i);
        return 1u << (RECORD_INTS + i);
    }
    return 0;
}

/* Sets a string field from v (a NUL-terminated line in the record's text); its bit, or 0 when k is not one. */
static unsigned string_field(tp_peer_record_t *r, const char *k, const char *v, int *ok)
{
    for (size_t i = 0; i < RECORD_STRINGS; i++) {
        const record_string_t *f = &record_strings[i];
        if (strcmp(k, f->key) != 0) continue;
        *ok = strlen(v) < f->bound && (f->valid == NULL || f->valid(v));
        *(const char **)((char *)r + f->at) = v;
        return 1u << (RECORD_INTS + i);
    }
    return 0;
}

static int add_setting(tp_checkin_t *out, const char *k, const char *v, char *why, size_t why_len)
{
    if (!tp_setting_valid(k, v, why, why_len) || out->num_settings >= TP_SETTINGS_MAX) return 0;
    for (int i = 0; i < out->num_settings; i++)
        if (strcmp(out->settings[i].key, k) == 0) return 0;
    tp_setting_t *s = realloc(out->settings, (size_t)(out->num_settings + 1) * sizeof(*s));
    if (s == NULL) return -1;
    out->settings = s;
    s[out->num_settings].key = strdup(k);
    s[out->num_settings].value = strdup(v);
    out->num_settings++;
    return s[out->num_settings - 1].key != NULL && s[out->num_settings - 1].value != NULL ? 1 : -1;
}

void tp_checkin_free(tp_checkin_t *c)
{
    for (int i = 0; i < c->num_settings; i++) {
        free(c->settings[i].key);
        free(c->settings[i].value);
    }
    free(c->settings);
    free(c->text);
    c->settings = NULL;
    c->text = NULL;
    c->num_settings = 0;
}

/* A "key=value" line of a record into out; *bit is the field's (0 for a setting). 0, -1 when refused (why says why),
 * -2 out of memory. */
static int value_line(tp_checkin_t *out, char *line, unsigned *bit, char *why, size_t why_len)
{
    char *eq = strchr(line, '=');
    if (eq == NULL) {
        snprintf(why, why_len, "record line \"%.40s\" is not key=value", line);
        return -1;
    }
    *eq = '\0';
    const char *k = line, *v = eq + 1;
    tp_peer_record_t *r = &out->record;
    int ok = 0;
    if (strcmp(k, "rank") == 0) ok = parse_int_field(v, 0, 1 << 24, &r->rank), *bit = 1;
    else if (strcmp(k, "pid") == 0) {
        int pid;
        ok = parse_int_field(v, 1, 1 << 30, &pid);
        r->pid = pid;
        *bit = 2;
    } else if (strcmp(k, "local_rank") == 0) ok = parse_int_field(v, -1, 1 << 24, &r->local_rank), *bit = 4;
    else if (strcmp(k, "local_size") == 0) ok = parse_int_field(v, -1, 1 << 24, &r->local_size), *bit = 8;
    else if (strcmp(k, "node_rank") == 0) ok = parse_int_field(v, -1, 1 << 24, &r->node_rank), *bit = 16;
    else if (strncmp(k, "set.", 4) == 0) {
        ok = add_setting(out, k + 4, v, why, why_len);
        if (ok < 0) return -2;
    } else if ((*bit = string_field(r, k, v, &ok)) == 0) {
        snprintf(why, why_len, "record has an unknown field \"%.40s\"", k);
        return -1;
    }
    if (!ok) {
        snprintf(why, why_len, "record field %.40s has a bad, too long or repeated value \"%.40s\"", k, v);
        return -1;
    }
    return 0;
}

/* A "key^" line (its mark already cut off): the string field takes prev's value; 0, or -1 when refused. */
static int same_line(tp_checkin_t *out, const char *key, const tp_peer_record_t *prev, unsigned *bit, char *why,
                     size_t why_len)
{
    if (prev != NULL && (*bit = same_field(&out->record, prev, key)) != 0) return 0;
    snprintf(why, why_len, "record line \"%.40s%c\" refers to %s", key, SAME_MARK,
             prev == NULL ? "a previous record where there is none" : "no string field");
    return -1;
}

/* One record; prev: the table's previous record, whose values "key^" lines take (NULL: none may). */
static tp_status_t record_parse(char **text, tp_checkin_t *out, const tp_peer_record_t *prev, char *why, size_t why_len)
{
    char *p = *text;
    memset(out, 0, sizeof(*out));
    unsigned seen = 0;
    for (;;) {
        char *line = p, *nl = strchr(p, '\n');
        if (nl == NULL) {
            snprintf(why, why_len, "record ends without \"end\"");
            goto bad;
        }
        *nl = '\0';
        p = nl + 1;
        if (strcmp(line, "end") == 0) break;
        size_t len = strlen(line);
        unsigned bit = 0;
        int rc;
        if (len > 1 && line[len - 1] == SAME_MARK && strchr(line, '=') == NULL) {
            line[len - 1] = '\0';
            rc = same_line(out, line, prev, &bit, why, why_len);
        } else {
            rc = value_line(out, line, &bit, why, why_len);
        }
        if (rc == -2) goto oom;
        if (rc != 0) goto bad;
        if (bit & seen) {
            snprintf(why, why_len, "record field %s appears twice", line);
            goto bad;
        }
        seen |= bit;
    }
    if (seen != RECORD_SEEN) {
        snprintf(why, why_len, "record lacks required fields");
        goto bad;
    }
    *text = p;
    return TP_OK;
oom:
    snprintf(why, why_len, "out of memory");
bad:
    tp_checkin_free(out);
    return TP_ERR_PROTOCOL;
}

tp_status_t tp_record_parse(char **text, tp_checkin_t *out, char *why, size_t why_len)
{
    return record_parse(text, out, NULL, why, why_len);
}

tp_status_t tp_table_adopt(tp_world_t *w, char *text, char *why, size_t why_len)
{
    w->peer_text = text;
    w->peers = calloc((size_t)w->size, sizeof(*w->peers));
    if (w->peers == NULL) {
        snprintf(why, why_len, "out of memory for %d records", w->size);
        return TP_ERR_NO_MEMORY;
    }
    char *p = text, one[256];
    for (int r = 0; r < w->size; r++) {
        tp_checkin_t ci;
        if (record_parse(&p, &ci, r > 0 ? &w->peers[r - 1] : NULL, one, sizeof(one)) != TP_OK) {
            snprintf(why, why_len, "at rank %d: %s", r, one);
            return TP_ERR_PROTOCOL;
        }
        w->peers[r] = ci.record;
        tp_checkin_free(&ci);
        if (w->peers[r].rank != r) {
            snprintf(why, why_len, "at rank %d: the record says rank %d", r, w->peers[r].rank);
            return TP_ERR_PROTOCOL;
        }
    }
    if (*p != '\0') {
        snprintf(why, why_len, "%zu bytes after the last record", strlen(p));
        return TP_ERR_PROTOCOL;
    }
    return TP_OK;
}

static const char *setting_of(const tp_checkin_t *c, const char *key)
{
    for (int i = 0; i < c->num_settings; i++)
        if (strcmp(c->settings[i].key, key) == 0) return c->settings[i].value;
    return NULL;
}

/* Describes one key's values across ranks: "A on ranks 0-2, B on rank 3". Returns 1 if they differ. */
static int describe_key(const tp_checkin_t *checkins, int n, const char *key, int *ranks, char *out, size_t len)
{
    const char *first = setting_of(&checkins[0], key);
    int differ = 0;
    for (int r = 1; r < n && !differ; r++) {
        const char *v = setting_of(&checkins[r], key);
        differ = (v == NULL) != (first == NULL) || (v && strcmp(v, first) != 0);
    }
    if (!differ) return 0;
    size_t used = 0;
    char *done = calloc((size_t)n, 1);
    if (done == NULL) return 1;
    for (int r = 0; r < n; r++) {
        if (done[r]) continue;
        const char *v = setting_of(&checkins[r], key);
        int m = 0;
        for (int q = r; q < n; q++) {
            const char *w = setting_of(&checkins[q], key);
            if (!done[q] && ((v == NULL && w == NULL) || (v && w && strcmp(v, w) == 0))) {
                done[q] = 1;
                ranks[m++] = checkins[q].record.rank;
            }
        }
        char list[256];
        tp_format_ranks(ranks, m, list, sizeof(list));
        int k = snprintf(out + used, len > used ? len - used : 0, "%s%s on rank%s %s", used ? ", " : "",
                         v ? v : "(unset)", m > 1 ? "s" : "", list);
        if (k > 0) used += (size_t)k;
    }
    free(done);
    return 1;
}

tp_status_t tp_settings_compare(const tp_checkin_t *checkins, int n, char *msg, size_t msg_len)
{
    size_t used = 0;
    int *ranks = malloc((size_t)n * sizeof(int));
    char desc[1024];
    if (ranks == NULL) {
        snprintf(msg, msg_len, "out of memory comparing settings");
        return TP_ERR_NO_MEMORY;
    }
    msg[0] = '\0';
    /* Every key any rank holds, each considered once (at the first rank holding it). */
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < checkins[r].num_settings; i++) {
            const char *key = checkins[r].settings[i].key;
            int seen_before = 0;
            for (int q = 0; q < r && !seen_before; q++) seen_before = setting_of(&checkins[q], key) != NULL;
            if (seen_before || !describe_key(checkins, n, key, ranks, desc, sizeof(desc))) continue;
            int k = snprintf(msg + used, msg_len > used ? msg_len - used : 0, "%ssetting %s differs: %s",
                             used ? "; " : "", key, desc);
            if (k > 0) used += (size_t)k;
        }
    }
    free(ranks);
    return used ? TP_ERR_MISMATCH : TP_OK;
}

void tp_records_derive_locality(tp_peer_record_t *records, int n)
{
    int *node_of = malloc((size_t)n * sizeof(int));
    if (node_of == NULL) return;
    int nodes = 0;
    /* A host's index is the order in which its first rank appears. */
    for (int r = 0; r < n; r++) {
        node_of[r] = -1;
        for (int q = 0; q < r && node_of[r] < 0; q++)
            if (strcmp(records[q].host, records[r].host) == 0) node_of[r] = node_of[q];
        if (node_of[r] < 0) node_of[r] = nodes++;
    }
    for (int r = 0; r < n; r++) {
        tp_peer_record_t *p = &records[r];
        if (p->local_rank >= 0 && p->local_size > 0 && p->node_rank >= 0) continue;
        int local = 0, size = 0;
        for (int q = 0; q < n; q++) {
            if (node_of[q] != node_of[r]) continue;
            if (q < r) local++;
            size++;
        }
        p->local_rank = local;
        p->local_size = size;
        p->node_rank = node_of[r];
    }
    free(node_of);
}

int tp_peer_address(const tp_peer_record_t *peer, const char *transport, char *out, size_t out_len)
{
    size_t tlen = strlen(transport);
    const char *p = peer->addresses;
    while (*p) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > tlen && strncmp(p, transport, tlen) == 0 && p[tlen] == '=') {
            size_t alen = len - tlen - 1;
            if (alen >= out_len) return 0;
            memcpy(out, p + tlen + 1, alen);
            out[alen] = '\0';
            return 1;
        }
        p += len + (end ? 1 : 0);
    }
    return 0;
}
