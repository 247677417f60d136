/*
 * fake_libcuda.c: a libcuda.so.1 for tests without a GPU. FAKE_CUDA_MODE picks the driver it plays: "nodevice"
 * (cuInit says no device), "nomemops" (one device that cannot wait on 64-bit stream values), "ok" (one capable
 * device; pointers inside fake_cuda_arena are its device memory, stream ops only count). Built with -DFAKE_CUDA_OLD
 * it lacks cuGetProcAddress_v2, like a driver older than CUDA 12.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char fake_cuda_arena[4096];
int fake_cuda_calls[8]; /* writes, waits, copies, captures asked, pointer queries */

static int inited;
static int mode(const char *m)
{
    const char *e = getenv("FAKE_CUDA_MODE");
    return e != NULL && strcmp(e, m) == 0;
}

static int Init(unsigned f) { (void)f; return mode("nodevice") ? 100 : (inited = 1, 0); }
static int DriverGetVersion(int *v) { *v = 13000; return 0; }
static int DeviceGetCount(int *n) { *n = inited ? 1 : 0; return inited ? 0 : 3; }
static int DeviceGet(int *d, int i) { *d = i; return 0; }
static int DeviceGetName(char *s, int len, int d) { (void)d; strncpy(s, "Fake GPU", (size_t)len); return 0; }
static int DeviceGetAttribute(int *v, int attr, int d)
{
    (void)d;
    *v = attr == 122 ? !mode("nomemops") : attr == 16 ? 4 : 1;
    return 0;
}
static int GetErrorName(int r, const char **s) { *s = r == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_FAKE"; return 0; }
static char ctx_storage;
static int CtxGetCurrent(void **c) { *c = inited ? &ctx_storage : NULL; return inited ? 0 : 3; }
static int CtxPush(void *c) { (void)c; return 0; }
static int CtxPop(void **c) { *c = &ctx_storage; return 0; }
static int CtxGetDevice(int *d) { *d = 0; return 0; }
static int DeviceGetPCIBusId(char *out, int len, int d) { return snprintf(out, (size_t)len, "0000:%02x:00.0", 0x3b + d) < 0; }
/* Memory type (attribute 2) only: device inside the arena, 0 (unknown to CUDA) elsewhere, as the driver says for
 * host memory it never saw. */
static int PointerGetAttributes(unsigned n, int *attrs, void **data, unsigned long long p)
{
    if (!inited) return 3;
    fake_cuda_calls[4]++;
    const char *q = (const char *)(uintptr_t)p;
    for (unsigned i = 0; i < n; i++) {
        if (attrs[i] != 2) return 1;
        *(unsigned *)data[i] = q >= fake_cuda_arena && q < fake_cuda_arena + sizeof(fake_cuda_arena) ? 2 : 0;
    }
    return 0;
}
static int StreamGetCtx(void *s, void **c) { (void)s; *c = &ctx_storage; return 0; }
static int StreamValue(void *s, unsigned long long a, uint64_t v, unsigned f) { (void)s, (void)a, (void)v, (void)f; fake_cuda_calls[0]++; return 0; }
static int StreamWait(void *s, unsigned long long a, uint64_t v, unsigned f) { (void)s, (void)a, (void)v, (void)f; fake_cuda_calls[1]++; return 0; }
static int StreamIsCapturing(void *s, int *st) { (void)s; fake_cuda_calls[3]++; *st = 0; return 0; }
static int MemcpyAsync(unsigned long long d, unsigned long long s, size_t n, void *st)
{
    (void)st;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    fake_cuda_calls[2]++;
    return 0;
}
static int Unsupported(void) { return 801; }

#ifndef FAKE_CUDA_OLD
int cuGetProcAddress_v2(const char *sym, void **pfn, int version, uint64_t flags, int *status)
{
    (void)version, (void)flags;
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"cuInit", (void *)Init}, {"cuDriverGetVersion", (void *)DriverGetVersion},
        {"cuDeviceGetCount", (void *)DeviceGetCount}, {"cuDeviceGet", (void *)DeviceGet},
        {"cuDeviceGetName", (void *)DeviceGetName}, {"cuDeviceGetAttribute", (void *)DeviceGetAttribute},
        {"cuGetErrorName", (void *)GetErrorName}, {"cuCtxGetCurrent", (void *)CtxGetCurrent},
        {"cuCtxPushCurrent", (void *)CtxPush}, {"cuCtxPopCurrent", (void *)CtxPop},
        {"cuCtxGetDevice", (void *)CtxGetDevice}, {"cuPointerGetAttributes", (void *)PointerGetAttributes},
        {"cuStreamGetCtx", (void *)StreamGetCtx}, {"cuStreamWriteValue64", (void *)StreamValue},
        {"cuStreamWaitValue64", (void *)StreamWait}, {"cuStreamIsCapturing", (void *)StreamIsCapturing},
        {"cuMemcpyAsync", (void *)MemcpyAsync}, {"cuDeviceGetPCIBusId", (void *)DeviceGetPCIBusId},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(sym, table[i].name) == 0) {
            *pfn = table[i].fn;
            *status = 0;
            return 0;
        }
    /* Everything else exists and fails as not supported: the tests never reach it. */
    *pfn = (void *)Unsupported;
    *status = 0;
    return 0;
}
#endif
