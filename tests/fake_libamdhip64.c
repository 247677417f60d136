/*
 * fake_libamdhip64.c: a libamdhip64.so.7 for tests without an AMD GPU. FAKE_HIP_MODE picks the runtime it plays:
 * "nodevice" (hipInit says no device), "nowait" (one device that cannot wait on stream values), "ok" (one capable
 * device; pointers inside fake_hip_arena are its device memory, stream ops only count).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char fake_hip_arena[4096];
int fake_hip_calls[4]; /* writes, waits, copies */

static int mode(const char *m)
{
    const char *e = getenv("FAKE_HIP_MODE");
    return e != NULL && strcmp(e, m) == 0;
}

const char *hipGetErrorName(int r) { return r == 100 ? "hipErrorNoDevice" : "hipErrorFake"; }
int hipInit(unsigned f) { (void)f; return mode("nodevice") ? 100 : 0; }
int hipRuntimeGetVersion(int *v) { *v = 60200000; return 0; }
int hipGetDeviceCount(int *n) { *n = mode("nodevice") ? 0 : 1; return 0; }
int hipGetDevice(int *d) { *d = 0; return 0; }
int hipSetDevice(int d) { return d == 0 ? 0 : 101; }
int hipDeviceGetAttribute(int *v, int attr, int d) { (void)d; *v = attr == 10013 ? !mode("nowait") : 1; return 0; }
int hipPointerGetAttributes(int *attr, const void *p)
{
    memset(attr, 0, 32);
    const char *q = p;
    attr[0] = q >= fake_hip_arena && q < fake_hip_arena + sizeof(fake_hip_arena) ? 2 : 0;
    return 0;
}
int hipStreamGetDevice(void *s, int *d) { (void)s; *d = 0; return 0; }
int hipDeviceGetPCIBusId(char *out, int len, int d) { return snprintf(out, (size_t)len, "0000:%02x:00.0", d + 0xc1) < 0; }
int hipStreamWriteValue64(void *s, void *p, uint64_t v, unsigned f) { (void)s, (void)p, (void)v, (void)f; fake_hip_calls[0]++; return 0; }
int hipStreamWaitValue64(void *s, void *p, uint64_t v, unsigned f, uint64_t m) { (void)s, (void)p, (void)v, (void)f, (void)m; fake_hip_calls[1]++; return 0; }
int hipMemcpyAsync(void *d, const void *s, size_t n, int k, void *st) { (void)k, (void)st; memmove(d, s, n); fake_hip_calls[2]++; return 0; }
int hipStreamIsCapturing(void *s, int *st) { (void)s; *st = 0; return 0; }
/* The rest exist and fail: the tests never reach them. */
#define FAILS(name) int name(void) { return 801; }
FAILS(hipHostMalloc) FAILS(hipHostFree) FAILS(hipHostGetDevicePointer) FAILS(hipMemcpy) FAILS(hipStreamCreateWithFlags)
FAILS(hipStreamDestroy) FAILS(hipStreamSynchronize) FAILS(hipEventCreateWithFlags) FAILS(hipEventRecord)
FAILS(hipEventSynchronize) FAILS(hipEventDestroy) FAILS(hipStreamWaitEvent)
