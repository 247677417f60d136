/* runtime_env.c: where this process stands in the job, read from tprun's, torchrun's or no environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_env.h"
#include "runtime_log.h"
#include "runtime_pmix.h"
#include "runtime_wire.h"

extern char **environ;

static tp_status_t env_int(const char *name, int required, int64_t max, int *out)
{
    const char *text = getenv(name);
    char err[256];
    int64_t v = 0;
    if (text == NULL) {
        if (!required) return TP_OK;
        tp_log(TP_LOG_ERROR, "env", "%s is not set (the launcher must set it)", name);
        return TP_ERR_INVALID;
    }
    /* v is only read once the parse succeeded: a failed parse's message is the one to show. */
    tp_status_t s = tp_config_parse_int(name, text, &v, err, sizeof(err));
    if (s == TP_OK && v > max) {
        char q[TP_QUOTE_LEN];
        snprintf(err, sizeof(err), "%s: expected at most %lld, got \"%s\"", name, (long long)max,
                 tp_quote(text, q, sizeof(q)));
        s = TP_ERR_INVALID;
    }
    if (s != TP_OK) {
        tp_log(TP_LOG_ERROR, "env", "%s", err);
        return TP_ERR_INVALID;
    }
    *out = (int)v;
    return TP_OK;
}

static tp_status_t parse_key(const char *hex, uint8_t key[TP_JOB_KEY_BYTES])
{
    if (strlen(hex) != 2 * TP_JOB_KEY_BYTES) goto bad;
    for (int i = 0; i < TP_JOB_KEY_BYTES; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) goto bad;
        key[i] = (uint8_t)v;
    }
    for (int i = 0; hex[i]; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f') || (hex[i] >= 'A' && hex[i] <= 'F')))
            goto bad;
    return TP_OK;
bad:
    tp_log(TP_LOG_ERROR, "env", "TP_JOB_KEY: expected %d hex digits", 2 * TP_JOB_KEY_BYTES);
    return TP_ERR_INVALID;
}

/* One "host:port" entry (the last colon splits it; the port is 1 to 5 digits, 1-65535); NULL, or what is wrong. */
static const char *parse_host_port(const char *text, size_t len, char *host, size_t host_len, int *port)
{
    if (len == 0) return "is empty";
    const char *colon = memrchr(text, ':', len);
    if (colon == NULL) return "has no :port";
    if (colon == text) return "has no host before the colon";
    if (colon + 1 == text + len) return "has no port after the colon";
    if ((size_t)(colon - text) >= host_len) return "has a host name too long";
    size_t digits = len - (size_t)(colon + 1 - text);
    long p = 0;
    for (size_t i = 0; i < digits; i++) {
        if (colon[1 + i] < '0' || colon[1 + i] > '9') return "has a port that is not digits";
        if (i < 6) p = p * 10 + (colon[1 + i] - '0');
    }
    if (digits == 0 || digits > 5 || p < 1 || p > 65535) return "has a port outside 1-65535";
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    *port = (int)p;
    return NULL;
}

/* TP_BOOT_ADDR: "host:port", or several comma-separated, best first (every address of rank 0's host). */
static tp_status_t parse_boot_addrs(tp_world_t *w, const char *addrs)
{
    char host[TP_HOST_MAX];
    int port, k = 0;
    w->boot_nmore = 0;
    if (strlen(addrs) >= TP_ADDRS_MAX) {
        tp_log(TP_LOG_ERROR, "env", "TP_BOOT_ADDR: more than %d bytes of addresses", TP_ADDRS_MAX - 1);
        return TP_ERR_INVALID;
    }
    /* Every entry must be one: a typo in the third address is an error now, not a surprise at a fallback. */
    for (const char *p = addrs;; k++) {
        size_t l = strcspn(p, ",");
        const char *wrong = parse_host_port(p, l, host, sizeof(host), &port);
        if (wrong != NULL) {
            tp_log(TP_LOG_ERROR, "env",
                   "TP_BOOT_ADDR: expected host:port[,host:port...] with ports 1-65535, got \"%s\" (entry %d %s)",
                   addrs, k + 1, wrong);
            return TP_ERR_INVALID;
        }
        if (k == 0) {
            snprintf(w->boot_host, sizeof(w->boot_host), "%s", host);
            w->boot_port = port;
        } else if (w->boot_nmore < TP_BOOT_MORE_MAX) {
            snprintf(w->boot_more_host[w->boot_nmore], TP_HOST_MAX, "%s", host);
            w->boot_more_port[w->boot_nmore++] = port;
        }
        if (p[l] == '\0') return TP_OK;
        p += l + 1;
    }
}

static tp_status_t read_tprun(tp_world_t *w)
{
    tp_status_t s;
    if ((s = env_int("TP_RANK", 1, 1 << 24, &w->rank)) != TP_OK) return s;
    if ((s = env_int("TP_WORLD_SIZE", 1, 1 << 24, &w->size)) != TP_OK) return s;
    if ((s = env_int("TP_LOCAL_RANK", 0, 1 << 24, &w->local_rank)) != TP_OK) return s;
    if ((s = env_int("TP_LOCAL_WORLD_SIZE", 0, 1 << 24, &w->local_size)) != TP_OK) return s;
    if ((s = env_int("TP_NODE_RANK", 0, 1 << 24, &w->node_rank)) != TP_OK) return s;
    const char *key = getenv("TP_JOB_KEY");
    if (key == NULL) {
        tp_log(TP_LOG_ERROR, "env", "TP_JOB_KEY is not set (the launcher must give every rank the job's secret)");
        return TP_ERR_INVALID;
    }
    if ((s = parse_key(key, w->job_key)) != TP_OK) return s;
    const char *addr = getenv("TP_BOOT_ADDR");
    if (addr == NULL) {
        tp_log(TP_LOG_ERROR, "env", "TP_BOOT_ADDR is not set (the launcher must set it to rank 0's host:port)");
        return TP_ERR_INVALID;
    }
    if ((s = parse_boot_addrs(w, addr)) != TP_OK) return s;
    const char *id = getenv("TP_JOB_ID");
    snprintf(w->job_id, sizeof(w->job_id), "%s", id ? id : addr);
    int fd = -1;
    if ((s = env_int("TP_BOOT_FD", 0, 1 << 20, &fd)) != TP_OK) return s;
    if (fd >= 0 && w->rank == 0) {
        int listening = 0;
        socklen_t len = sizeof(listening);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
            tp_log(TP_LOG_ERROR, "env", "TP_BOOT_FD=%d is not a listening socket", fd);
            return TP_ERR_INVALID;
        }
        w->boot_listen_fd = fd;
    }
    w->source = TP_WORLD_TPRUN;
    return TP_OK;
}

static tp_status_t read_torchrun(tp_world_t *w)
{
    tp_status_t s;
    w->source = TP_WORLD_TORCHRUN;
    if ((s = env_int("RANK", 1, 1 << 24, &w->rank)) != TP_OK) return s;
    if ((s = env_int("WORLD_SIZE", 1, 1 << 24, &w->size)) != TP_OK) return s;
    if ((s = env_int("LOCAL_RANK", 0, 1 << 24, &w->local_rank)) != TP_OK) return s;
    if ((s = env_int("LOCAL_WORLD_SIZE", 0, 1 << 24, &w->local_size)) != TP_OK) return s;
    if ((s = env_int("GROUP_RANK", 0, 1 << 24, &w->node_rank)) != TP_OK) return s;
    const char *run_id = getenv("TORCHELASTIC_RUN_ID");
    const char *addr = getenv("TP_BOOT_ADDR");
    if (addr != NULL) {
        if ((s = parse_boot_addrs(w, addr)) != TP_OK) return s;
    } else {
        const char *maddr = getenv("MASTER_ADDR"), *mport = getenv("MASTER_PORT");
        if (maddr == NULL || mport == NULL) {
            tp_log(TP_LOG_ERROR, "env",
                   "RANK and WORLD_SIZE are set but %s is not (torchrun-style jobs need "
                   "MASTER_ADDR and MASTER_PORT, or TP_BOOT_ADDR)",
                   maddr == NULL ? "MASTER_ADDR" : "MASTER_PORT");
            return TP_ERR_INVALID;
        }
        int port;
        if ((s = env_int("MASTER_PORT", 1, 65535, &port)) != TP_OK) return s;
        if (port == 0) {
            tp_log(TP_LOG_ERROR, "env", "MASTER_PORT: expected a port from 1 to 65535, got \"0\"");
            return TP_ERR_INVALID;
        }
        /* Under torchrun its TCPStore holds MASTER_PORT, so the bootstrap takes the next port. */
        if (run_id != NULL) port = port == 65535 ? 65534 : port + 1;
        snprintf(w->boot_host, sizeof(w->boot_host), "%s", maddr);
        w->boot_port = port;
    }
    snprintf(w->job_id, sizeof(w->job_id), "%s", run_id ? run_id : "");
    if (w->job_id[0] == '\0') snprintf(w->job_id, sizeof(w->job_id), "torch-%.100s:%d", w->boot_host, w->boot_port);
    const char *key = getenv("TP_JOB_KEY");
    if (key != NULL) return parse_key(key, w->job_key);
    /* Without a secret, connections are bound to the job's coordinates: another job cannot pass as this one. */
    char coords[512];
    int n = snprintf(coords, sizeof(coords), "%s|%s:%d|%d", w->job_id, w->boot_host, w->boot_port, w->size);
    static const uint8_t zero[16];
    tp_siphash128(zero, coords, (size_t)n, w->job_key);
    tp_log(TP_LOG_INFO, "env", "TP_JOB_KEY not set: connections are checked against the job's address only");
    return TP_OK;
}

static tp_status_t read_settings(tp_world_t *w)
{
    char err[256];
    tp_status_t s;
    int64_t spin;
    if ((s = tp_config_parse_seconds("TP_BOOT_TIMEOUT", tp_config_value("TP_BOOT_TIMEOUT"), &w->boot_timeout_s, err,
                                     sizeof(err))) != TP_OK ||
        (s = tp_config_parse_seconds("TP_BOOT_REPORT", tp_config_value("TP_BOOT_REPORT"), &w->boot_report_s, err,
                                     sizeof(err))) != TP_OK ||
        (s = tp_config_parse_seconds("TP_HEARTBEAT_TIMEOUT", tp_config_value("TP_HEARTBEAT_TIMEOUT"),
                                     &w->heartbeat_timeout_s, err, sizeof(err))) != TP_OK ||
        (s = tp_config_parse_part_bytes(tp_config_value("TP_PART_BYTES"), &w->part_bytes, err, sizeof(err))) != TP_OK ||
        (s = tp_config_parse_int("TP_SPIN_US", tp_config_value("TP_SPIN_US"), &spin, err, sizeof(err))) != TP_OK) {
        tp_log(TP_LOG_ERROR, "env", "%s", err);
        return s;
    }
    w->spin_us = spin > 1000000 ? 1000000 : (int)spin;
    w->errors_return = strcmp(tp_config_value("TP_ERRORS"), "return") == 0;
    snprintf(w->transports, sizeof(w->transports), "%s", tp_config_value("TP_TRANSPORTS"));
    return TP_OK;
}

tp_status_t tp_world_from_env(tp_world_t *w)
{
    char err[256] = "";
    memset(w, 0, sizeof(*w));
    w->local_rank = w->local_size = w->node_rank = -1;
    w->boot_listen_fd = w->boot_fd = -1;
    int checked = 0;
    if (tp_config_check_environ(environ, err, sizeof(err)) != TP_OK ||
        tp_config_parse_bool("TP_ENV_CHECKED", tp_config_value("TP_ENV_CHECKED"), &checked, err, sizeof(err)) !=
            TP_OK) {
        tp_log(TP_LOG_ERROR, "env", "%s", err);
        return TP_ERR_INVALID;
    }
    if (!checked) tp_config_warn_unknown(environ); /* tprun has warned once for the whole job */
    tp_log_set_level((tp_log_level_t)tp_log_level_parse(tp_config_value("TP_LOG_LEVEL")));
    tp_status_t s = read_settings(w);
    if (s != TP_OK) return s;
    if (getenv("TP_RANK") != NULL) s = read_tprun(w);
    else if (tp_pmix_started()) /* PMIx hook: started by mpirun or srun --mpi=pmix */ s = tp_pmix_world(w);
    else if (getenv("RANK") != NULL || getenv("WORLD_SIZE") != NULL) s = read_torchrun(w);
    else {
        w->source = TP_WORLD_SINGLETON;
        w->size = 1;
        snprintf(w->job_id, sizeof(w->job_id), "singleton-%d", (int)getpid());
        return TP_OK;
    }
    if (s != TP_OK) return s;
    if (w->size < 1 || w->rank >= w->size) {
        tp_log(TP_LOG_ERROR, "env", "rank %d is not below the world size %d", w->rank, w->size);
        return TP_ERR_INVALID;
    }
    if (w->local_size >= 0 && w->local_rank >= w->local_size) {
        tp_log(TP_LOG_ERROR, "env", "local rank %d is not below the local world size %d", w->local_rank, w->local_size);
        return TP_ERR_INVALID;
    }
    tp_log_set_rank(w->rank);
    return TP_OK;
}
