/* runtime_config.c: the TP_* table, value parsing and the environment check. */
#include "runtime_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "runtime_log.h"

const tp_config_entry_t tp_config_table[] = {
    /* The world contract a launcher gives each rank. */
    {"TP_RANK", "rank", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL, "this rank's index in the world (0-based)"},
    {"TP_WORLD_SIZE", "world_size", TP_CONFIG_INT, TP_CONFIG_LAUNCHER | TP_CONFIG_AGREE, NULL,
     "number of ranks in the job"},
    {"TP_LOCAL_RANK", "local_rank", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL, "this rank's index on its host"},
    {"TP_LOCAL_WORLD_SIZE", "local_world_size", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL,
     "number of ranks on this host"},
    {"TP_NODE_RANK", "node_rank", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL, "this host's index among the job's hosts"},
    {"TP_JOB_ID", "job_id", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER | TP_CONFIG_AGREE, NULL,
     "the job's id, the same on every rank"},
    {"TP_BOOT_ADDR", "boot_addr", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "host:port of rank 0's bootstrap listener; several, comma-separated, are tried in turn (2 s each but the last)"},
    {"TP_BOOT_FD", "boot_fd", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL,
     "rank 0 only: an inherited listening socket for the bootstrap (tprun binds it, so no port is guessed)"},
    {"TP_HOST", "host", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "this rank's host as named on tprun's command line (peer records and messages use it, not gethostname)"},
    {"TP_JOB_KEY", "job_key", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "the job's secret (32 hex digits); every connection proves it knows it; never printed"},
    /* Settings a user may change; those marked agree must match on every rank. */
    {"TP_BOOT_TIMEOUT", "boot_timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_AGREE, "60",
     "seconds to wait for every rank to check in before the bootstrap fails naming the missing ranks"},
    {"TP_BOOT_REPORT", "boot_report", TP_CONFIG_SECONDS, TP_CONFIG_USER, "2",
     "seconds between 'waiting for ranks ...' messages while the bootstrap waits"},
    {"TP_HEARTBEAT_TIMEOUT", "heartbeat_timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_AGREE, "1",
     "seconds without a heartbeat after which a peer counts as hung and the job fails"},
    {"TP_PART_BYTES", "part_bytes", TP_CONFIG_SIZE, TP_CONFIG_USER | TP_CONFIG_AGREE, "4M",
     "large collectives move in parts of this many bytes (64 to 1G)"},
    {"TP_TRANSPORTS", "transports", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_AGREE, "",
     "transports to use, comma-separated in order, or ^name to exclude; empty means all; this build has one: tcp"},
    {"TP_SPIN_US", "spin_us", TP_CONFIG_INT, TP_CONFIG_USER, "50",
     "microseconds a waiting rank spins before it blocks in the kernel"},
    {"TP_IFNAME", "ifname", TP_CONFIG_STRING, TP_CONFIG_USER, "",
     "interfaces peers may be reached on, as NCCL_SOCKET_IFNAME: prefixes (eth,ib), =exact names, ^excluded; "
     "empty: any on a /24 the two ranks share"},
    {"TP_REPORT_BINDINGS", "report_bindings", TP_CONFIG_BOOL, TP_CONFIG_USER, "0",
     "each rank prints the interface chosen for each peer and why the others were not (tprun --report-bindings)"},
    {"TP_LOG_LEVEL", "log_level", TP_CONFIG_STRING, TP_CONFIG_USER, "warn",
     "error, warn, info, debug or trace"},
    {"TP_KILL_GRACE", "kill_grace", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_TPRUN, "1",
     "tprun: seconds between SIGTERM and SIGKILL when the job is ended"},
    {"TP_TIMEOUT", "timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_TPRUN, NULL,
     "tprun: end the job after this many seconds (as --timeout)"},
    {"TP_SSH", "ssh", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_TPRUN, "ssh",
     "tprun: the command that reaches a remote host (as --ssh), split on blanks; BatchMode=yes is always added"},
    {"TP_SSH_TIMEOUT", "ssh_timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_TPRUN, "10",
     "tprun: seconds for every remote host's agent to answer before the launch fails naming the host"},
    {"TP_LAUNCHER", "launcher", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_TPRUN, "auto",
     "tprun: how ranks start: local (fork), slurm (srun --mpi=pmix), or auto (slurm when SLURM_JOB_ID is set)"},
    {"TP_PMIX", "pmix", TP_CONFIG_BOOL, TP_CONFIG_USER | TP_CONFIG_TPRUN, "0",
     "tprun: host a PMIx server for the ranks (as --pmix): PMIx programs get their world, fence, get and abort"},
    {"TP_ENV_CHECKED", "env_checked", TP_CONFIG_BOOL, TP_CONFIG_TPRUN, "0",
     "set to 1 by tprun once it has warned about unknown TP_* names, so its ranks do not warn again"},
    {"TP_TORCH_ENV", "torch_env", TP_CONFIG_BOOL, TP_CONFIG_USER | TP_CONFIG_TPRUN, "1",
     "tprun: also set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT"},
};
const size_t tp_config_table_len = sizeof(tp_config_table) / sizeof(tp_config_table[0]);

const tp_config_entry_t *tp_config_find_env(const char *env)
{
    for (size_t i = 0; i < tp_config_table_len; i++)
        if (strcmp(tp_config_table[i].env, env) == 0) return &tp_config_table[i];
    return NULL;
}

const char *tp_config_value(const char *env)
{
    const char *v = getenv(env);
    if (v != NULL) return v;
    const tp_config_entry_t *e = tp_config_find_env(env);
    return e != NULL ? e->default_value : NULL;
}

static tp_status_t bad_value(const char *name, const char *text, const char *expected, char *err, size_t len)
{
    char q[TP_QUOTE_LEN];
    snprintf(err, len, "%s: expected %s, got \"%s\"", name, expected, tp_quote(text, q, sizeof(q)));
    return TP_ERR_INVALID;
}

tp_status_t tp_config_parse_int(const char *name, const char *text, int64_t *out, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || errno != 0 || v < 0 || text[0] == '-' || text[0] == '+' ||
        text[0] == ' ')
        return bad_value(name, text, "a non-negative integer", err, err_len);
    *out = v;
    return TP_OK;
}

tp_status_t tp_config_parse_size(const char *name, const char *text, uint64_t *out, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    if (text[0] < '0' || text[0] > '9') return bad_value(name, text, "a byte count such as 4194304 or 4M", err, err_len);
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (*end != '\0' || errno != 0 || v == 0 || v > (UINT64_MAX >> 34))
        return bad_value(name, text, "a positive byte count such as 4194304 or 4M", err, err_len);
    *out = (uint64_t)v << shift;
    return TP_OK;
}

tp_status_t tp_config_parse_seconds(const char *name, const char *text, double *out, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    if ((text[0] < '0' || text[0] > '9') && text[0] != '.')
        return bad_value(name, text, "a positive number of seconds", err, err_len);
    double v = strtod(text, &end);
    if (*end != '\0' || errno != 0 || !(v > 0) || !isfinite(v) || v > 1e7)
        return bad_value(name, text, "a positive number of seconds", err, err_len);
    *out = v;
    return TP_OK;
}

tp_status_t tp_config_parse_bool(const char *name, const char *text, int *out, char *err, size_t err_len)
{
    static const char *const yes[] = {"1", "yes", "true", "on"};
    static const char *const no[] = {"0", "no", "false", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) return *out = 1, TP_OK;
        if (strcasecmp(text, no[i]) == 0) return *out = 0, TP_OK;
    }
    return bad_value(name, text, "1, 0, yes, no, true, false, on or off", err, err_len);
}

/* The transports built into libtp, in runtime_transports.c's order (runtime_unit checks that they agree). */
const char *const tp_config_transports[] = {"tcp"};
const size_t tp_config_transports_len = sizeof(tp_config_transports) / sizeof(tp_config_transports[0]);

tp_status_t tp_config_parse_part_bytes(const char *text, uint64_t *out, char *err, size_t err_len)
{
    uint64_t v;
    if (tp_config_parse_size("TP_PART_BYTES", text, &v, err, err_len) != TP_OK) return TP_ERR_INVALID;
    if (v < TP_PART_BYTES_MIN || v > TP_PART_BYTES_MAX)
        return bad_value("TP_PART_BYTES", text, "a byte count from 64 to 1G (a part holds at least one element)", err,
                         err_len);
    *out = v;
    return TP_OK;
}

/* TP_TRANSPORTS: comma-separated names, each maybe with ^; an unknown one is refused, as a typo would drop it. */
static tp_status_t check_transports(const char *text, char *err, size_t err_len)
{
    for (const char *p = text; *p != '\0';) {
        size_t l = strcspn(p, ","), skip = p[0] == '^';
        size_t k = 0;
        while (k < tp_config_transports_len && !(strlen(tp_config_transports[k]) == l - skip &&
                                                 strncmp(tp_config_transports[k], p + skip, l - skip) == 0))
            k++;
        if (l > skip && k == tp_config_transports_len) {
            char known[128] = "";
            for (size_t j = 0, o = 0; j < tp_config_transports_len && o < sizeof(known); j++)
                o += (size_t)snprintf(known + o, sizeof(known) - o, "%s%s", j ? ", " : "", tp_config_transports[j]);
            char name[64], qname[TP_QUOTE_LEN], qtext[TP_QUOTE_LEN];
            snprintf(name, sizeof(name), "%.*s", (int)(l - skip), p + skip);
            snprintf(err, err_len, "TP_TRANSPORTS: unknown transport \"%s\" in \"%s\" (known: %s)",
                     tp_quote(name, qname, sizeof(qname)), tp_quote(text, qtext, sizeof(qtext)), known);
            return TP_ERR_INVALID;
        }
        p += l + (p[l] == ',');
    }
    return TP_OK;
}

static tp_status_t check_value(const tp_config_entry_t *e, const char *text, char *err, size_t err_len)
{
    int64_t i;
    uint64_t u;
    double d;
    int b;
    if (strcmp(e->env, "TP_PART_BYTES") == 0) return tp_config_parse_part_bytes(text, &u, err, err_len);
    if (strcmp(e->env, "TP_TRANSPORTS") == 0) return check_transports(text, err, err_len);
    switch (e->kind) {
    case TP_CONFIG_INT: return tp_config_parse_int(e->env, text, &i, err, err_len);
    case TP_CONFIG_SIZE: return tp_config_parse_size(e->env, text, &u, err, err_len);
    case TP_CONFIG_SECONDS: return tp_config_parse_seconds(e->env, text, &d, err, err_len);
    case TP_CONFIG_BOOL: return tp_config_parse_bool(e->env, text, &b, err, err_len);
    case TP_CONFIG_STRING: return TP_OK;
    }
    return TP_OK;
}

/* The name of a TP_* entry of environ, or 0 when it is not one. */
static int env_name(const char *entry, char *name, size_t len)
{
    const char *eq = strchr(entry, '=');
    if (strncmp(entry, "TP_", 3) != 0 || eq == NULL) return 0;
    size_t n = (size_t)(eq - entry);
    if (n >= len) n = len - 1;
    memcpy(name, entry, n);
    name[n] = '\0';
    return 1;
}

tp_status_t tp_config_check_environ(char *const *environ_, char *err, size_t err_len)
{
    tp_status_t first = TP_OK;
    char name[128];
    for (char *const *ep = environ_; ep != NULL && *ep != NULL && first == TP_OK; ep++) {
        const tp_config_entry_t *e = env_name(*ep, name, sizeof(name)) ? tp_config_find_env(name) : NULL;
        if (e != NULL) first = check_value(e, strchr(*ep, '=') + 1, err, err_len);
    }
    if (first == TP_OK) {
        const char *level = tp_config_value("TP_LOG_LEVEL");
        if (tp_log_level_parse(level) < 0) {
            char q[TP_QUOTE_LEN];
            snprintf(err, err_len, "TP_LOG_LEVEL: expected error, warn, info, debug or trace, got \"%s\"",
                     tp_quote(level, q, sizeof(q)));
            first = TP_ERR_INVALID;
        }
    }
    return first;
}

int tp_config_unknown(char *const *environ_, char *out, size_t len)
{
    int count = 0;
    size_t off = 0;
    char name[128], q[TP_QUOTE_LEN];
    if (len > 0) out[0] = '\0';
    for (char *const *ep = environ_; ep != NULL && *ep != NULL; ep++) {
        if (!env_name(*ep, name, sizeof(name)) || tp_config_find_env(name) != NULL) continue;
        count++;
        /* A name is any bytes up to '=': quoted, so a warning stays one line of text. */
        if (off < len)
            off += (size_t)snprintf(out + off, len - off, "%s%s", off > 0 ? ", " : "", tp_quote(name, q, sizeof(q)));
    }
    return count;
}

void tp_config_warn_unknown(char *const *environ_)
{
    char names[512];
    int n = tp_config_unknown(environ_, names, sizeof(names));
    if (n > 0)
        tp_log(TP_LOG_WARN, "config", "unknown variable%s %s ignored (tprun --info lists them all)", n > 1 ? "s" : "",
               names);
}

void tp_config_print(int fd)
{
    dprintf(fd, "%-22s %-8s %-10s %s\n", "variable", "default", "current", "meaning");
    for (size_t i = 0; i < tp_config_table_len; i++) {
        const tp_config_entry_t *e = &tp_config_table[i];
        const char *cur = getenv(e->env);
        if (cur != NULL && strcmp(e->env, "TP_JOB_KEY") == 0) cur = "(set)";
        dprintf(fd, "%-22s %-8s %-10s %s%s\n", e->env, e->default_value ? (e->default_value[0] ? e->default_value : "\"\"") : "-",
                cur ? cur : "-", (e->flags & TP_CONFIG_AGREE) ? "[agreed] " : "", e->help);
    }
    char names[1024];
    if (tp_config_unknown(environ, names, sizeof(names)) > 0)
        dprintf(fd, "\nunknown, set in this environment and ignored: %s\n", names);
}
