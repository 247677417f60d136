/* coll_dispatch.c: the collective providers in order: those added at run time, then the registration list's; per
 * call, the first that takes the buffers' memory type. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_dispatch.h"
#include "coll_internal.h"
#include "runtime_components.h"
#include "runtime_devices.h"
#include "runtime_fate.h"
#include "runtime_stream.h"

/* Added by tp_coll_provider_add, most recent first; the list's follow (the built-in host engine, which takes host
 * memory and every call, is listed last). */
static const tp_coll_ops_t *providers[TP_COLL_PROVIDERS_MAX];
static int n_providers;

/* Every provider in order of preference; returns how many. */
static int all_providers(const tp_coll_ops_t **out)
{
    int n = 0;
    for (int i = 0; i < n_providers; i++) out[n++] = providers[i];
    for (size_t i = 0; i < tp_components_len && n < TP_COLL_PROVIDERS_MAX; i++)
        if (tp_components[i].kind == TP_COMPONENT_COLL) out[n++] = tp_components[i].ops;
    return n;
}

tp_status_t tp_coll_provider_add(const tp_coll_ops_t *ops)
{
    if (ops == NULL || ops->abi_version != TP_COLL_ABI || ops->ops_size != sizeof(tp_coll_ops_t)) {
        tp_log(TP_LOG_ERROR, "coll",
               "collective provider %s: built for collective ABI %u (%u bytes), this libtp has %u (%zu bytes)",
               ops != NULL && ops->name != NULL ? ops->name : "(null)", ops != NULL ? ops->abi_version : 0,
               ops != NULL ? ops->ops_size : 0, TP_COLL_ABI, sizeof(tp_coll_ops_t));
        return TP_ERR_INVALID;
    }
    if (n_providers == TP_COLL_PROVIDERS_MAX - 1) {
        tp_log(TP_LOG_ERROR, "coll", "collective provider %s: the list is full (%d providers)", ops->name,
               TP_COLL_PROVIDERS_MAX);
        return TP_ERR_NO_MEMORY;
    }
    for (int i = n_providers; i > 0; i--) providers[i] = providers[i - 1];
    providers[0] = ops;
    n_providers++;
    return TP_OK;
}

int tp_coll_streams_taken(void)
{
    const tp_coll_ops_t *all[TP_COLL_PROVIDERS_MAX];
    int n = all_providers(all);
    for (int i = 0; i < n; i++)
        if (all[i]->streams) return 1;
    return 0;
}

tp_status_t tp_coll_usable(tp_comm_t *comm, const char *fn, tp_stream_t *stream)
{
    coll_comm_t *cc = comm->coll_state;
    tp_status_t failed = tp_fate_failed();
    if (failed != TP_OK) return tp_coll_finish(cc, failed, fn); /* the job failed: every comm with it */
    if (cc->failed != TP_OK) {
        tp_log(TP_LOG_ERROR, "coll", "%s: comm %u failed an earlier call (%s)", fn, comm->comm_id,
               tp_status_string(cc->failed));
        return cc->failed;
    }
    if (stream != NULL && tp_stream_check(fn, stream) != TP_OK) return TP_ERR_INVALID;
    if (stream != NULL && !tp_coll_streams_taken()) {
        tp_log(TP_LOG_ERROR, "coll",
               "%s: stream must be NULL: this libtp has no device streams (buffers are host memory)", fn);
        return TP_ERR_UNSUPPORTED;
    }
    return TP_OK;
}

/* Whether a provider takes a call's stream: one with streams takes only calls given a stream (their buffers' kind,
 * checked before), one without only calls without, so host memory goes to the host engine unless a stream says
 * otherwise. */
static int takes_stream(const tp_coll_ops_t *ops, const tp_coll_args_t *args)
{
    return (args->stream != NULL) == (ops->streams != 0);
}

/* The first provider after index after that takes the call's memory type and call, with its state; NULL when none. */
static const tp_coll_ops_t *next_provider(coll_comm_t *cc, const tp_coll_args_t *args, int after, void **state)
{
    for (int i = after + 1; i < cc->n; i++) {
        const tp_coll_ops_t *ops = cc->ops[i];
        if ((ops->mem_types & TP_MEM_BIT(args->mem_type)) && (ops->calls & TP_CALL_BIT(args->call)) &&
            takes_stream(ops, args)) {
            *state = cc->state[i];
            return ops;
        }
    }
    return NULL;
}

static int provider_index(const coll_comm_t *cc, const tp_coll_ops_t *ops)
{
    for (int i = 0; i < cc->n; i++)
        if (cc->ops[i] == ops) return i;
    return cc->n;
}

/* Live comms, most recent first (split and destroy may run on any thread), and the counts of destroyed ones: a peer
 * may still be receiving what this rank sent on a comm before it destroyed it. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static coll_comm_t *live;
static char *retired;
static size_t retired_len, retired_cap;

/* Appends formatted text to a buffer that grows as needed; -1 (the buffer unchanged) when out of memory. */
static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*buf != NULL ? *buf + *len : NULL, *buf != NULL ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return -1;
        if (*buf != NULL && (size_t)n < *cap - *len) {
            *len += (size_t)n;
            return 0;
        }
        size_t c = *cap ? *cap : 256;
        while (c < *len + (size_t)n + 1) c *= 2;
        char *g = realloc(*buf, c);
        if (g == NULL) return -1;
        *buf = g;
        *cap = c;
    }
}

/* Appends cc's counts (tp_coll_stop_table's lines); -1 when out of memory, with nothing of cc's appended. */
static int stop_lines(coll_comm_t *cc, char **buf, size_t *len, size_t *cap)
{
    coll_state_t *cs = tp_coll_host_state(cc);
    size_t start = *len;
    int bad = appendf(buf, len, cap, "c %" PRIu32 " %" PRIu64 "\n", cc->comm->comm_id, cc->comm->seq);
    for (int p = 0; cs != NULL && !bad && p < cc->comm->size; p++)
        if (cs->send_seq[p] != 0 || cs->recv_seq[p] != 0)
            bad = appendf(buf, len, cap, "p %" PRIu32 " %d %" PRIu64 " %" PRIu64 "\n", cc->comm->comm_id,
                          cc->comm->world_ranks[p], cs->send_seq[p], cs->recv_seq[p]);
    if (bad && *buf != NULL) { /* a comm's counts go whole or not at all */
        *len = start;
        (*buf)[start] = '\0';
    }
    return bad ? -1 : 0;
}

tp_status_t tp_coll_comm_init(tp_comm_t *comm)
{
    coll_comm_t *cc = calloc(1, sizeof(*cc));
    if (cc == NULL) return TP_ERR_NO_MEMORY;
    comm->coll_state = cc;
    cc->comm = comm;
    pthread_mutex_lock(&live_lock);
    cc->next_live = live;
    live = cc;
    pthread_mutex_unlock(&live_lock);
    const tp_coll_ops_t *all[TP_COLL_PROVIDERS_MAX];
    int n = all_providers(all);
    for (; cc->n < n; cc->n++) {
        cc->ops[cc->n] = all[cc->n];
        tp_status_t s = cc->ops[cc->n]->comm_create(comm, &cc->state[cc->n]);
        if (s != TP_OK) {
            tp_coll_comm_fini(comm);
            return s;
        }
    }
    return TP_OK;
}

void tp_coll_comm_fini(tp_comm_t *comm)
{
    coll_comm_t *cc = comm->coll_state;
    if (cc == NULL) return;
    pthread_mutex_lock(&live_lock);
    for (coll_comm_t **pp = &live; *pp != NULL; pp = &(*pp)->next_live)
        if (*pp == cc) {
            *pp = cc->next_live;
            break;
        }
    if (cc->comm->comm_id != 0) { /* kept for tp_coll_stop_table; out of memory: a waiting peer is not told */
        (void)stop_lines(cc, &retired, &retired_len, &retired_cap);
    } else { /* the world ends with tp_finalize: nothing is retired then */
        free(retired);
        retired = NULL;
        retired_len = retired_cap = 0;
    }
    pthread_mutex_unlock(&live_lock);
    for (int i = cc->n - 1; i >= 0; i--) cc->ops[i]->comm_destroy(cc->state[i]);
    free(cc);
    comm->coll_state = NULL;
}

const tp_coll_ops_t *tp_coll_choose(coll_comm_t *cc, const char *fn, tp_coll_args_t *args, const void *a, const void *b,
                                    void **state)
{
    tp_mem_type_t ta = TP_MEM_HOST, tb = TP_MEM_HOST;
    const tp_device_ops_t *da = a != NULL ? tp_device_of(a, &ta) : NULL;
    const tp_device_ops_t *db = b == a ? da : b != NULL ? tp_device_of(b, &tb) : NULL; /* in place: asked once */
    if (b == a) tb = ta;
    if (da != NULL && db != NULL && (da != db || ta != tb)) {
        tp_log(TP_LOG_ERROR, "coll",
               "%s: the buffers are on two devices (%s memory of %s, %s memory of %s): give "
               "both on one",
               fn, tp_mem_type_name(ta), da->name, tp_mem_type_name(tb), db->name);
        return NULL;
    }
    args->device = db != NULL ? db : da != NULL ? da : &tp_host_device_ops;
    args->mem_type = db != NULL ? tb : ta;
    if (da == NULL && db == NULL && args->stream != NULL) { /* no bytes to move: the call is its stream's device's */
        args->device = args->stream->dev;
        args->mem_type = tp_stream_mem_type(args->stream->kind);
    }
    if (tp_stream_check_memory(fn, args->stream, args->mem_type, args->device) != TP_OK) return NULL;
    const tp_coll_ops_t *ops = next_provider(cc, args, -1, state);
    if (ops == NULL)
        tp_log(TP_LOG_ERROR, "coll", "%s: no collective provider takes %s memory of device %s %s", fn,
               tp_mem_type_name(args->mem_type), args->device->name,
               args->stream != NULL ? "with a stream" : "without a stream");
    return ops;
}

/* A call that runs now waits for the stream calls queued before it: they keep their order, and the transports one
 * user at a time. */
static tp_status_t in_order(const char *fn, const tp_coll_ops_t *ops)
{
    return ops->streams ? TP_OK : tp_staged_quiesce(fn);
}

/* Hands a checked call to the provider that takes its buffers (a and b, either may be NULL) and its stream; one that
 * declines (TP_COLL_DECLINED) passes it to the next. */
tp_status_t tp_coll_dispatch(tp_comm_t *comm, const char *fn, tp_coll_args_t *args, const void *a, const void *b)
{
    coll_comm_t *cc = comm->coll_state;
    void *state;
    const tp_coll_ops_t *ops = tp_coll_choose(cc, fn, args, a, b, &state);
    if (ops == NULL) return TP_ERR_UNSUPPORTED;
    char declined[128] = "";
    for (int n = 0;; n++) {
        tp_status_t s = in_order(fn, ops);
        if (s != TP_OK) return tp_coll_finish(cc, s, fn);
        tp_coll_fn fns[TP_CALLS] = {ops->barrier,    ops->broadcast,      ops->all_gather, ops->all_gatherv,
                                    ops->all_reduce, ops->reduce_scatter, ops->all_to_all, ops->send,
                                    ops->recv,       ops->exchange};
        s = fns[args->call](state, args);
        if (s != TP_COLL_DECLINED) return tp_coll_finish(cc, s, fn);
        size_t used = strlen(declined);
        snprintf(declined + used, sizeof(declined) - used, "%s%s", n > 0 ? ", " : "", ops->name);
        const tp_coll_ops_t *next = next_provider(cc, args, provider_index(cc, ops), &state);
        if (next == NULL) {
            tp_log(TP_LOG_ERROR, "coll", "%s: collective provider%s %s cannot take %s memory here, and no other does",
                   fn, n > 0 ? "s" : "", declined, tp_mem_type_name(args->mem_type));
            return TP_ERR_UNSUPPORTED;
        }
        ops = next;
    }
}

tp_status_t tp_coll_finish(coll_comm_t *cc, tp_status_t s, const char *fn)
{
    if (tp_fate_status(s)) s = tp_fate_call_failed(s, fn);
    if (tp_status_scope(s) >= TP_SCOPE_PEER && cc->failed == TP_OK) cc->failed = s;
    return s;
}

char *tp_coll_stop_table(void)
{
    char *out = NULL;
    size_t len = 0, cap = 0;
    pthread_mutex_lock(&live_lock);
    int bad = appendf(&out, &len, &cap, "%s", ""); /* a table even with no comm */
    for (coll_comm_t *cc = live; !bad && cc != NULL; cc = cc->next_live) bad = stop_lines(cc, &out, &len, &cap);
    if (!bad && retired != NULL) bad = appendf(&out, &len, &cap, "%s", retired);
    pthread_mutex_unlock(&live_lock);
    if (!bad) return out;
    free(out);
    return NULL;
}

void *tp_coll_host_state(coll_comm_t *cc)
{
    for (int i = 0; i < cc->n; i++)
        if (cc->ops[i] == &tp_host_coll_ops) return cc->state[i];
    return NULL;
}

tp_status_t tp_coll_unsupported(void *comm_state, const tp_coll_args_t *args)
{
    (void)comm_state;
    (void)args;
    return TP_ERR_UNSUPPORTED;
}
