/* runtime_init.c: tp_init and tp_finalize, the attributes they take, and what a comm tells its caller. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_dispatch.h"
#include "runtime_bootstrap.h"
#include "runtime_config.h"
#include "runtime_env.h"
#include "runtime_fate.h"
#include "runtime_iface.h"
#include "runtime_log.h"
#include "runtime_pmix.h"
#include "runtime_stream.h"
#include "runtime_record.h"
#include "runtime_transports.h"
#include "topo_report.h"

struct tp_attr {
    tp_setting_t *settings;
    int num_settings;
};

/* The settings libtp itself agrees on are "version" and every registered entry marked TP_CONFIG_AGREE; an engine
 * may not reuse these names. */
static int builtin_setting(const char *key)
{
    const tp_config_entry_t *agreed[TP_SETTINGS_MAX];
    int n = tp_config_agreed(agreed, TP_SETTINGS_MAX);
    for (int i = 0; i < n && i < TP_SETTINGS_MAX; i++)
        if (strcmp(key, agreed[i]->setting) == 0) return 1;
    return strcmp(key, "version") == 0;
}

/* LIB_FAILED: a tp_init failed after the bootstrap's table was in: the job knows this rank, which cannot rejoin. */
static enum { LIB_IDLE, LIB_ACTIVE, LIB_FINALIZED, LIB_FAILED } lib_state = LIB_IDLE;
static tp_world_t *the_world;

/* Staging's memory for a stream's device, made when the engine hands libtp the stream (runtime_stream.c's hook). */
static void prepare_stream(tp_stream_t *stream)
{
    if (the_world != NULL) tp_staged_prepare(stream, the_world);
}

tp_status_t tp_attr_create(tp_attr_t **attr)
{
    if (attr == NULL) return TP_ERR_INVALID;
    *attr = calloc(1, sizeof(**attr));
    return *attr ? TP_OK : TP_ERR_NO_MEMORY;
}

tp_status_t tp_attr_set_setting(tp_attr_t *attr, const char *key, const char *value)
{
    char why[256];
    if (attr == NULL) return TP_ERR_INVALID;
    if (!tp_setting_valid(key, value, why, sizeof(why))) {
        tp_log(TP_LOG_ERROR, "init", "%s", why);
        return TP_ERR_INVALID;
    }
    if (builtin_setting(key)) {
        tp_log(TP_LOG_ERROR, "init", "setting %s is libtp's own; choose another name", key);
        return TP_ERR_INVALID;
    }
    for (int i = 0; i < attr->num_settings; i++) {
        if (strcmp(attr->settings[i].key, key) == 0) {
            char *v = strdup(value);
            if (v == NULL) return TP_ERR_NO_MEMORY;
            free(attr->settings[i].value);
            attr->settings[i].value = v;
            return TP_OK;
        }
    }
    int builtin = 1 + tp_config_agreed(NULL, 0);
    if (attr->num_settings + builtin >= TP_SETTINGS_MAX) {
        tp_log(TP_LOG_ERROR, "init", "at most %d engine settings", TP_SETTINGS_MAX - builtin);
        return TP_ERR_INVALID;
    }
    tp_setting_t *s = realloc(attr->settings, (size_t)(attr->num_settings + 1) * sizeof(*s));
    if (s == NULL) return TP_ERR_NO_MEMORY;
    attr->settings = s;
    s[attr->num_settings].key = strdup(key);
    s[attr->num_settings].value = strdup(value);
    if (s[attr->num_settings].key == NULL || s[attr->num_settings].value == NULL) {
        free(s[attr->num_settings].key);
        free(s[attr->num_settings].value);
        return TP_ERR_NO_MEMORY;
    }
    attr->num_settings++;
    return TP_OK;
}

static void free_settings(tp_setting_t *s, int n)
{
    for (int i = 0; i < n; i++) {
        free(s[i].key);
        free(s[i].value);
    }
    free(s);
}

void tp_attr_destroy(tp_attr_t *attr)
{
    if (attr == NULL) return;
    free_settings(attr->settings, attr->num_settings);
    free(attr);
}

/* What this rank states for an agreed entry: the world contract's as the world was built (by whichever launcher),
 * a setting's as parsed, so that 4M and 4194304 agree. */
static void agreed_value(const tp_world_t *w, const tp_config_entry_t *e, char *out, size_t len)
{
    if (strcmp(e->env, "TP_WORLD_SIZE") == 0) snprintf(out, len, "%d", w->size);
    else if (strcmp(e->env, "TP_JOB_ID") == 0) snprintf(out, len, "%s", w->job_id);
    else tp_config_canonical(e, tp_config_value(e->env), out, len);
}

static tp_status_t build_settings(tp_world_t *w, const tp_attr_t *attr)
{
    const tp_config_entry_t *agreed[TP_SETTINGS_MAX];
    int n = tp_config_agreed(agreed, TP_SETTINGS_MAX), extra = attr ? attr->num_settings : 0;
    if (n > TP_SETTINGS_MAX - 1) n = TP_SETTINGS_MAX - 1;
    w->settings = calloc((size_t)(1 + n + extra), sizeof(*w->settings));
    if (w->settings == NULL) return TP_ERR_NO_MEMORY;
    char value[TP_SETTING_VALUE_MAX + 1];
    for (int i = 0; i < 1 + n + extra; i++) {
        const char *k = "version", *v = PACKAGE_VERSION;
        if (i > 0 && i <= n) {
            k = agreed[i - 1]->setting;
            agreed_value(w, agreed[i - 1], value, sizeof(value));
            v = value;
        } else if (i > n) {
            k = attr->settings[i - 1 - n].key;
            v = attr->settings[i - 1 - n].value;
        }
        w->settings[i].key = strdup(k);
        w->settings[i].value = strdup(v);
        w->num_settings = i + 1;
        if (w->settings[i].key == NULL || w->settings[i].value == NULL) return TP_ERR_NO_MEMORY;
    }
    return TP_OK;
}

static tp_comm_t *world_comm_create(tp_world_t *w)
{
    tp_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->world_ranks = malloc((size_t)w->size * sizeof(int))) == NULL) {
        free(c);
        return NULL;
    }
    c->world = w;
    c->rank = w->rank;
    c->size = w->size;
    for (int r = 0; r < w->size; r++) c->world_ranks[r] = r;
    c->local_rank = w->peers[w->rank].local_rank;
    c->local_size = w->peers[w->rank].local_size;
    c->node_rank = w->peers[w->rank].node_rank;
    return c;
}

/* TP_TEST_INIT_FAIL: the rank it names fails its tp_init once its fate runs, as a connection refused then would. */
static tp_status_t test_init_fail(const tp_world_t *w)
{
    const char *v = tp_config_value("TP_TEST_INIT_FAIL");
    int64_t rank;
    char err[128];
    if (v == NULL || tp_config_parse_int("TP_TEST_INIT_FAIL", v, &rank, err, sizeof(err)) != TP_OK || rank != w->rank)
        return TP_OK;
    tp_log(TP_LOG_ERROR, "init", "rank %d fails its tp_init after its fate started (TP_TEST_INIT_FAIL=%s)", w->rank, v);
    return TP_ERR_SYSTEM;
}

static void world_free(tp_world_t *w)
{
    if (w == NULL) return;
    if (w->boot_listen_fd >= 0) close(w->boot_listen_fd);
    free_settings(w->settings, w->num_settings);
    free(w->peers);
    free(w->peer_text);
    free(w->fate_fds);
    tp_iface_free(w);
    if (w->source == TP_WORLD_PMIX) tp_pmix_finalize(); /* PMIx hook */
    free(w);
}

#define INIT_PHASES 6
/* at[0..INIT_PHASES]: the clock before tp_init's first phase and after each. */
static void log_phases(const int64_t *at)
{
    static const char *name[INIT_PHASES] = {"reaching rank 0",   "transports open", "record exchange",
                                            "transport choice", "fate start",      "connections and comm"};
    char line[256];
    size_t o = 0;
    for (int i = 0; i < INIT_PHASES && o < sizeof(line); i++)
        o += (size_t)snprintf(line + o, sizeof(line) - o, "%s%s %.2f", i ? ", " : "", name[i],
                              (double)(at[i + 1] - at[i]) / 1e6);
    tp_log(TP_LOG_DEBUG, "init", "tp_init took %.2f ms: %s", (double)(at[INIT_PHASES] - at[0]) / 1e6, line);
}

tp_status_t tp_init(const tp_attr_t *attr, tp_comm_t **world_out)
{
    if (world_out == NULL) return TP_ERR_INVALID;
    if (lib_state == LIB_ACTIVE) {
        tp_log(TP_LOG_ERROR, "init", "tp_init called twice (call tp_finalize first)");
        return TP_ERR_STATE;
    }
    if (lib_state == LIB_FAILED) {
        tp_log(TP_LOG_ERROR, "init",
               "tp_init failed before, after the job learned of this rank: it cannot rejoin; start the job again");
        return TP_ERR_STATE;
    }
    tp_world_t *w = calloc(1, sizeof(*w));
    if (w == NULL) return TP_ERR_NO_MEMORY;
    int64_t at[INIT_PHASES + 1] = {tp_now_ns()}; /* where tp_init's time goes, for the debug log */
    tp_status_t s = tp_world_from_env(w);
    if (s == TP_OK) s = build_settings(w, attr);
    if (s == TP_OK && w->size > 1 && w->rank == 0) s = tp_boot_connect(w);
    /* PMIx hook: rank 0's listener address and a fresh job key reach the others through one fence. */
    if (s == TP_OK && w->size > 1 && w->source == TP_WORLD_PMIX) s = tp_pmix_share_boot(w);
    if (s == TP_OK && w->size > 1 && w->rank != 0) s = tp_boot_connect(w);
    if (s == TP_OK && w->size == 1) snprintf(w->advertise_ip, sizeof(w->advertise_ip), "127.0.0.1");
    at[1] = tp_now_ns();
    if (s == TP_OK) s = tp_transports_open(w);
    at[2] = tp_now_ns();
    if (s == TP_OK) s = tp_boot_exchange(w);
    at[3] = tp_now_ns();
    if (s != TP_OK) goto err_world;
    if (w->boot_listen_fd >= 0) {
        close(w->boot_listen_fd); /* every rank checked in: nobody else may connect */
        w->boot_listen_fd = -1;
    }
    /* Chosen per peer once the table is in; per-pair data crosses the bootstrap sockets before fate owns them. */
    if ((s = tp_transports_select(w)) != TP_OK || (s = tp_transports_exchange(w)) != TP_OK) goto err_boot_fds;
    at[4] = tp_now_ns();
    if ((s = tp_fate_start(w)) != TP_OK) goto err_boot_fds;
    at[5] = tp_now_ns();
    /* from here a failure is the job's: a peer that died before its connection was made, or this rank's own */
    if ((s = test_init_fail(w)) != TP_OK || (s = tp_transports_connect(w)) != TP_OK) goto err_fate;
    tp_iface_finish(w, tp_transports_name); /* before the engine creates NCCL or Gloo: they see the same interfaces */
    tp_topo_finish(w);                      /* and the same HCA ports */
    tp_comm_t *comm = world_comm_create(w);
    if (comm == NULL) {
        tp_log(TP_LOG_ERROR, "init", "out of memory for the world comm of %d ranks", w->size);
        s = TP_ERR_NO_MEMORY;
        goto err_fate;
    }
    if ((s = tp_coll_comm_init(comm)) != TP_OK) {
        free(comm->world_ranks);
        free(comm);
        goto err_fate;
    }
    at[6] = tp_now_ns();
    tp_log(TP_LOG_INFO, "init", "rank %d of %d joined job %s", w->rank, w->size, w->job_id);
    log_phases(at);
    the_world = w;
    lib_state = LIB_ACTIVE;
    tp_streams_created_hook(prepare_stream); /* streams made before tp_init now, later ones as they are made */
    *world_out = comm;
    return TP_OK;
err_fate: /* the job hears of it as of a failed call; fate's thread and fds end before the world they use */
    s = tp_fate_abandon(w, s, "tp_init");
err_boot_fds: /* fate has not taken them (or closed them): closing them tells rank 0 (or every rank) this one failed */
    if (w->size > 1) lib_state = LIB_FAILED; /* the bootstrap is over (rank 0 listens no more) and the job knows it */
    for (int r = 0; r < w->size; r++)
        if (w->fate_fds[r] >= 0) close(w->fate_fds[r]);
    tp_transports_close(w);
err_world:
    world_free(w);
    return s;
}

tp_status_t tp_finalize(tp_comm_t *world)
{
    if (world == NULL || lib_state != LIB_ACTIVE) return TP_OK;
    if (world->world != the_world || world->comm_id != 0) {
        tp_log(TP_LOG_ERROR, "init", "tp_finalize takes the world comm that tp_init returned");
        return TP_ERR_INVALID;
    }
    tp_world_t *w = world->world;
    int64_t start = tp_now_ns();
    tp_staged_drain(); /* queued stream calls count among the calls peers are told of */
    char *table = tp_coll_stop_table(); /* NULL (out of memory): peers waiting on this rank wait for the job's end */
    tp_status_t s = tp_fate_finalize(w, table);
    free(table);
    tp_log(TP_LOG_DEBUG, "init", "tp_finalize: fate's goodbye took %.2f ms", (double)(tp_now_ns() - start) / 1e6);
    tp_coll_comm_fini(world);
    tp_transports_close(w);
    free(world->world_ranks);
    free(world);
    world_free(w);
    tp_streams_created_hook(NULL);
    the_world = NULL;
    lib_state = LIB_FINALIZED;
    return s;
}

int tp_comm_rank(const tp_comm_t *c) { return c ? c->rank : -1; }
int tp_comm_size(const tp_comm_t *c) { return c ? c->size : -1; }
int tp_comm_local_rank(const tp_comm_t *c) { return c ? c->local_rank : -1; }
int tp_comm_local_size(const tp_comm_t *c) { return c ? c->local_size : -1; }
int tp_comm_node_rank(const tp_comm_t *c) { return c ? c->node_rank : -1; }
const char *tp_comm_job_id(const tp_comm_t *c) { return c ? c->world->job_id : NULL; }

tp_status_t tp_comm_peer(const tp_comm_t *c, int rank, tp_peer_info_t *info)
{
    if (c == NULL || info == NULL || rank < 0 || rank >= c->size) return TP_ERR_INVALID;
    const tp_peer_record_t *p = &c->world->peers[c->world_ranks[rank]];
    info->rank = rank;
    info->local_rank = p->local_rank;
    info->node_rank = p->node_rank;
    info->pid = p->pid;
    info->host = p->host;
    info->address = p->boot_ip;
    return TP_OK;
}

const char *tp_comm_setting(const tp_comm_t *c, const char *key)
{
    if (c == NULL || key == NULL) return NULL;
    for (int i = 0; i < c->world->num_settings; i++)
        if (strcmp(c->world->settings[i].key, key) == 0) return c->world->settings[i].value;
    return NULL;
}
