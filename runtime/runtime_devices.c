/* runtime_devices.c: the devices in order: those added at run time, then the registration list's; per buffer, the
 * first device that claims it owns it. */
#include "runtime_devices.h"

#include <pthread.h>

#include "runtime_components.h"

/* Added by tp_device_add (tests, an engine's own), most recent first; the list's devices follow, host last. */
static const tp_device_ops_t *devices[TP_DEVICES_MAX];
static int n_devices;

/* The registration list's devices, picked out of it once: every collective call looks its buffers up in them. */
static const tp_device_ops_t *listed[TP_DEVICES_MAX];
static int n_listed;
static pthread_once_t listed_once = PTHREAD_ONCE_INIT;

static void list_devices(void)
{
    for (size_t i = 0; i < tp_components_len && n_listed < TP_DEVICES_MAX; i++)
        if (tp_components[i].kind == TP_COMPONENT_DEVICE && tp_components[i].ops != NULL)
            listed[n_listed++] = tp_components[i].ops;
    /* Each asked once now, so the first call pays for loading their libraries (CUDA's and HIP's dlopen, ~2 ms on
     * a host without them), not the first call whose buffers lie outside known host memory: a timed loop found it
     * there (docs/BENCHMARKS.md, "Tenth pass") */
    tp_mem_type_t type;
    for (int i = 0; i < n_listed; i++) (void)listed[i]->mem_query(&n_listed, &type);
}

const tp_device_ops_t *tp_device_of(const void *ptr, tp_mem_type_t *type)
{
    for (int i = 0; i < n_devices; i++)
        if (devices[i]->mem_query(ptr, type)) return devices[i];
    pthread_once(&listed_once, list_devices);
    if (tp_mem_known(ptr)) { /* host memory the listed devices would each be asked about in vain */
        *type = TP_MEM_HOST;
        return &tp_host_device_ops;
    }
    for (int i = 0; i < n_listed; i++)
        if (listed[i]->mem_query(ptr, type)) return listed[i];
    *type = TP_MEM_HOST;
    return &tp_host_device_ops;
}

tp_status_t tp_device_add(const tp_device_ops_t *ops)
{
    if (ops == NULL || ops->abi_version != TP_DEVICE_ABI || ops->ops_size != sizeof(tp_device_ops_t)) {
        tp_log(TP_LOG_ERROR, "device", "device %s: built for device ABI %u (%u bytes), this libtp has %u (%zu bytes)",
               ops != NULL && ops->name != NULL ? ops->name : "(null)", ops != NULL ? ops->abi_version : 0,
               ops != NULL ? ops->ops_size : 0, TP_DEVICE_ABI, sizeof(tp_device_ops_t));
        return TP_ERR_INVALID;
    }
    if (n_devices == TP_DEVICES_MAX - 1) {
        tp_log(TP_LOG_ERROR, "device", "device %s: the list is full (%d devices)", ops->name, TP_DEVICES_MAX);
        return TP_ERR_NO_MEMORY;
    }
    for (int i = n_devices; i > 0; i--) devices[i] = devices[i - 1];
    devices[0] = ops;
    n_devices++;
    return TP_OK;
}

const char *tp_mem_type_name(tp_mem_type_t type)
{
    static const char *const names[] = {"host", "cuda", "hip"};
    return (int)type >= 0 && type < TP_MEM_TYPES ? names[type] : "unknown";
}

tp_status_t tp_device_unsupported_stream(tp_stream_t *stream, tp_device_event_t **event)
{
    (void)stream;
    (void)event;
    return TP_ERR_UNSUPPORTED;
}

const char *tp_device_kind_name(tp_device_kind_t kind)
{
    static const char *const names[] = {"host", "cuda", "hip"};
    return (int)kind >= 0 && kind <= TP_DEVICE_HIP ? names[kind] : "unknown";
}

const tp_device_ops_t *tp_device_of_kind(tp_device_kind_t kind)
{
    const tp_device_ops_t *dev = NULL;
    for (int i = 0; i < n_devices && dev == NULL; i++)
        if (devices[i]->kind == kind) dev = devices[i];
    pthread_once(&listed_once, list_devices);
    for (int i = 0; i < n_listed && dev == NULL; i++)
        if (listed[i]->kind == kind) dev = listed[i];
    if (dev == NULL) {
        tp_log(TP_LOG_ERROR, "device", "no device for %s streams in this libtp (built without it)",
               tp_device_kind_name(kind));
        return NULL;
    }
    return dev->init() == TP_OK ? dev : NULL;
}

tp_status_t tp_device_init_none(void) { return TP_OK; }
tp_status_t tp_device_unsupported_init(void) { return TP_ERR_UNSUPPORTED; }

tp_status_t tp_device_unsupported_host_alloc(size_t len, void **host, void **dev)
{
    (void)len, (void)host, (void)dev;
    return TP_ERR_UNSUPPORTED;
}

void tp_device_unsupported_host_free(void *host) { (void)host; }

tp_status_t tp_device_unsupported_stream_create(tp_stream_t *like, tp_stream_t **stream)
{
    (void)like, (void)stream;
    return TP_ERR_UNSUPPORTED;
}

tp_status_t tp_device_unsupported_stream_adopt(void *native, tp_stream_t **stream)
{
    (void)native, (void)stream;
    return TP_ERR_UNSUPPORTED;
}

void tp_device_unsupported_stream_destroy(tp_stream_t *stream) { (void)stream; }

tp_status_t tp_device_unsupported_stream_sync(tp_stream_t *stream)
{
    (void)stream;
    return TP_ERR_UNSUPPORTED;
}

tp_status_t tp_device_unsupported_value(tp_stream_t *stream, void *dev_addr, uint64_t value)
{
    (void)stream, (void)dev_addr, (void)value;
    return TP_ERR_UNSUPPORTED;
}

int tp_device_unsupported_capturing(tp_stream_t *stream)
{
    (void)stream;
    return TP_ERR_UNSUPPORTED;
}

tp_status_t tp_device_unsupported_bus_id(tp_stream_t *stream, char *out, size_t len)
{
    (void)stream;
    if (len > 0) out[0] = '\0';
    return TP_ERR_UNSUPPORTED;
}
