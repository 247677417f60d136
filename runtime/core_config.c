/* core_config.c: the core's TP_* table (the world contract a launcher gives each rank, and the core's settings),
 * data that tprun links without libtp. */
#include <stdio.h>
#include <string.h>

#include "runtime_config.h"
#include "runtime_log.h"
#include "topo_hca.h"

static tp_status_t check_part_bytes(const char *text, char *err, size_t err_len)
{
    uint64_t v;
    return tp_config_parse_part_bytes(text, &v, err, err_len);
}

/* TP_TRANSPORTS: comma-separated names, each maybe with ^; an unknown one is refused, as a typo would drop it. */
static tp_status_t check_transports(const char *text, char *err, size_t err_len)
{
    const char *names[16];
    int n = tp_config_transport_names(names, 16);
    if (n > 16) n = 16;
    for (const char *p = text; *p != '\0';) {
        size_t l = strcspn(p, ","), skip = p[0] == '^';
        int k = 0;
        while (k < n && !(strlen(names[k]) == l - skip && strncmp(names[k], p + skip, l - skip) == 0)) k++;
        if (l > skip && k == n) {
            char known[128] = "";
            for (int j = 0, o = 0; j < n && o < (int)sizeof(known); j++)
                o += snprintf(known + o, sizeof(known) - (size_t)o, "%s%s", j ? ", " : "", names[j]);
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

/* TP_SYSFS_ROOT: an absolute directory, since ranks start in other directories than the user's shell. */
static tp_status_t check_sysfs_root(const char *text, char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN];
    if (text[0] == '/') return TP_OK;
    snprintf(err, err_len, "TP_SYSFS_ROOT: expected an absolute directory path such as /sys, got \"%s\"",
             tp_quote(text, q, sizeof(q)));
    return TP_ERR_INVALID;
}

static tp_status_t check_hca(const char *text, char *err, size_t err_len)
{
    return tp_hca_spec_check(text, err, err_len);
}

static tp_status_t check_gid_index(const char *text, char *err, size_t err_len)
{
    int v;
    return tp_hca_gid_index_parse(text, &v, err, err_len);
}

static tp_status_t check_log_level(const char *text, char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN];
    if (tp_log_level_parse(text) >= 0) return TP_OK;
    snprintf(err, err_len, "TP_LOG_LEVEL: expected error, warn, info, debug or trace, got \"%s\"",
             tp_quote(text, q, sizeof(q)));
    return TP_ERR_INVALID;
}

static tp_status_t check_errors(const char *text, char *err, size_t err_len)
{
    return tp_config_check_word("TP_ERRORS", "fatal|return", text, err, err_len);
}

static tp_status_t check_connect(const char *text, char *err, size_t err_len)
{
    return tp_config_check_word("TP_CONNECT", "lazy|eager", text, err, err_len);
}

const tp_config_entry_t tp_core_config[] = {
    /* The world contract a launcher gives each rank. */
    {"TP_RANK", "rank", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL, "this rank's index in the world (0-based)", NULL},
    {"TP_WORLD_SIZE", "world_size", TP_CONFIG_INT, TP_CONFIG_LAUNCHER | TP_CONFIG_AGREE, NULL,
     "number of ranks in the job", NULL},
    {"TP_LOCAL_RANK", "local_rank", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL, "this rank's index on its host", NULL},
    {"TP_LOCAL_WORLD_SIZE", "local_world_size", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL, "number of ranks on this host",
     NULL},
    {"TP_NODE_RANK", "node_rank", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL, "this host's index among the job's hosts",
     NULL},
    {"TP_JOB_ID", "job_id", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER | TP_CONFIG_AGREE, NULL,
     "the job's id, the same on every rank", NULL},
    {"TP_BOOT_ADDR", "boot_addr", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "host:port of rank 0's bootstrap listener; several, comma-separated, are tried in turn (2 s each but the last)",
     NULL},
    {"TP_BOOT_FD", "boot_fd", TP_CONFIG_INT, TP_CONFIG_LAUNCHER, NULL,
     "rank 0 only: an inherited listening socket for the bootstrap (tprun binds it, so no port is guessed)", NULL},
    {"TP_HOST", "host", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "this rank's host as named on tprun's command line (peer records and messages use it, not gethostname)", NULL},
    {"TP_JOB_KEY", "job_key", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER | TP_CONFIG_SECRET, NULL,
     "the job's secret (32 hex digits); every connection proves it knows it; never printed", NULL},
    /* What tprun's binding service (launcher/bind) chose for the rank; absent under other launchers. */
    {"TP_GPU_BUS_ID", "gpu_bus_id", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "the PCI bus id of this rank's GPU (0000:3b:00.0), the one its CUDA_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES names",
     NULL},
    {"TP_BIND_CPUS", "bind_cpus", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "the CPUs tprun bound this rank to (0-15,32-47), or those it inherited when not bound", NULL},
    {"TP_BIND_NUMA", "bind_numa", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "the NUMA node this rank's memory is bound to, or - when not bound", NULL},
    {"TP_BIND_WHY", "bind_why", TP_CONFIG_STRING, TP_CONFIG_LAUNCHER, NULL,
     "why tprun bound this rank as it did (nearest GPU 0000:3b:00.0, --bind-to none, oversubscribed: not bound, ...)",
     NULL},
    /* Settings a user may change; those marked agree must match on every rank. */
    {"TP_BOOT_TIMEOUT", "boot_timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_AGREE, "60",
     "seconds to wait for every rank to check in before the bootstrap fails naming the missing ranks; also the "
     "longest a peer may be silent before its fate starts, or while its fate thread (on this host) is runnable, "
     "waiting for a CPU",
     NULL},
    {"TP_BOOT_REPORT", "boot_report", TP_CONFIG_SECONDS, TP_CONFIG_USER, "2",
     "seconds between 'waiting for ranks ...' messages while the bootstrap waits", NULL},
    {"TP_HEARTBEAT_TIMEOUT", "heartbeat_timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_AGREE, "1",
     "seconds without a heartbeat after which a peer counts as hung and the job fails (a peer on this host whose fate "
     "thread waits for a CPU is not hung: TP_BOOT_TIMEOUT bounds it)",
     NULL},
    {"TP_TEST_TABLE_DELAY", "test_table_delay", TP_CONFIG_SECONDS, TP_CONFIG_USER, NULL,
     "for tests: seconds rank 0 waits after each bootstrap table it sends, as a loaded machine may; unset: none", NULL},
    {"TP_TEST_FATE_BURN", "test_fate_burn", TP_CONFIG_SECONDS, TP_CONFIG_USER, NULL,
     "for tests: seconds of CPU time the fate thread spends before each heartbeat round, as one among thousands of "
     "peers would; unset: none",
     NULL},
    {"TP_TEST_INIT_FAIL", "test_init_fail", TP_CONFIG_INT, TP_CONFIG_USER, NULL,
     "for tests: the rank whose tp_init fails once its fate has started, as a connection refused then would; unset: "
     "none",
     NULL},
    {"TP_ERRORS", "errors", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_AGREE, "fatal",
     "fatal: a call that meets a peer's failure does not return (the rank names the first failure, runs the fate "
     "callbacks and exits with 70); return: the call returns it to the engine",
     check_errors},
    {"TP_PART_BYTES", "part_bytes", TP_CONFIG_SIZE, TP_CONFIG_USER | TP_CONFIG_AGREE, "4M",
     "large collectives move in parts of this many bytes (64 to 1G)", check_part_bytes},
    {"TP_TRANSPORTS", "transports", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_AGREE, "",
     "transports to use, comma-separated in order, or ^name to exclude; empty means all (tprun --info lists the components)",
     check_transports},
    {"TP_CONNECT", "connect", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_AGREE, "lazy",
     "lazy: a transport connects to a peer the first time a call needs it (tp_init only exchanges the records); "
     "eager: every connection is made in tp_init",
     check_connect},
    {"TP_SPIN_US", "spin_us", TP_CONFIG_INT, TP_CONFIG_USER, "50",
     "microseconds a waiting rank spins before it blocks in the kernel", NULL},
    {"TP_IFNAME", "ifname", TP_CONFIG_STRING, TP_CONFIG_USER, "",
     "interfaces peers may be reached on, as NCCL_SOCKET_IFNAME: prefixes (eth,ib), =exact names, ^excluded; "
     "empty: any on a /24 the two ranks share",
     NULL},
    {"TP_REPORT_BINDINGS", "report_bindings", TP_CONFIG_BOOL, TP_CONFIG_USER, "0",
     "rank 0 prints one table: each rank's host, CPUs, NUMA node, GPU, HCA ports and TCP interface, then why "
     "(tprun --report-bindings); TP_LOG_LEVEL=debug adds each rank's interface per peer",
     NULL},
    {"TP_SYSFS_ROOT", "sysfs_root", TP_CONFIG_STRING, TP_CONFIG_USER, "/sys",
     "where sysfs is read (GPUs, RoCE HCAs, NUMA nodes, PCI paths): another directory replays a captured or generated machine",
     check_sysfs_root},
    {"TP_GPUS", "gpus", TP_CONFIG_STRING, TP_CONFIG_USER, "",
     "the GPUs a host's ranks take by local rank: PCI bus ids (0000:3b:00.0) or indexes in bus id order, "
     "comma-separated; overrides CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES",
     NULL},
    {"TP_HCA", "hca", TP_CONFIG_STRING, TP_CONFIG_USER, "",
     "RoCE HCA ports to consider, as NCCL_IB_HCA: prefixes (mlx5), =exact names, ^excluded, name:port for one port; "
     "empty: every active RoCE port; of those, each rank uses the ones on a /24 its peers on other hosts also list",
     check_hca},
    {"TP_GID_INDEX", "gid_index", TP_CONFIG_STRING, TP_CONFIG_USER, "auto",
     "the GID table index of the RoCE ports, or auto: the lowest IPv4 RoCE v2 GID on a /24 the peer also lists",
     check_gid_index},
    {"TP_LOG_LEVEL", "log_level", TP_CONFIG_STRING, TP_CONFIG_USER, "warn", "error, warn, info, debug or trace",
     check_log_level},
    {"TP_ENV_CHECKED", "env_checked", TP_CONFIG_BOOL, TP_CONFIG_TPRUN, "0",
     "set to 1 by tprun once it has warned about unknown TP_* names, so its ranks do not warn again", NULL},
    {0},
};
