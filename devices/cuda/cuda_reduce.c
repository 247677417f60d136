/* cuda_reduce.c: the reduce kernels (cuda_reduce.cu, as PTX in cuda_reduce_ptx.c) loaded once per context and
 * launched on the caller's stream. */
#include <pthread.h>
#include <string.h>

#include "cuda_device.h"
#include "cuda_reduce_args.h"

/* Contexts a process uses are few (one per GPU it drives). */
#define CTX_MAX 16

static const char *const kernel_names[] = {"tp_reduce_f32", "tp_reduce_f64", "tp_reduce_bf16",
                                           "tp_reduce_f16", "tp_reduce_i32", "tp_reduce_i64"};
enum { KERNELS = sizeof(kernel_names) / sizeof(kernel_names[0]) };

static struct {
    cu_ctx_t ctx;
    cu_module_t module;
    cu_function_t fn[KERNELS];
    int sms;
} loaded[CTX_MAX];
static int n_loaded;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static int kernel_index(tp_dtype_t dtype)
{
    switch (dtype) {
    case TP_F32: return 0;
    case TP_F64: return 1;
    case TP_BF16: return 2;
    case TP_F16: return 3;
    case TP_I32: return 4;
    case TP_I64: return 5;
    default: return -1;
    }
}

/* The module of the current context (the stream's, entered by the caller), loading it the first time. */
static int module_of(cu_ctx_t ctx)
{
    pthread_mutex_lock(&load_lock);
    for (int i = 0; i < n_loaded; i++)
        if (loaded[i].ctx == ctx) {
            pthread_mutex_unlock(&load_lock);
            return i;
        }
    int i = -1;
    if (n_loaded == CTX_MAX) {
        tp_log(TP_LOG_ERROR, "cuda", "reduce: kernels loaded in %d contexts already: no room for another", CTX_MAX);
        goto out;
    }
    int k = n_loaded, dev = 0;
    if (tp_cuda_check(tp_cu.ModuleLoadData(&loaded[k].module, tp_cuda_reduce_ptx),
                      "reduce: cuModuleLoadData of libtp's reduce kernels") != TP_OK)
        goto out;
    for (int f = 0; f < KERNELS; f++)
        if (tp_cuda_check(tp_cu.ModuleGetFunction(&loaded[k].fn[f], loaded[k].module, kernel_names[f]),
                          kernel_names[f]) != TP_OK)
            goto out;
    tp_cu.CtxGetDevice(&dev);
    if (tp_cu.DeviceGetAttribute(&loaded[k].sms, CU_ATTR_MULTIPROCESSOR_COUNT, dev) != CU_SUCCESS) loaded[k].sms = 1;
    loaded[k].ctx = ctx;
    i = n_loaded++;
out:
    pthread_mutex_unlock(&load_lock);
    return i;
}

tp_status_t tp_cuda_reduce(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count,
                           tp_stream_t *stream)
{
    int f = kernel_index(dtype);
    if (f < 0 || !tp_reduce_supported(dtype, op)) {
        tp_log(TP_LOG_ERROR, "cuda", "reduce: op %d on type %d is not a reduction libtp has", (int)op, (int)dtype);
        return TP_ERR_INVALID;
    }
    if (stream == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "reduce: device memory is reduced by a kernel on a stream: give the stream");
        return TP_ERR_INVALID;
    }
    if (!tp_cuda_stream_ok(stream, "reduce")) return TP_ERR_INVALID;
    if (n < 1 || n > TP_CUDA_MAX_SRCS) {
        tp_log(TP_LOG_ERROR, "cuda", "reduce: %d sources: the kernels take 1 to %d", n, TP_CUDA_MAX_SRCS);
        return n < 1 ? TP_ERR_INVALID : TP_ERR_UNSUPPORTED;
    }
    if (count == 0) return TP_OK;
    tp_cuda_reduce_args_t a;
    memset(&a, 0, sizeof(a));
    size_t es = tp_dtype_size(dtype);
    uintptr_t bits = (uintptr_t)dst;
    for (int s = 0; s < n; s++) a.srcs[s] = srcs[s], bits |= (uintptr_t)srcs[s];
    a.dst = dst;
    a.count = count;
    a.n = n;
    a.op = op == TP_SUM ? TP_CUDA_SUM : op == TP_MAX ? TP_CUDA_MAX : TP_CUDA_MIN;
    a.aligned = (bits & (es - 1)) == 0;
    int pushed;
    tp_status_t s = tp_cuda_enter(stream->priv, &pushed);
    int m = s == TP_OK ? module_of(stream->priv) : -1;
    if (m >= 0) {
        /* Enough blocks to fill the GPU a few times over; the kernels loop over the rest. */
        unsigned threads = 256;
        size_t want = (count + threads - 1) / threads, cap = (size_t)loaded[m].sms * 8;
        unsigned blocks = (unsigned)(want < cap ? want : cap);
        void *params[] = {&a};
        s = tp_cuda_check(
            tp_cu.LaunchKernel(loaded[m].fn[f], blocks, 1, 1, threads, 1, 1, 0, stream->native, params, NULL),
            "reduce: cuLaunchKernel");
    } else if (s == TP_OK) {
        s = TP_ERR_SYSTEM;
    }
    tp_cuda_leave(pushed);
    return s;
}
