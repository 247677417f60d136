/* host_stream.c: a host stream is a queue of work that one thread runs in order, so code written for device streams
 * (values written and waited on, events, work that runs later) runs and is tested without a GPU. */
#include "host_stream.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host_reduce.h"

enum host_op_kind { OP_COPY, OP_REDUCE, OP_WRITE64, OP_WAIT64, OP_MARK, OP_WAIT_EVENT };

typedef struct host_op {
    struct host_op *next;
    enum host_op_kind kind;
    void *dst;
    const void *src;
    size_t len; /* copy: bytes; reduce: elements */
    tp_dtype_t dtype;
    tp_op_t op;
    int n;
    const void **srcs;
    uint64_t value; /* write64, wait64; mark and wait_event: the event's generation */
    tp_device_event_t *event;
} host_op_t;

typedef struct host_queue {
    pthread_mutex_t lock;
    pthread_cond_t work;    /* the runner waits for work or a release */
    pthread_cond_t drained; /* stream_sync waits for the runner */
    host_op_t *head, *tail;
    uint64_t queued, ran;
    int held, closing, capturing;
    pthread_t thread;
} host_queue_t;

/* An event's generations: record bumps recorded, the stream's mark raises reached to it when it runs there. */
struct tp_device_event {
    uint64_t recorded, reached;
    int refs;
};

/* All events share one lock and condition: events are few and waits on them rare. */
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t event_cond = PTHREAD_COND_INITIALIZER;

static void event_unref_locked(tp_device_event_t *ev)
{
    if (--ev->refs == 0) free(ev);
}

/* Polls like a device waiting on a stream value: spins briefly, then yields, then sleeps up to 50 us a round. */
static void wait_value(const uint64_t *addr, uint64_t value)
{
    long ns = 1000;
    for (int i = 0; __atomic_load_n(addr, __ATOMIC_ACQUIRE) < value; i++) {
        if (i < 1000) continue;
        if (i < 1100) {
            sched_yield();
            continue;
        }
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 50000) ns *= 2;
    }
}

static void run_op(host_op_t *op)
{
    switch (op->kind) {
    case OP_COPY:
        if (op->len > 0 && op->dst != op->src) memmove(op->dst, op->src, op->len);
        break;
    case OP_REDUCE: tp_reduce_n(op->dtype, op->op, op->dst, op->srcs, op->n, op->len); break;
    case OP_WRITE64: __atomic_store_n((uint64_t *)op->dst, op->value, __ATOMIC_RELEASE); break;
    case OP_WAIT64: wait_value(op->dst, op->value); break;
    case OP_MARK:
        pthread_mutex_lock(&event_lock);
        if (op->event->reached < op->value) op->event->reached = op->value;
        event_unref_locked(op->event);
        pthread_cond_broadcast(&event_cond);
        pthread_mutex_unlock(&event_lock);
        break;
    case OP_WAIT_EVENT:
        pthread_mutex_lock(&event_lock);
        while (op->event->reached < op->value) pthread_cond_wait(&event_cond, &event_lock);
        event_unref_locked(op->event);
        pthread_mutex_unlock(&event_lock);
        break;
    }
}

static void *runner_main(void *arg)
{
    host_queue_t *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while ((q->head == NULL || q->held) && !q->closing) pthread_cond_wait(&q->work, &q->lock);
        if (q->head == NULL) break; /* closing and drained */
        host_op_t *op = q->head;
        pthread_mutex_unlock(&q->lock);
        run_op(op);
        pthread_mutex_lock(&q->lock);
        if ((q->head = op->next) == NULL) q->tail = NULL;
        q->ran++;
        pthread_cond_broadcast(&q->drained);
        free(op->srcs);
        free(op);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

static host_queue_t *queue_of(tp_stream_t *stream, const char *what)
{
    if (stream->kind == TP_DEVICE_HOST && stream->dev == &tp_host_device_ops) return stream->priv;
    tp_log(TP_LOG_ERROR, "host", "%s: a stream of device %s given to the host device: pass a host stream", what,
           stream->dev != NULL ? stream->dev->name : "(none)");
    return NULL;
}

static tp_status_t enqueue(tp_stream_t *stream, const char *what, const host_op_t *tmpl)
{
    host_queue_t *q = queue_of(stream, what);
    if (q == NULL) return TP_ERR_INVALID;
    host_op_t *op = malloc(sizeof(*op));
    if (op == NULL) {
        tp_log(TP_LOG_ERROR, "host", "%s: out of memory queueing on a host stream", what);
        return TP_ERR_NO_MEMORY;
    }
    *op = *tmpl;
    op->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail != NULL) q->tail->next = op;
    else q->head = op;
    q->tail = op;
    q->queued++;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    return TP_OK;
}

tp_status_t tp_host_stream_create(tp_stream_t *like, tp_stream_t **stream)
{
    (void)like;
    tp_stream_t *s = calloc(1, sizeof(*s));
    host_queue_t *q = calloc(1, sizeof(*q));
    if (s == NULL || q == NULL) goto err_alloc;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->drained, NULL);
    /* The runner takes no signals: they stay the engine's threads' business. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&q->thread, NULL, runner_main, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        tp_log(TP_LOG_ERROR, "host", "cannot start a host stream's thread: %s", strerror(rc));
        goto err_thread;
    }
    s->kind = TP_DEVICE_HOST;
    s->dev = &tp_host_device_ops;
    s->priv = q;
    s->owned = 1;
    *stream = s;
    return TP_OK;
err_thread:
    pthread_cond_destroy(&q->drained);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->lock);
    free(q);
    free(s);
    return TP_ERR_SYSTEM;
err_alloc:
    free(q);
    free(s);
    tp_log(TP_LOG_ERROR, "host", "out of memory making a host stream");
    return TP_ERR_NO_MEMORY;
}

/* tp_stream_create has refused a native handle: a host stream has none. */
tp_status_t tp_host_stream_adopt(void *native, tp_stream_t **stream)
{
    (void)native;
    return tp_host_stream_create(NULL, stream);
}

/* Runs what is queued (a hold is released) and stops the thread. */
void tp_host_stream_destroy(tp_stream_t *stream)
{
    host_queue_t *q = queue_of(stream, "stream_destroy");
    if (q == NULL) return;
    pthread_mutex_lock(&q->lock);
    q->closing = 1;
    q->held = 0;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    pthread_cond_destroy(&q->drained);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->lock);
    free(q);
    free(stream);
}

tp_status_t tp_host_stream_sync(tp_stream_t *stream)
{
    if (stream == NULL) return TP_OK;
    host_queue_t *q = queue_of(stream, "stream_sync");
    if (q == NULL) return TP_ERR_INVALID;
    pthread_mutex_lock(&q->lock);
    uint64_t target = q->queued;
    while (q->ran < target) pthread_cond_wait(&q->drained, &q->lock);
    pthread_mutex_unlock(&q->lock);
    return TP_OK;
}

tp_status_t tp_host_stream_copy(tp_stream_t *stream, void *dst, const void *src, size_t len)
{
    return enqueue(stream, "copy", &(host_op_t){.kind = OP_COPY, .dst = dst, .src = src, .len = len});
}

tp_status_t tp_host_stream_reduce(tp_stream_t *stream, tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs,
                                  int n, size_t count)
{
    const void **copy = malloc((size_t)n * sizeof(*copy));
    if (copy == NULL) {
        tp_log(TP_LOG_ERROR, "host", "reduce: out of memory queueing on a host stream");
        return TP_ERR_NO_MEMORY;
    }
    memcpy(copy, srcs, (size_t)n * sizeof(*copy));
    tp_status_t s = enqueue(
        stream, "reduce",
        &(host_op_t){.kind = OP_REDUCE, .dtype = dtype, .op = op, .dst = dst, .srcs = copy, .n = n, .len = count});
    if (s != TP_OK) free(copy);
    return s;
}

static tp_status_t check_word(const char *what, const void *addr)
{
    if (addr != NULL && ((uintptr_t)addr & 7u) == 0) return TP_OK;
    tp_log(TP_LOG_ERROR, "host", "%s: address %p is not an 8-byte aligned word (use host_alloc memory)", what, addr);
    return TP_ERR_INVALID;
}

tp_status_t tp_host_stream_write64(tp_stream_t *stream, void *dev_addr, uint64_t value)
{
    tp_status_t s = check_word("stream_write64", dev_addr);
    if (s != TP_OK) return s;
    if (stream == NULL) {
        __atomic_store_n((uint64_t *)dev_addr, value, __ATOMIC_RELEASE);
        return TP_OK;
    }
    return enqueue(stream, "stream_write64", &(host_op_t){.kind = OP_WRITE64, .dst = dev_addr, .value = value});
}

tp_status_t tp_host_stream_wait64(tp_stream_t *stream, void *dev_addr, uint64_t value)
{
    tp_status_t s = check_word("stream_wait64", dev_addr);
    if (s != TP_OK) return s;
    if (stream == NULL) {
        wait_value(dev_addr, value);
        return TP_OK;
    }
    return enqueue(stream, "stream_wait64", &(host_op_t){.kind = OP_WAIT64, .dst = dev_addr, .value = value});
}

int tp_host_stream_capturing(tp_stream_t *stream)
{
    if (stream == NULL) return 0;
    host_queue_t *q = queue_of(stream, "stream_capturing");
    if (q == NULL) return TP_ERR_INVALID;
    return __atomic_load_n(&q->capturing, __ATOMIC_ACQUIRE);
}

tp_status_t tp_host_event_record(tp_stream_t *stream, tp_device_event_t **event)
{
    if (event == NULL) {
        tp_log(TP_LOG_ERROR, "host", "event_record: event is NULL");
        return TP_ERR_INVALID;
    }
    if (stream != NULL && queue_of(stream, "event_record") == NULL) return TP_ERR_INVALID;
    if (*event == NULL && (*event = calloc(1, sizeof(**event))) == NULL) {
        tp_log(TP_LOG_ERROR, "host", "event_record: out of memory for an event");
        return TP_ERR_NO_MEMORY;
    }
    tp_device_event_t *ev = *event;
    pthread_mutex_lock(&event_lock);
    if (ev->refs == 0) ev->refs = 1;
    uint64_t gen = ++ev->recorded;
    if (stream == NULL) ev->reached = gen; /* the host's order: everything before has run */
    else ev->refs++;
    pthread_mutex_unlock(&event_lock);
    if (stream == NULL) return TP_OK;
    tp_status_t s = enqueue(stream, "event_record", &(host_op_t){.kind = OP_MARK, .event = ev, .value = gen});
    if (s != TP_OK) {
        pthread_mutex_lock(&event_lock);
        ev->recorded--;
        event_unref_locked(ev);
        pthread_mutex_unlock(&event_lock);
    }
    return s;
}

tp_status_t tp_host_event_sync(tp_stream_t *stream, tp_device_event_t **event)
{
    (void)stream;
    if (event == NULL || *event == NULL) {
        tp_log(TP_LOG_ERROR, "host", "event_sync: no event (record one first)");
        return TP_ERR_INVALID;
    }
    tp_device_event_t *ev = *event;
    pthread_mutex_lock(&event_lock);
    uint64_t gen = ev->recorded;
    while (ev->reached < gen) pthread_cond_wait(&event_cond, &event_lock);
    pthread_mutex_unlock(&event_lock);
    return TP_OK;
}

tp_status_t tp_host_stream_wait_event(tp_stream_t *stream, tp_device_event_t **event)
{
    if (stream == NULL) return tp_host_event_sync(NULL, event);
    if (event == NULL || *event == NULL) {
        tp_log(TP_LOG_ERROR, "host", "stream_wait: no event (record one first)");
        return TP_ERR_INVALID;
    }
    tp_device_event_t *ev = *event;
    pthread_mutex_lock(&event_lock);
    uint64_t gen = ev->recorded;
    ev->refs++;
    pthread_mutex_unlock(&event_lock);
    tp_status_t s = enqueue(stream, "stream_wait", &(host_op_t){.kind = OP_WAIT_EVENT, .event = ev, .value = gen});
    if (s != TP_OK) {
        pthread_mutex_lock(&event_lock);
        event_unref_locked(ev);
        pthread_mutex_unlock(&event_lock);
    }
    return s;
}

tp_status_t tp_host_event_release(tp_stream_t *stream, tp_device_event_t **event)
{
    (void)stream;
    if (event == NULL || *event == NULL) return TP_OK;
    pthread_mutex_lock(&event_lock);
    event_unref_locked(*event);
    pthread_mutex_unlock(&event_lock);
    *event = NULL;
    return TP_OK;
}

tp_status_t tp_host_stream_hold(tp_stream_t *stream, int hold)
{
    host_queue_t *q = stream != NULL ? queue_of(stream, "tp_host_stream_hold") : NULL;
    if (q == NULL) return TP_ERR_INVALID;
    pthread_mutex_lock(&q->lock);
    q->held = hold != 0;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    return TP_OK;
}

tp_status_t tp_host_stream_set_capturing(tp_stream_t *stream, int capturing)
{
    host_queue_t *q = stream != NULL ? queue_of(stream, "tp_host_stream_set_capturing") : NULL;
    if (q == NULL) return TP_ERR_INVALID;
    __atomic_store_n(&q->capturing, capturing != 0, __ATOMIC_RELEASE);
    return TP_OK;
}
