/*
 * nccl_comm.c: NCCL communicators for libtp's comms: made lazily by the first call on CUDA memory (the unique id
 * travels through the comm's host engine), nonblocking so that fate can abort them, and aborted by fate.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_provider.h"

#define ABORT_LOCK_NS 20000000LL /* how long fate's abort waits for a call to leave NCCL (enqueues return fast) */
#define ABORT_WAIT_NS 50000000LL /* how long the fate thread waits for the aborts before it goes on */
#define POLL_NS       20000L

static struct {
    pthread_mutex_t lock; /* the list */
    nccl_state_t *live;
    int registered;
    pthread_mutex_t calls; /* held while this process is inside an NCCL call: NCCL forbids an abort then */
    atomic_int aborted;
    pthread_mutex_t done_lock;
    pthread_cond_t done_cond;
    int done;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .calls = PTHREAD_MUTEX_INITIALIZER,
       .done_lock = PTHREAD_MUTEX_INITIALIZER,
       .done_cond = PTHREAD_COND_INITIALIZER};

static void *abort_main(void *arg)
{
    (void)arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += ABORT_LOCK_NS;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    /* A thread stuck inside a call (a blocking library) must not keep the others' kernels running: abort anyway. */
    int locked = pthread_mutex_timedlock(&g.calls, &until) == 0;
    pthread_mutex_lock(&g.lock);
    for (nccl_state_t *st = g.live; st != NULL; st = st->next) {
        if (st->lib == NULL) continue;
        if (st->nc != NULL) st->lib->comm_abort(st->nc);
        st->nc = NULL;
        for (int p = 0; st->pairs != NULL && p < st->size; p++) {
            if (st->pairs[p] != NULL) st->lib->comm_abort(st->pairs[p]);
            st->pairs[p] = NULL;
        }
    }
    pthread_mutex_unlock(&g.lock);
    if (locked) pthread_mutex_unlock(&g.calls);
    pthread_mutex_lock(&g.done_lock);
    g.done = 1;
    pthread_cond_broadcast(&g.done_cond);
    pthread_mutex_unlock(&g.done_lock);
    return NULL;
}

/* Fate's callback: a peer died, so every kernel waiting on it must end now, not when NCCL notices (it may never). */
static void on_fate(const tp_failure_t *failure, void *arg)
{
    (void)failure;
    (void)arg;
    if (atomic_exchange(&g.aborted, 1)) return;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int started = pthread_create(&t, &attr, abort_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
        abort_main(NULL);
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += ABORT_WAIT_NS;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&g.done_lock);
    while (!g.done && pthread_cond_timedwait(&g.done_cond, &g.done_lock, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&g.done_lock);
}

tp_status_t nccl_comm_create(tp_comm_t *comm, void **state)
{
    nccl_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) return TP_ERR_NO_MEMORY;
    st->comm = comm;
    st->rank = tp_comm_rank(comm);
    st->size = tp_comm_size(comm);
    const char *order = tp_comm_setting(comm, "nccl_order"), *timeout = tp_comm_setting(comm, "boot_timeout");
    st->nccl_order = order != NULL && strcmp(order, "nccl") == 0;
    st->timeout_s = timeout != NULL ? strtod(timeout, NULL) : 60.0;
    if (!(st->timeout_s > 0) || st->timeout_s > 1e7) st->timeout_s = 60.0; /* the setting's own bounds */
    pthread_mutex_lock(&g.lock);
    st->next = g.live;
    g.live = st;
    pthread_mutex_unlock(&g.lock);
    *state = st;
    return TP_OK;
}

static nccl_result_t settle(const nccl_state_t *st, nccl_comm_t c);

/* Finalize flushes this rank's work; one that fails or does not end in time (a peer gone) leaves only abort. */
static void release(const nccl_state_t *st, nccl_comm_t c)
{
    if (c == NULL) return;
    nccl_result_t r = st->lib->comm_finalize(c);
    if ((r == NCCL_OK || r == NCCL_IN_PROGRESS) && settle(st, c) == NCCL_OK && st->lib->comm_destroy(c) == NCCL_OK)
        return;
    st->lib->comm_abort(c);
}

void nccl_comm_destroy(void *state)
{
    nccl_state_t *st = state;
    if (st == NULL) return;
    pthread_mutex_lock(&g.lock);
    for (nccl_state_t **p = &g.live; *p != NULL; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            break;
        }
    pthread_mutex_unlock(&g.lock);
    if (st->lib != NULL && !atomic_load(&g.aborted)) {
        pthread_mutex_lock(&g.calls);
        if (st->scratch_done != NULL) {
            st->scratch_dev->event_sync(NULL, &st->scratch_done);
            st->scratch_dev->event_release(NULL, &st->scratch_done);
        }
        if (st->scratch != NULL) st->lib->mem_free(st->scratch);
        release(st, st->nc);
        for (int p = 0; st->pairs != NULL && p < st->size; p++) release(st, st->pairs[p]);
        pthread_mutex_unlock(&g.calls);
    }
    free(st->pairs);
    free(st->pair_declined);
    free(st->hellos);
    free(st);
}

/*
 * Waits while c is in progress, up to the comm's bound; its state, or NCCL_IN_PROGRESS when the bound passed. Once
 * fate aborted the communicators (g.aborted is set before any is touched) c is never used again: the abort may have
 * freed it, or cleared the comm's pointer that the caller read after its call returned (c NULL).
 */
static nccl_result_t settle(const nccl_state_t *st, nccl_comm_t c)
{
    int64_t until = tp_now_ns() + (int64_t)(st->timeout_s * 1e9);
    for (;;) {
        if (c == NULL || atomic_load(&g.aborted)) return NCCL_REMOTE_ERROR;
        nccl_result_t state = NCCL_INTERNAL_ERROR;
        nccl_result_t r = st->lib->comm_get_async_error(c, &state);
        if (r != NCCL_OK) return r;
        if (state != NCCL_IN_PROGRESS) return state;
        if (tp_now_ns() > until) return NCCL_IN_PROGRESS;
        struct timespec ts = {0, POLL_NS};
        nanosleep(&ts, NULL);
    }
}

static tp_status_t status_of(nccl_result_t r)
{
    return r == NCCL_REMOTE_ERROR || r == NCCL_SYSTEM_ERROR ? TP_ERR_PEER_FAILED : TP_ERR_SYSTEM;
}

tp_status_t nccl_check(nccl_state_t *st, const char *fn, nccl_comm_t nc, nccl_result_t r)
{
    if (r == NCCL_OK || r == NCCL_IN_PROGRESS) r = settle(st, nc);
    if (r == NCCL_OK) return TP_OK;
    if (atomic_load(&g.aborted)) return st->failed = TP_ERR_ABORTED;
    if (r == NCCL_IN_PROGRESS)
        tp_log(TP_LOG_ERROR, "nccl", "%s: NCCL did not take the call within %g s (TP_BOOT_TIMEOUT)", fn, st->timeout_s);
    else tp_log(TP_LOG_ERROR, "nccl", "%s: NCCL: %s", fn, nccl_lib_error(st->lib, r));
    return st->failed = r == NCCL_IN_PROGRESS ? TP_ERR_PEER_FAILED : status_of(r);
}

/* What ranks tell each other before a communicator: whether NCCL loaded, the GPU the call's stream runs on (its host
 * and PCI bus id: NCCL refuses two ranks on one GPU), and the unique id when NCCL loaded. */
typedef struct nccl_hello {
    int32_t have;
    int32_t id_ok;
    int32_t node;
    char bus[32];
    nccl_id_t id;
} nccl_hello_t;

static void hello_fill(nccl_hello_t *h, const nccl_state_t *st, const tp_coll_args_t *a, const nccl_lib_t *lib,
                       int make_id)
{
    memset(h, 0, sizeof(*h));
    h->have = lib != NULL;
    h->node = tp_comm_node_rank(st->comm);
    if (a->device->stream_bus_id(a->stream, h->bus, sizeof(h->bus)) != TP_OK) h->bus[0] = '\0'; /* not known */
    h->bus[sizeof(h->bus) - 1] = '\0';
    if (lib != NULL && make_id) h->id_ok = lib->get_unique_id(&h->id) == NCCL_OK;
}

/* Why NCCL cannot take these ranks (into why), or 0: one has no NCCL, or two share a GPU. ranks names h[i] in the
 * message (NULL: the comm's ranks, h[i] is rank i). */
static int unusable(const nccl_hello_t *h, const int *ranks, int n, const char *lib_why, char *why, size_t len)
{
    for (int p = 0; p < n; p++)
        if (!h[p].have) {
            snprintf(why, len, "%s", lib_why[0] != '\0' ? lib_why : "another rank has no usable NCCL");
            return 1;
        }
    for (int p = 0; p < n; p++)
        for (int q = p + 1; q < n; q++)
            if (h[p].bus[0] != '\0' && h[p].node == h[q].node && strcmp(h[p].bus, h[q].bus) == 0) {
                snprintf(why, len, "ranks %d and %d share GPU %s on one host (NCCL needs a GPU per rank)",
                         ranks ? ranks[p] : p, ranks ? ranks[q] : q, h[p].bus);
                return 1;
            }
    return 0;
}

/* First use by this process: fate aborts every communicator when a peer dies. */
static tp_status_t first_use(void)
{
    pthread_mutex_lock(&g.lock);
    tp_status_t s = g.registered ? TP_OK : tp_fate_register(on_fate, NULL);
    if (s == TP_OK) g.registered = 1;
    pthread_mutex_unlock(&g.lock);
    return s;
}

static tp_status_t init_comm(nccl_state_t *st, const char *fn, const nccl_lib_t *lib, const nccl_hello_t *root, int n,
                             int rank, nccl_comm_t *out)
{
    if (!root->id_ok) {
        tp_log(TP_LOG_ERROR, "nccl", "%s: ncclGetUniqueId failed on the comm's first rank (see its log)", fn);
        return st->failed = TP_ERR_SYSTEM;
    }
    tp_status_t s = first_use();
    if (s != TP_OK) return st->failed = s;
    nccl_config_t cfg = {.size = sizeof(cfg),
                         .magic = NCCL_CONFIG_MAGIC,
                         .version = NCCL_CONFIG_VERSION,
                         .blocking = 0, /* calls return at once: fate can abort, and init is bounded here */
                         .cga_cluster_size = NCCL_CONFIG_UNDEF,
                         .min_ctas = NCCL_CONFIG_UNDEF,
                         .max_ctas = NCCL_CONFIG_UNDEF,
                         .net_name = NULL};
    nccl_comm_t c = NULL;
    st->lib = lib;
    pthread_mutex_lock(&g.calls);
    nccl_result_t r = lib->comm_init_rank_config(&c, n, root->id, rank, &cfg);
    pthread_mutex_unlock(&g.calls);
    if ((r == NCCL_OK || r == NCCL_IN_PROGRESS) && c != NULL) r = settle(st, c);
    if (r != NCCL_OK) {
        if (r == NCCL_IN_PROGRESS)
            tp_log(TP_LOG_ERROR, "nccl",
                   "%s: NCCL's communicator init (%d ranks) did not finish within %g s "
                   "(TP_BOOT_TIMEOUT)",
                   fn, n, st->timeout_s);
        else tp_log(TP_LOG_ERROR, "nccl", "%s: NCCL's communicator init (%d ranks): %s", fn, n, nccl_lib_error(lib, r));
        if (c != NULL) lib->comm_abort(c);
        return st->failed = r == NCCL_IN_PROGRESS ? TP_ERR_PEER_FAILED : status_of(r);
    }
    pthread_mutex_lock(&g.lock); /* fate's abort reads it */
    *out = c;
    pthread_mutex_unlock(&g.lock);
    return TP_OK;
}

static tp_status_t usable(nccl_state_t *st)
{
    if (atomic_load(&g.aborted)) return st->failed = TP_ERR_ABORTED;
    return st->failed;
}

tp_status_t nccl_ready(nccl_state_t *st, const char *fn, const tp_coll_args_t *a)
{
    tp_status_t s = usable(st);
    if (s != TP_OK || st->nc != NULL) return s;
    if (st->declined) return TP_COLL_DECLINED;
    char why[512] = "";
    const nccl_lib_t *lib = nccl_lib_load(why, sizeof(why));
    nccl_hello_t mine, *all = calloc((size_t)st->size, sizeof(*all));
    if (all == NULL) return TP_ERR_NO_MEMORY;
    hello_fill(&mine, st, a, lib, st->rank == 0);
    /* Every rank takes the same path: one on NCCL and one staging would wait for each other forever. */
    s = tp_all_gather(st->comm, &mine, all, sizeof(mine), TP_BYTES, NULL);
    char none[512];
    if (s == TP_OK && unusable(all, NULL, st->size, lib == NULL ? why : "", none, sizeof(none))) {
        st->declined = 1;
        tp_log(lib == NULL ? TP_LOG_INFO : TP_LOG_WARN, "nccl",
               "%s: not using NCCL for CUDA buffers on comm of %d ranks: %s", fn, st->size, none);
        st->hellos = all;
        return TP_COLL_DECLINED;
    }
    if (s == TP_OK) s = init_comm(st, fn, lib, &all[0], st->size, st->rank, &st->nc);
    free(all);
    return s;
}

tp_status_t nccl_pair(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, nccl_comm_t *nc, int *nc_peer)
{
    int peer = a->peer;
    tp_status_t s = usable(st);
    if (s != TP_OK) return s;
    if (st->nc != NULL) {
        *nc = st->nc;
        *nc_peer = peer;
        return TP_OK;
    }
    if (st->pairs == NULL) {
        st->pairs = calloc((size_t)st->size, sizeof(*st->pairs));
        st->pair_declined = calloc((size_t)st->size, 1);
        if (st->pairs == NULL || st->pair_declined == NULL) return TP_ERR_NO_MEMORY;
    }
    if (st->pairs[peer] == NULL && !st->pair_declined[peer] && st->hellos != NULL) {
        /* The comm's hellos say it already, with no host call: one now would first wait for the staged calls queued
         * before it, which may wait for a stream the engine holds (stage_check later hung so on the H200). */
        nccl_hello_t two[2] = {st->hellos[st->rank < peer ? st->rank : peer],
                               st->hellos[st->rank < peer ? peer : st->rank]};
        char none[512];
        if (unusable(two, NULL, 2, "another rank has no usable NCCL", none, sizeof(none))) st->pair_declined[peer] = 1;
    }
    if (st->pairs[peer] == NULL && !st->pair_declined[peer]) {
        char why[512] = "";
        const nccl_lib_t *lib = nccl_lib_load(why, sizeof(why));
        nccl_hello_t two[2];
        int me = st->rank < peer ? 0 : 1, ranks[2] = {me == 0 ? st->rank : peer, me == 0 ? peer : st->rank};
        hello_fill(&two[me], st, a, lib, me == 0);
        /* Both sides of a point-to-point call are here: the pair agrees alone (the comm's others are elsewhere). */
        s = tp_exchange(st->comm, &two[me], &two[1 - me], sizeof(two[0]), TP_BYTES, peer, NULL);
        if (s != TP_OK) return s;
        nccl_hello_t mine = two[me], theirs = two[1 - me];
        char none[512];
        if (unusable(two, ranks, 2, lib == NULL ? why : "", none, sizeof(none))) {
            st->pair_declined[peer] = 1;
            tp_log(lib == NULL ? TP_LOG_INFO : TP_LOG_WARN, "nccl",
                   "%s: not using NCCL for CUDA buffers with rank %d: %s", fn, peer, none);
        } else {
            s = init_comm(st, fn, lib, st->rank < peer ? &mine : &theirs, 2, st->rank < peer ? 0 : 1, &st->pairs[peer]);
            if (s != TP_OK) return s;
        }
    }
    if (st->pair_declined[peer]) return TP_COLL_DECLINED;
    *nc = st->pairs[peer];
    *nc_peer = st->rank < peer ? 1 : 0;
    return TP_OK;
}

tp_status_t nccl_scratch(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, size_t len, void **out)
{
    tp_status_t s = TP_OK;
    if (len > st->scratch_len) {
        if (st->scratch_done != NULL) { /* the old block may still be read by the last call's kernels */
            s = st->scratch_dev->event_sync(NULL, &st->scratch_done);
            st->scratch_dev->event_release(NULL, &st->scratch_done);
        }
        if (st->scratch != NULL) st->lib->mem_free(st->scratch);
        st->scratch = NULL;
        st->scratch_len = 0;
        size_t want = 1u << 20;
        while (want < len) want *= 2;
        if (s == TP_OK && st->lib->mem_alloc(&st->scratch, want) != NCCL_OK) {
            tp_log(TP_LOG_ERROR, "nccl", "%s: ncclMemAlloc of %zu bytes of scratch failed (GPU memory full?)", fn,
                   want);
            st->scratch = NULL;
            return TP_ERR_NO_MEMORY;
        }
        if (s != TP_OK) return s;
        st->scratch_len = want;
    } else if (st->scratch_done != NULL && st->scratch_dev == a->device && st->scratch_stream != a->stream->native) {
        s = a->device->stream_wait(a->stream, &st->scratch_done); /* another stream's call may still read it */
    } else if (st->scratch_done != NULL && st->scratch_dev != a->device) {
        s = st->scratch_dev->event_sync(NULL, &st->scratch_done);
        st->scratch_dev->event_release(NULL, &st->scratch_done);
    }
    if (s != TP_OK) {
        tp_log(TP_LOG_ERROR, "nccl", "%s: cannot order the call after the last use of its scratch", fn);
        return s;
    }
    *out = st->scratch;
    return TP_OK;
}

tp_status_t nccl_scratch_done(nccl_state_t *st, const tp_coll_args_t *a)
{
    st->scratch_dev = a->device;
    st->scratch_stream = a->stream->native;
    return a->device->event_record(a->stream, &st->scratch_done);
}

void nccl_lock_calls(void) { pthread_mutex_lock(&g.calls); }
void nccl_unlock_calls(void) { pthread_mutex_unlock(&g.calls); }
