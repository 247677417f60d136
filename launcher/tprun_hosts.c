/* tprun_hosts.c: -H and hostfiles into the plan's hosts, duplicates merged, ranks placed on their slots, and the
 * descriptor check for the ranks started here. Pure apart from reading hostfiles and the descriptor limit. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "runtime_log.h"
#include "tprun_args.h"

/* Descriptors tprun holds besides its ranks' pipes: stdio, epoll, signalfd, listener, keeper, PMIx server. */
#define TPRUN_FD_RESERVE 64

int tprun_parse_count(const char *text, size_t len, long max, long *out)
{
    long v = 0;
    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return -1;
        v = v * 10 + (text[i] - '0');
        if (v > max) return -1;
    }
    if (v <= 0) return -1;
    *out = v;
    return 0;
}

/* tp_quote of the first len bytes of text (cut with "..." when longer than a message shows). */
static const char *quote_n(const char *text, size_t len, char *out, size_t out_len)
{
    char part[TP_QUOTE_LEN + 1];
    size_t n = len < TP_QUOTE_LEN ? len : TP_QUOTE_LEN;
    memcpy(part, text, n);
    part[n] = '\0';
    return tp_quote(part, out, out_len);
}

int tprun_host_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > TPRUN_HOST_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        /* The first character is never '-': a host name must not reach ssh as an option. */
        if (!alnum && (i == 0 ? c != ':' : (c == '\0' || strchr("-._:@", c) == NULL))) return 0;
    }
    return 1;
}

int tprun_host_is_local(const char *name, const char *hostname)
{
    struct in_addr a;
    if (strcasecmp(name, "localhost") == 0 || strcmp(name, "::1") == 0) return 1;
    if (inet_pton(AF_INET, name, &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
    if (strcasecmp(name, hostname) == 0) return 1;
    size_t short_len = strcspn(hostname, ".");
    return strlen(name) == short_len && strncasecmp(name, hostname, short_len) == 0;
}

/* Appends one entry; a host named twice is merged later (tprun_hosts_merge), so a long hostfile stays linear. */
static tp_status_t add_host(tprun_plan_t *plan, const char *name, size_t len, int slots, int given, char *err,
                            size_t err_len)
{
    size_t n = plan->num_hosts;
    if (n == 0 || (n & (n - 1)) == 0) { /* capacity doubles at each power of two */
        tprun_host_t *h = realloc(plan->hosts, (n == 0 ? 4 : 2 * n) * sizeof(*h));
        if (h == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
        plan->hosts = h;
    }
    char *copy = strndup(name, len);
    if (copy == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
    memset(&plan->hosts[n], 0, sizeof(plan->hosts[n]));
    plan->hosts[n].name = copy;
    plan->hosts[n].slots = slots;
    plan->hosts[n].slots_given = given;
    plan->num_hosts++;
    plan->total_slots += slots;
    return TP_OK;
}

typedef struct host_key {
    const char *name;
    size_t index;
} host_key_t;

static int host_key_cmp(const void *a, const void *b)
{
    const host_key_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : (x->index > y->index) - (x->index < y->index);
}

tp_status_t tprun_hosts_merge(tprun_plan_t *plan, char *err, size_t err_len)
{
    size_t n = plan->num_hosts;
    if (n < 2) return TP_OK;
    host_key_t *keys = malloc(n * sizeof(*keys));
    if (keys == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
    for (size_t i = 0; i < n; i++) keys[i] = (host_key_t){plan->hosts[i].name, i};
    qsort(keys, n, sizeof(*keys), host_key_cmp);
    for (size_t i = 0, first = 0; i < n; i++) {
        if (i == 0 || strcmp(keys[i].name, keys[first].name) != 0) {
            first = i;
            continue;
        }
        tprun_host_t *into = &plan->hosts[keys[first].index], *dup = &plan->hosts[keys[i].index];
        /* More slots than ranks can ever run mean nothing: a host's count stops there, so it fits an int. */
        long slots = (long)into->slots + dup->slots;
        into->slots = slots > TPRUN_MAX_RANKS ? TPRUN_MAX_RANKS : (int)slots;
        into->slots_given |= dup->slots_given;
        dup->slots = -1; /* merged away */
    }
    free(keys);
    size_t kept = 0;
    plan->total_slots = 0;
    for (size_t i = 0; i < n; i++) {
        if (plan->hosts[i].slots < 0) {
            free(plan->hosts[i].name);
            continue;
        }
        plan->hosts[kept++] = plan->hosts[i];
        plan->total_slots += plan->hosts[i].slots;
    }
    plan->num_hosts = kept;
    return TP_OK;
}

tp_status_t tprun_hosts_parse_list(tprun_plan_t *plan, const char *opt, const char *list, char *err, size_t err_len)
{
    const char *p = list;
    char q1[TP_QUOTE_LEN], q2[TP_QUOTE_LEN];
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        size_t name_len = colon != NULL ? (size_t)(colon - p) : len;
        long slots = 1;
        if (name_len == 0)
            return snprintf(err, err_len, "%s: empty host name in \"%s\"", opt, tp_quote(list, q1, sizeof(q1))),
                   TP_ERR_INVALID;
        if (!tprun_host_name_valid(p, name_len))
            return snprintf(err, err_len,
                            "%s: expected a host name (letters, digits, '-', '.', '_', '@', at most %d), got \"%s\"",
                            opt, TPRUN_HOST_NAME_MAX, quote_n(p, name_len, q1, sizeof(q1))),
                   TP_ERR_INVALID;
        if (colon != NULL && tprun_parse_count(colon + 1, len - name_len - 1, TPRUN_MAX_RANKS, &slots) != 0)
            return snprintf(err, err_len, "%s: host \"%s\": expected a positive slot count, got \"%s\"", opt,
                            quote_n(p, name_len, q1, sizeof(q1)),
                            quote_n(colon + 1, len - name_len - 1, q2, sizeof(q2))),
                   TP_ERR_INVALID;
        tp_status_t st = add_host(plan, p, name_len, (int)slots, colon != NULL, err, err_len);
        if (st != TP_OK) return st;
        if (p[len] == '\0') return TP_OK;
        p += len + 1;
    }
}

/* One hostfile line, its comment and newline cut off: "host [slots=N]". */
static tp_status_t parse_hostfile_line(tprun_plan_t *plan, const char *where, long lineno, char *line, char *err,
                                       size_t err_len)
{
    char q[TP_QUOTE_LEN];
    char *save = NULL;
    char *host = strtok_r(line, " \t", &save);
    if (host == NULL) return TP_OK;
    if (!tprun_host_name_valid(host, strlen(host)))
        return snprintf(err, err_len,
                        "%s: line %ld: expected a host name (letters, digits, '-', '.', '_', ':', '@', at most %d), "
                        "got \"%s\"",
                        where, lineno, TPRUN_HOST_NAME_MAX, tp_quote(host, q, sizeof(q))),
               TP_ERR_INVALID;
    long slots = 1;
    int given = 0;
    for (char *tok = strtok_r(NULL, " \t", &save); tok != NULL; tok = strtok_r(NULL, " \t", &save)) {
        if (strncmp(tok, "slots=", 6) != 0 || tprun_parse_count(tok + 6, strlen(tok + 6), TPRUN_MAX_RANKS, &slots) != 0)
            return snprintf(err, err_len, "%s: line %ld: expected slots=N (a positive count, at most %d), got \"%s\"",
                            where, lineno, TPRUN_MAX_RANKS, tp_quote(tok, q, sizeof(q))),
                   TP_ERR_INVALID;
        given = 1;
    }
    return add_host(plan, host, strlen(host), (int)slots, given, err, err_len);
}

tp_status_t tprun_hosts_parse_file(tprun_plan_t *plan, const char *path, char *err, size_t err_len)
{
    char where[TP_QUOTE_LEN + 16];
    snprintf(where, sizeof(where), "--hostfile ");
    tp_quote(path, where + strlen(where), sizeof(where) - strlen(where));
    FILE *f = fopen(path, "re");
    if (f == NULL) return snprintf(err, err_len, "%s: %s", where, strerror(errno)), TP_ERR_INVALID;
    char *line = NULL;
    size_t cap = 0, before = plan->num_hosts;
    ssize_t n;
    long lineno = 0;
    tp_status_t st = TP_OK;
    errno = 0;
    while (st == TP_OK && (n = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (memchr(line, '\0', (size_t)n) != NULL) {
            snprintf(err, err_len, "%s: line %ld: a NUL byte (a hostfile is text)", where, lineno);
            st = TP_ERR_INVALID;
            break;
        }
        line[strcspn(line, "#\r\n")] = '\0';
        st = parse_hostfile_line(plan, where, lineno, line, err, err_len);
    }
    if (st == TP_OK && ferror(f)) {
        snprintf(err, err_len, "%s: %s", where, strerror(errno ? errno : EIO));
        st = TP_ERR_INVALID;
    }
    free(line);
    fclose(f);
    if (st == TP_OK && plan->num_hosts == before)
        snprintf(err, err_len, "%s: no hosts in the file", where), st = TP_ERR_INVALID;
    return st;
}

tp_status_t tprun_plan_place(tprun_plan_t *plan, char *err, size_t err_len)
{
    free(plan->rank_host);
    free(plan->rank_local);
    plan->rank_host = calloc((size_t)plan->np, sizeof(int));
    plan->rank_local = calloc((size_t)plan->np, sizeof(int));
    if (plan->rank_host == NULL || plan->rank_local == NULL)
        return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
    for (size_t h = 0; h < plan->num_hosts; h++) plan->hosts[h].nranks = 0;
    int r = 0;
    if (plan->map_by == TPRUN_MAP_NODE) {
        /* One rank per host in turn; a host whose slots are full leaves the turn, so each pass places ranks. */
        size_t *turn = malloc(plan->num_hosts * sizeof(*turn) + 1), n = 0;
        if (turn == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
        for (size_t h = 0; h < plan->num_hosts; h++)
            if (plan->hosts[h].slots > 0) turn[n++] = h;
        while (r < plan->np && n > 0) {
            size_t kept = 0;
            for (size_t k = 0; k < n && r < plan->np; k++) {
                tprun_host_t *host = &plan->hosts[turn[k]];
                plan->rank_host[r++] = (int)turn[k];
                if (++host->nranks < host->slots) turn[kept++] = turn[k];
            }
            n = kept;
        }
        free(turn);
    } else {
        for (size_t h = 0; h < plan->num_hosts && r < plan->np; h++)
            for (int s = 0; s < plan->hosts[h].slots && r < plan->np; s++)
                plan->rank_host[r++] = (int)h, plan->hosts[h].nranks++;
    }
    if (r < plan->np)
        return snprintf(err, err_len, "-n %d needs %d slots, but -H/--hostfile give only %d", plan->np, plan->np, r),
               TP_ERR_INVALID;
    int node = 0;
    plan->remote = 0;
    for (size_t h = 0; h < plan->num_hosts; h++) {
        tprun_host_t *host = &plan->hosts[h];
        host->node = host->nranks > 0 ? node++ : -1;
        if (host->nranks > 0 && !host->local) plan->remote = 1;
        host->nranks = 0;
    }
    for (r = 0; r < plan->np; r++) plan->rank_local[r] = plan->hosts[plan->rank_host[r]].nranks++;
    return TP_OK;
}

tp_status_t tprun_plan_check_fds(const tprun_plan_t *plan, char *err, size_t err_len)
{
    long here = plan->hosts != NULL ? 0 : plan->np, agents = 0;
    for (size_t h = 0; h < plan->num_hosts; h++) {
        if (plan->hosts[h].local) here += plan->hosts[h].nranks;
        else if (plan->hosts[h].nranks > 0) agents++;
    }
    /* Per rank here: its stdout and stderr pipes (and a PMIx connection); per agent: its ssh's three pipes. */
    long need = here * (2 + (plan->pmix != 0)) + 3 * agents + TPRUN_FD_RESERVE;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || (long)rl.rlim_cur >= need) return TP_OK;
    /* As mpirun does: the soft limit goes up to the hard one before anything is refused. */
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || (long)rl.rlim_cur >= need))
            return TP_OK;
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return snprintf(err, err_len,
                    "-n %d: %ld ranks here need %ld file descriptors, but the limit is %ld (raise ulimit -n, or run "
                    "fewer ranks on this host)",
                    plan->np, here, need, (long)rl.rlim_cur),
           TP_ERR_INVALID;
}
