/* runtime_stream.h: the streams tp_stream_create made, and what a call's stream must agree with. */
#ifndef RUNTIME_STREAM_H
#define RUNTIME_STREAM_H

#include "tp_provider.h"

/* TP_OK when stream was made by tp_stream_create and not destroyed; else logs "fn: ..." and TP_ERR_INVALID. */
tp_status_t tp_stream_check(const char *fn, tp_stream_t *stream);
/* A call's buffers against its stream: device memory needs a stream of its kind, and a device stream device memory;
 * host memory with a host stream or none is fine. Logs "fn: ..." and returns TP_ERR_INVALID otherwise. */
tp_status_t tp_stream_check_memory(const char *fn, const tp_stream_t *stream, tp_mem_type_t type,
                                   const tp_device_ops_t *dev);
/* The memory type a stream kind's buffers have. */
tp_mem_type_t tp_stream_mem_type(tp_device_kind_t kind);
/* Runs hook on every live stream now and on each one tp_stream_create makes from now on (NULL: none); tp_init sets
 * it so staging's memory is made when the engine hands libtp a stream (see tp_staged_prepare). */
void tp_streams_created_hook(void (*hook)(tp_stream_t *stream));

/* Test hooks for host streams (devices/host/host_stream.c): hold 1 makes queued work wait, 0 lets it run;
 * capturing 1 makes stream_capturing report a capture. Refuse a stream that is not a host stream. */
tp_status_t tp_host_stream_hold(tp_stream_t *stream, int hold);
tp_status_t tp_host_stream_set_capturing(tp_stream_t *stream, int capturing);

#endif
