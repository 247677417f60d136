/*
 * coll_staged.c: the staging collective provider. A call on a stream only queues work there: the stream writes the
 * call's ready word, then waits for its done word. The proxy thread sees ready, runs the call (coll_staged_proxy.c)
 * and sets done. On a failure every done word is set, so no stream waits forever, and later calls return it.
 */
#include "coll_staged.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime_config.h"
#include "runtime_fate.h"

stage_t tp_stage = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

const char *const tp_stage_call_names[TP_CALLS] = {
    "tp_barrier",        "tp_broadcast",  "tp_all_gather", "tp_all_gatherv", "tp_all_reduce",
    "tp_reduce_scatter", "tp_all_to_all", "tp_send",       "tp_recv",        "tp_exchange"};

static uint64_t *ready_word(stage_lane_t *l, uint64_t seq) { return &l->words[seq % TP_STAGE_SLOTS]; }
static uint64_t *done_word(stage_lane_t *l, uint64_t seq) { return &l->words[TP_STAGE_SLOTS + seq % TP_STAGE_SLOTS]; }
static void *dev_addr(stage_lane_t *l, const uint64_t *word)
{
    return l->words_dev + ((const uint8_t *)word - (const uint8_t *)l->words);
}

/* Sets every done word of every lane past any sequence number: whatever a stream waits on, it goes on. Lock-free:
 * the fate thread calls it too. */
static void release_all_words(void)
{
    for (int i = 0; i < tp_stage.n_lanes; i++) {
        stage_lane_t *l = &tp_stage.lanes[i];
        if (l->words == NULL) continue;
        for (int k = 0; k < TP_STAGE_SLOTS; k++)
            __atomic_store_n(&l->words[TP_STAGE_SLOTS + k], (uint64_t)INT64_MAX, __ATOMIC_RELEASE);
    }
}

/* The fate path ends this rank (or returns the failure): streams held on our done words must not wait forever. */
static void on_fate(const tp_failure_t *failure, void *arg)
{
    (void)failure;
    (void)arg;
    release_all_words();
}

/* Fails the stage for good: logged once by whoever found s, every stream released, every queued call dropped. */
static void fail_locked(tp_status_t s, const char *why)
{
    if (tp_stage.failed == TP_OK) {
        tp_stage.failed = s;
        snprintf(tp_stage.why, sizeof(tp_stage.why), "%s", why);
    }
    release_all_words();
    for (uint64_t q = tp_stage.head + 1; q <= tp_stage.tail; q++) {
        stage_call_t *c = &tp_stage.ring[q % TP_STAGE_SLOTS];
        free(c->counts);
        c->counts = NULL;
        c->sc->queued--;
    }
    tp_stage.head = tp_stage.tail;
    pthread_cond_broadcast(&tp_stage.cond);
}

static void *proxy_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&tp_stage.lock);
    for (;;) {
        if (tp_stage.head == tp_stage.tail && !tp_stage.stop) { /* the next call is often near: no wakeup then */
            pthread_mutex_unlock(&tp_stage.lock);
            for (int64_t t0 = tp_now_ns(); __atomic_load_n(&tp_stage.tail, __ATOMIC_ACQUIRE) == tp_stage.head &&
                                           tp_now_ns() - t0 < tp_stage.spin_ns;) {
            }
            pthread_mutex_lock(&tp_stage.lock);
        }
        while (tp_stage.head == tp_stage.tail && !tp_stage.stop) pthread_cond_wait(&tp_stage.cond, &tp_stage.lock);
        if (tp_stage.head == tp_stage.tail) break;
        stage_call_t *c = &tp_stage.ring[(tp_stage.head + 1) % TP_STAGE_SLOTS];
        pthread_mutex_unlock(&tp_stage.lock);
        tp_status_t s = TP_OK;
        /* The engine's stream may run much later: only a cancel or the job's failure ends this wait. */
        int ready = tp_stage_poll(ready_word(c->lane, c->seq), c->seq, &c->cancelled, 0) == 1;
        if (ready) s = tp_stage_run(c);
        else if (!atomic_load(&c->cancelled)) s = tp_fate_failed();
        pthread_mutex_lock(&tp_stage.lock);
        if (s != TP_OK) {
            fail_locked(s, ready ? tp_last_error() : "the job failed before a queued call's stream reached it");
            continue;
        }
        __atomic_store_n(done_word(c->lane, c->seq), c->seq, __ATOMIC_RELEASE);
        free(c->counts);
        c->counts = NULL;
        c->sc->queued--;
        tp_stage.head++;
        pthread_cond_broadcast(&tp_stage.cond);
    }
    pthread_mutex_unlock(&tp_stage.lock);
    return NULL;
}

/* Reads TP_STAGE_TIMEOUT and starts the proxy; under the lock. */
static tp_status_t start_locked(const char *fn, tp_comm_t *comm)
{
    double timeout_s = 30;
    char err[256];
    const char *v = tp_config_value("TP_STAGE_TIMEOUT");
    if (v != NULL && tp_config_parse_seconds("TP_STAGE_TIMEOUT", v, &timeout_s, err, sizeof(err)) != TP_OK) {
        tp_log(TP_LOG_ERROR, "stage", "%s: %s", fn, err);
        return TP_ERR_INVALID;
    }
    tp_stage.timeout_ns = (int64_t)(timeout_s * 1e9);
    tp_stage.spin_ns = (int64_t)comm->world->spin_us * 1000;
    if (!tp_stage.fate_hooked && tp_fate_register(on_fate, NULL) == TP_OK) tp_stage.fate_hooked = 1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay the engine's threads' business */
    int rc = pthread_create(&tp_stage.thread, NULL, proxy_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        tp_log(TP_LOG_ERROR, "stage", "%s: cannot start the staging proxy thread: %s", fn, strerror(rc));
        return TP_ERR_SYSTEM;
    }
    tp_stage.running = 1;
    return TP_OK;
}

/* The slab of a lane: two part sets of the world's largest call, made before any stream waits on the lane's words,
 * because pinned allocations synchronise the device: made by the proxy, one would wait for the very stream that waits
 * for the proxy. Sized by the world, as every comm is part of it. */
static tp_status_t slab_make(const char *fn, stage_lane_t *l, const tp_world_t *world)
{
    size_t n = world->size > 2 ? (size_t)world->size : 2, len = 2 * n * world->part_bytes;
    void *host, *dev;
    if (l->dev->host_alloc(len, &host, &dev) != TP_OK) {
        tp_log(TP_LOG_ERROR, "stage",
               "%s: device %s cannot give %zu bytes of pinned host memory for the staging slab (2 x %zu ranks x "
               "TP_PART_BYTES): lower TP_PART_BYTES",
               fn, l->dev->name, len, n);
        return TP_ERR_NO_MEMORY;
    }
    l->slab = host;
    l->slab_dev = dev;
    l->slab_len = len;
    return TP_OK;
}

/* The proxy's copy stream (like the caller's) and the slab of a lane; after a tp_finalize both are made again. */
static tp_status_t lane_fill(const char *fn, stage_lane_t *l, tp_stream_t *like, const tp_world_t *world)
{
    if (l->copy == NULL && l->dev->stream_create(like, &l->copy) != TP_OK) {
        tp_log(TP_LOG_ERROR, "stage", "%s: device %s cannot make the proxy's copy stream", fn, l->dev->name);
        return TP_ERR_UNSUPPORTED;
    }
    return l->slab == NULL ? slab_make(fn, l, world) : TP_OK;
}

/* The lane of dev, made on first use: its words, the proxy's copy stream and the slab; under the lock. */
static tp_status_t lane_of(const char *fn, const tp_device_ops_t *dev, tp_stream_t *like, const tp_world_t *world,
                           stage_lane_t **out)
{
    for (int i = 0; i < tp_stage.n_lanes; i++) {
        stage_lane_t *l = &tp_stage.lanes[i];
        if (l->dev != dev || l->words == NULL || l->stuck) continue;
        *out = l;
        return lane_fill(fn, l, like, world);
    }
    if (tp_stage.n_lanes == TP_STAGE_LANES) {
        tp_log(TP_LOG_ERROR, "stage", "%s: memory of %d devices is staged already; device %s is one too many", fn,
               TP_STAGE_LANES, dev->name);
        return TP_ERR_UNSUPPORTED;
    }
    stage_lane_t *l = &tp_stage.lanes[tp_stage.n_lanes];
    memset(l, 0, sizeof(*l));
    l->dev = dev;
    void *host, *daddr;
    if (dev->host_alloc((2 * TP_STAGE_SLOTS + 1) * sizeof(uint64_t), &host, &daddr) != TP_OK) {
        tp_log(TP_LOG_ERROR, "stage", "%s: device %s cannot give pinned host memory for the stream words", fn,
               dev->name);
        return TP_ERR_NO_MEMORY;
    }
    l->words = host;
    l->words_dev = daddr;
    tp_status_t s = lane_fill(fn, l, like, world);
    if (s != TP_OK) {
        if (l->copy != NULL) dev->stream_destroy(l->copy);
        dev->host_free(host);
        memset(l, 0, sizeof(*l));
        return s;
    }
    tp_stage.n_lanes++;
    *out = l;
    return TP_OK;
}

void tp_staged_prepare(tp_stream_t *stream, const tp_world_t *world)
{
    if (stream->dev->stream_capturing(stream) == TP_ERR_UNSUPPORTED) return; /* a device staging never takes */
    stage_lane_t *lane;
    pthread_mutex_lock(&tp_stage.lock);
    if (tp_stage.failed == TP_OK && lane_of("tp_stream_create", stream->dev, stream, world, &lane) != TP_OK)
        tp_log(TP_LOG_WARN, "stage", "device %s: staging's memory could not be made ahead; its first call tries again",
               stream->dev->name);
    pthread_mutex_unlock(&tp_stage.lock);
}

/* Every call with a stream: queue it on the caller's stream (ready, then wait for done) and hand it to the proxy. */
static tp_status_t stage_call(void *state, const tp_coll_args_t *a)
{
    stage_comm_t *sc = state;
    const char *fn = tp_stage_call_names[a->call];
    const tp_device_ops_t *dev = a->device;
    int capturing = dev->stream_capturing(a->stream);
    if (capturing != 0) {
        if (capturing > 0)
            tp_log(TP_LOG_ERROR, "stage",
                   "%s: the stream is capturing a graph, and a staged call cannot be captured (its proxy runs it "
                   "once): make the call outside the capture",
                   fn);
        if (capturing == TP_ERR_UNSUPPORTED) return TP_COLL_DECLINED; /* a device without stream work */
        return capturing > 0 ? TP_ERR_UNSUPPORTED : (tp_status_t)capturing;
    }
    size_t *counts = NULL;
    if (a->call == TP_CALL_ALL_GATHERV) {
        if ((counts = malloc((size_t)sc->comm->size * sizeof(size_t))) == NULL) return TP_ERR_NO_MEMORY;
        memcpy(counts, a->counts, (size_t)sc->comm->size * sizeof(size_t));
    }
    tp_status_t s = TP_OK;
    pthread_mutex_lock(&tp_stage.lock);
    stage_lane_t *lane = NULL;
    if (tp_stage.failed != TP_OK) {
        s = tp_stage.failed;
        tp_log(TP_LOG_ERROR, "stage", "%s: a stream call failed earlier (%s)", fn, tp_stage.why);
        goto out;
    }
    if ((s = lane_of(fn, dev, a->stream, sc->comm->world, &lane)) != TP_OK) goto out;
    if (!tp_stage.running && (s = start_locked(fn, sc->comm)) != TP_OK) goto out;
    while (tp_stage.tail - tp_stage.head >= TP_STAGE_SLOTS && tp_stage.failed == TP_OK)
        pthread_cond_wait(&tp_stage.cond, &tp_stage.lock); /* the oldest call's stream has yet to reach it */
    if ((s = tp_stage.failed) != TP_OK) goto out;
    uint64_t seq = tp_stage.tail + 1;
    if ((s = dev->stream_write64(a->stream, dev_addr(lane, ready_word(lane, seq)), seq)) != TP_OK) goto out;
    if ((s = dev->stream_wait64(a->stream, dev_addr(lane, done_word(lane, seq)), seq)) != TP_OK) {
        /* ready is queued without its wait: that word cannot be trusted again */
        fail_locked(s, "a stream wait could not be queued after its ready word");
        goto out;
    }
    stage_call_t *c = &tp_stage.ring[seq % TP_STAGE_SLOTS];
    c->sc = sc;
    c->a = *a;
    c->a.counts = counts;
    c->counts = counts;
    c->lane = lane;
    c->seq = seq;
    atomic_store(&c->cancelled, 0);
    counts = NULL;
    __atomic_store_n(&tp_stage.tail, seq, __ATOMIC_RELEASE);
    sc->queued++;
    atomic_store(&tp_stage.active, 1);
    pthread_cond_broadcast(&tp_stage.cond);
out:
    pthread_mutex_unlock(&tp_stage.lock);
    free(counts);
    return s;
}

tp_status_t tp_staged_quiesce(const char *fn)
{
    if (!atomic_load_explicit(&tp_stage.active, memory_order_acquire)) return TP_OK;
    pthread_mutex_lock(&tp_stage.lock);
    while (tp_stage.head != tp_stage.tail) pthread_cond_wait(&tp_stage.cond, &tp_stage.lock);
    tp_status_t s = tp_stage.failed;
    if (s != TP_OK) tp_log(TP_LOG_ERROR, "stage", "%s: a stream call failed earlier (%s)", fn, tp_stage.why);
    pthread_mutex_unlock(&tp_stage.lock);
    return s;
}

static tp_status_t stage_comm_create(tp_comm_t *comm, void **state)
{
    stage_comm_t *sc = calloc(1, sizeof(*sc));
    if (sc == NULL) return TP_ERR_NO_MEMORY;
    sc->comm = comm;
    *state = sc;
    return TP_OK;
}

/* Queued calls of sc (NULL: of every comm), each comm's counted by its own state. */
static int queued_of(const stage_comm_t *sc) { return sc != NULL ? sc->queued : (int)(tp_stage.tail - tp_stage.head); }

/* Waits for sc's calls (NULL: every comm's) up to TP_STAGE_TIMEOUT; those whose streams never reached them are
 * cancelled: their done words are set, so the streams go on without the data. */
static void drain_locked(stage_comm_t *sc)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + tp_stage.timeout_ns;
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    int rc = 0;
    while (queued_of(sc) > 0 && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&tp_stage.cond, &tp_stage.lock, &until);
    int left = queued_of(sc);
    if (left == 0) return;
    char which[32] = "every comm";
    if (sc != NULL) snprintf(which, sizeof(which), "comm %u", sc->comm->comm_id);
    tp_log(TP_LOG_ERROR, "stage",
           "%s ends with %d stream call%s that its streams did not reach within TP_STAGE_TIMEOUT (%.1f s): "
           "cancelled, their streams go on without the data",
           which, left, left == 1 ? "" : "s", (double)tp_stage.timeout_ns / 1e9);
    for (uint64_t q = tp_stage.head + 1; q <= tp_stage.tail; q++)
        if (sc == NULL || tp_stage.ring[q % TP_STAGE_SLOTS].sc == sc)
            atomic_store(&tp_stage.ring[q % TP_STAGE_SLOTS].cancelled, 1);
    while (queued_of(sc) > 0) pthread_cond_wait(&tp_stage.cond, &tp_stage.lock);
}

void tp_staged_drain(void)
{
    if (!atomic_load_explicit(&tp_stage.active, memory_order_acquire)) return;
    pthread_mutex_lock(&tp_stage.lock);
    drain_locked(NULL);
    pthread_mutex_unlock(&tp_stage.lock);
}

/* At the world's end: stops the proxy; frees each lane's stream and slab once its copies are known to have landed.
 * The words stay: an engine's stream may still run its waits on them after tp_finalize. */
static void shutdown_locked(void)
{
    if (tp_stage.running) {
        tp_stage.stop = 1;
        pthread_cond_broadcast(&tp_stage.cond);
        pthread_mutex_unlock(&tp_stage.lock);
        pthread_join(tp_stage.thread, NULL);
        pthread_mutex_lock(&tp_stage.lock);
        tp_stage.running = tp_stage.stop = 0;
    }
    for (int i = 0; i < tp_stage.n_lanes; i++) {
        stage_lane_t *l = &tp_stage.lanes[i];
        if (tp_stage.failed != TP_OK && !l->stuck) { /* its done words were set past every call: fresh ones next time */
            l->retired = l->words;
            l->words = NULL;
        }
        if (l->copy == NULL) continue;
        if (l->stuck && !tp_stage_copies_landed(l)) {
            tp_log(TP_LOG_ERROR, "stage",
                   "device %s: a copy of a timed-out call is still queued after TP_STAGE_TIMEOUT more: its slab and "
                   "stream are left allocated",
                   l->dev->name);
            continue;
        }
        l->dev->stream_destroy(l->copy);
        l->copy = NULL;
        if (l->slab != NULL) l->dev->host_free(l->slab);
        l->slab = l->slab_dev = NULL;
        l->slab_len = 0;
    }
    tp_stage.failed = TP_OK; /* a later tp_init starts afresh; a stuck lane is never used again */
}

/* tp_comm_destroy and tp_finalize: the comm's queued calls run first (bounded, see drain_locked). */
static void stage_comm_destroy(void *state)
{
    stage_comm_t *sc = state;
    if (sc == NULL) return;
    pthread_mutex_lock(&tp_stage.lock);
    if (sc->queued > 0) drain_locked(sc);
    if (sc->comm->comm_id == 0) shutdown_locked();
    pthread_mutex_unlock(&tp_stage.lock);
    free(sc);
}

const tp_coll_ops_t tp_staged_coll_ops = {
    .abi_version = TP_COLL_ABI,
    .ops_size = sizeof(tp_coll_ops_t),
    .name = "staged",
    .mem_types = TP_MEM_BIT(TP_MEM_HOST) | TP_MEM_BIT(TP_MEM_CUDA) | TP_MEM_BIT(TP_MEM_HIP),
    .calls = TP_CALLS_ALL & ~TP_CALL_BIT(TP_CALL_BARRIER),
    .streams = 1,
    .comm_create = stage_comm_create,
    .comm_destroy = stage_comm_destroy,
    .barrier = tp_coll_unsupported,
    .broadcast = stage_call,
    .all_gather = stage_call,
    .all_gatherv = stage_call,
    .all_reduce = stage_call,
    .reduce_scatter = stage_call,
    .all_to_all = stage_call,
    .send = stage_call,
    .recv = stage_call,
    .exchange = stage_call,
};
