/* host_stream.h: host streams, queues of work run in order by a thread of libtp (what tests without a GPU use). */
#ifndef HOST_STREAM_H
#define HOST_STREAM_H

#include "tp_provider.h"

tp_status_t tp_host_stream_create(tp_stream_t *like, tp_stream_t **stream);
tp_status_t tp_host_stream_adopt(void *native, tp_stream_t **stream);
void tp_host_stream_destroy(tp_stream_t *stream);
tp_status_t tp_host_stream_sync(tp_stream_t *stream);
tp_status_t tp_host_stream_copy(tp_stream_t *stream, void *dst, const void *src, size_t len);
tp_status_t tp_host_stream_reduce(tp_stream_t *stream, tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs,
                                  int n, size_t count);
tp_status_t tp_host_stream_write64(tp_stream_t *stream, void *dev_addr, uint64_t value);
tp_status_t tp_host_stream_wait64(tp_stream_t *stream, void *dev_addr, uint64_t value);
int tp_host_stream_capturing(tp_stream_t *stream);
tp_status_t tp_host_event_record(tp_stream_t *stream, tp_device_event_t **event);
tp_status_t tp_host_stream_wait_event(tp_stream_t *stream, tp_device_event_t **event);
tp_status_t tp_host_event_sync(tp_stream_t *stream, tp_device_event_t **event);
tp_status_t tp_host_event_release(tp_stream_t *stream, tp_device_event_t **event);

/* Test hooks (also declared in runtime/runtime_stream.h, which tests include). */
tp_status_t tp_host_stream_hold(tp_stream_t *stream, int hold);
tp_status_t tp_host_stream_set_capturing(tp_stream_t *stream, int capturing);

#endif
