/* cuda_reduce.cu: rank-order reductions on device memory, the same bits as devices/host/host_reduce.c (the element
 * conversions are its integer code, so NaN payloads and roundings match). Built to PTX by scripts/gen-cuda-ptx.sh. */
#include "cuda_reduce_args.h"

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float((u32)h << 16); }

__device__ __forceinline__ u16 f32_to_bf16(float f)
{
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}

__device__ __forceinline__ float f16_to_f32(u16 h)
{
    u32 sign = (u32)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else {
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        u = sign | ((u32)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    return __uint_as_float(u);
}

__device__ __forceinline__ u16 f32_to_f16(float f)
{
    u32 u = __float_as_uint(f);
    u16 sign = (u16)((u >> 16) & 0x8000u);
    u32 a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (u16)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (u16)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return sign;
        u32 exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
        unsigned shift = 126u - exp;
        u32 q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (u16)(sign | q);
    }
    u32 r = a + 0xfffu + ((a >> 13) & 1u);
    return (u16)(sign | ((r - 0x38000000u) >> 13));
}

/* Element i of a buffer that may be misaligned: bytes then, else one load. */
template <typename T> __device__ __forceinline__ T load(const void *p, u64 i, int aligned)
{
    if (aligned) return ((const T *)p)[i];
    const unsigned char *b = (const unsigned char *)p + i * sizeof(T);
    u64 v = 0;
    for (unsigned k = 0; k < sizeof(T); k++) v |= (u64)b[k] << (8 * k);
    T t;
    memcpy(&t, &v, sizeof(T));
    return t;
}

template <typename T> __device__ __forceinline__ void store(void *p, u64 i, T v, int aligned)
{
    if (aligned) {
        ((T *)p)[i] = v;
        return;
    }
    u64 w = 0;
    memcpy(&w, &v, sizeof(T));
    unsigned char *b = (unsigned char *)p + i * sizeof(T);
    for (unsigned k = 0; k < sizeof(T); k++) b[k] = (unsigned char)(w >> (8 * k));
}

/* NaN propagates: a NaN accumulator stays, a NaN operand replaces it (host_reduce.c's FOLD_FLOAT). */
__device__ __forceinline__ float fold(int op, float acc, float x)
{
    if (op == TP_CUDA_SUM) return __fadd_rn(acc, x);
    if (op == TP_CUDA_MAX) return (x > acc || x != x) ? x : acc;
    return (x < acc || x != x) ? x : acc;
}

__device__ __forceinline__ double fold(int op, double acc, double x)
{
    if (op == TP_CUDA_SUM) return __dadd_rn(acc, x);
    if (op == TP_CUDA_MAX) return (x > acc || x != x) ? x : acc;
    return (x < acc || x != x) ? x : acc;
}

template <typename T, typename U> __device__ __forceinline__ T fold_int(int op, T acc, T x)
{
    if (op == TP_CUDA_SUM) return (T)((U)acc + (U)x);
    if (op == TP_CUDA_MAX) return x > acc ? x : acc;
    return x < acc ? x : acc;
}

#define GRID_LOOP(i, a) for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < (a).count; i += (u64)gridDim.x * blockDim.x)

extern "C" __global__ void tp_reduce_f32(tp_cuda_reduce_args_t a)
{
    GRID_LOOP(i, a)
    {
        float acc = load<float>(a.srcs[0], i, a.aligned);
        for (int s = 1; s < a.n; s++) acc = fold(a.op, acc, load<float>(a.srcs[s], i, a.aligned));
        store<float>(a.dst, i, acc, a.aligned);
    }
}

extern "C" __global__ void tp_reduce_f64(tp_cuda_reduce_args_t a)
{
    GRID_LOOP(i, a)
    {
        double acc = load<double>(a.srcs[0], i, a.aligned);
        for (int s = 1; s < a.n; s++) acc = fold(a.op, acc, load<double>(a.srcs[s], i, a.aligned));
        store<double>(a.dst, i, acc, a.aligned);
    }
}

extern "C" __global__ void tp_reduce_bf16(tp_cuda_reduce_args_t a)
{
    GRID_LOOP(i, a)
    {
        float acc = bf16_to_f32(load<u16>(a.srcs[0], i, a.aligned));
        for (int s = 1; s < a.n; s++) acc = fold(a.op, acc, bf16_to_f32(load<u16>(a.srcs[s], i, a.aligned)));
        store<u16>(a.dst, i, f32_to_bf16(acc), a.aligned);
    }
}

extern "C" __global__ void tp_reduce_f16(tp_cuda_reduce_args_t a)
{
    GRID_LOOP(i, a)
    {
        float acc = f16_to_f32(load<u16>(a.srcs[0], i, a.aligned));
        for (int s = 1; s < a.n; s++) acc = fold(a.op, acc, f16_to_f32(load<u16>(a.srcs[s], i, a.aligned)));
        store<u16>(a.dst, i, f32_to_f16(acc), a.aligned);
    }
}

extern "C" __global__ void tp_reduce_i32(tp_cuda_reduce_args_t a)
{
    GRID_LOOP(i, a)
    {
        int acc = load<int>(a.srcs[0], i, a.aligned);
        for (int s = 1; s < a.n; s++) acc = fold_int<int, u32>(a.op, acc, load<int>(a.srcs[s], i, a.aligned));
        store<int>(a.dst, i, acc, a.aligned);
    }
}

extern "C" __global__ void tp_reduce_i64(tp_cuda_reduce_args_t a)
{
    GRID_LOOP(i, a)
    {
        long long acc = load<long long>(a.srcs[0], i, a.aligned);
        for (int s = 1; s < a.n; s++)
            acc = fold_int<long long, u64>(a.op, acc, load<long long>(a.srcs[s], i, a.aligned));
        store<long long>(a.dst, i, acc, a.aligned);
    }
}
