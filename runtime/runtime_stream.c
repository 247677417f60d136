/* runtime_stream.c: tp_stream_create and tp_stream_destroy, and the set of live streams that calls check theirs in
 * (a destroyed or made-up stream is refused by name instead of being used). */
#include "runtime_stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_devices.h"

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static tp_stream_t **live;
static size_t n_live, cap_live;
static void (*created_hook)(tp_stream_t *stream);

tp_mem_type_t tp_stream_mem_type(tp_device_kind_t kind)
{
    return kind == TP_DEVICE_CUDA ? TP_MEM_CUDA : kind == TP_DEVICE_HIP ? TP_MEM_HIP : TP_MEM_HOST;
}

static int live_index(const tp_stream_t *stream)
{
    for (size_t i = 0; i < n_live; i++)
        if (live[i] == stream) return (int)i;
    return -1;
}

static tp_status_t live_add(tp_stream_t *stream)
{
    pthread_mutex_lock(&live_lock);
    if (n_live == cap_live) {
        size_t cap = cap_live ? cap_live * 2 : 16;
        tp_stream_t **grown = realloc(live, cap * sizeof(*grown));
        if (grown == NULL) {
            pthread_mutex_unlock(&live_lock);
            return TP_ERR_NO_MEMORY;
        }
        live = grown, cap_live = cap;
    }
    live[n_live++] = stream;
    pthread_mutex_unlock(&live_lock);
    return TP_OK;
}

tp_status_t tp_stream_create(tp_device_kind_t kind, void *native, tp_stream_t **out)
{
    if (out == NULL) {
        tp_log(TP_LOG_ERROR, "stream", "tp_stream_create: out is NULL: pass where the stream goes");
        return TP_ERR_INVALID;
    }
    if ((int)kind < TP_DEVICE_HOST || kind > TP_DEVICE_HIP) {
        tp_log(TP_LOG_ERROR, "stream",
               "tp_stream_create: kind %d is not TP_DEVICE_HOST, TP_DEVICE_CUDA or TP_DEVICE_HIP", (int)kind);
        return TP_ERR_INVALID;
    }
    if (kind == TP_DEVICE_HOST && native != NULL) {
        tp_log(TP_LOG_ERROR, "stream",
               "tp_stream_create: a host stream is libtp's own: native must be NULL for TP_DEVICE_HOST (got %p)",
               native);
        return TP_ERR_INVALID;
    }
    const tp_device_ops_t *dev = tp_device_of_kind(kind);
    if (dev == NULL) return TP_ERR_UNSUPPORTED;
    tp_stream_t *stream;
    tp_status_t s = dev->stream_adopt(native, &stream);
    if (s != TP_OK) return s;
    if ((s = live_add(stream)) != TP_OK) {
        tp_log(TP_LOG_ERROR, "stream", "tp_stream_create: out of memory for the list of streams");
        dev->stream_destroy(stream);
        return s;
    }
    if (created_hook != NULL) created_hook(stream); /* e.g. staging's memory, before the engine holds the stream */
    *out = stream;
    return TP_OK;
}

void tp_streams_created_hook(void (*hook)(tp_stream_t *stream))
{
    pthread_mutex_lock(&live_lock); /* copied, so the hook never runs under this lock */
    created_hook = hook;
    size_t n = hook != NULL ? n_live : 0;
    tp_stream_t **all = n > 0 ? malloc(n * sizeof(*all)) : NULL;
    if (all != NULL) memcpy(all, live, n * sizeof(*all));
    pthread_mutex_unlock(&live_lock);
    for (size_t i = 0; all != NULL && i < n; i++) hook(all[i]);
    free(all);
}

tp_status_t tp_stream_destroy(tp_stream_t *stream)
{
    pthread_mutex_lock(&live_lock);
    int i = live_index(stream);
    if (i >= 0) live[i] = live[--n_live];
    pthread_mutex_unlock(&live_lock);
    if (i < 0) {
        tp_log(TP_LOG_ERROR, "stream",
               "tp_stream_destroy: %p is not a live stream (destroyed already, or not made by "
               "tp_stream_create)",
               (void *)stream);
        return TP_ERR_INVALID;
    }
    stream->dev->stream_destroy(stream);
    return TP_OK;
}

tp_status_t tp_stream_check(const char *fn, tp_stream_t *stream)
{
    pthread_mutex_lock(&live_lock);
    int i = live_index(stream);
    pthread_mutex_unlock(&live_lock);
    if (i >= 0) return TP_OK;
    tp_log(TP_LOG_ERROR, "stream", "%s: stream %p is not a live stream (destroyed, or not made by tp_stream_create)",
           fn, (void *)stream);
    return TP_ERR_INVALID;
}

tp_status_t tp_stream_check_memory(const char *fn, const tp_stream_t *stream, tp_mem_type_t type,
                                   const tp_device_ops_t *dev)
{
    /* A memory type no stream kind has (a test's, an engine's own device) is its provider's to judge. */
    int has_kind = type == TP_MEM_HOST || type == TP_MEM_CUDA || type == TP_MEM_HIP;
    if (stream == NULL && (type == TP_MEM_HOST || !has_kind)) return TP_OK;
    if (stream == NULL) {
        tp_log(TP_LOG_ERROR, "stream",
               "%s: the buffers are %s device memory (device %s) and stream is NULL: pass the stream the buffers' "
               "work runs on (tp_stream_create)",
               fn, tp_mem_type_name(type), dev->name);
        return TP_ERR_INVALID;
    }
    if (tp_stream_mem_type(stream->kind) == type) return TP_OK;
    if (type == TP_MEM_HOST)
        tp_log(TP_LOG_ERROR, "stream",
               "%s: the buffers are host memory and the stream is a %s stream: pass device memory of that stream, or "
               "a NULL stream for host memory",
               fn, tp_device_kind_name(stream->kind));
    else
        tp_log(TP_LOG_ERROR, "stream",
               "%s: the buffers are %s device memory (device %s) and the stream is a %s stream: pass a %s stream", fn,
               tp_mem_type_name(type), dev->name, tp_device_kind_name(stream->kind), tp_mem_type_name(type));
    return TP_ERR_INVALID;
}
