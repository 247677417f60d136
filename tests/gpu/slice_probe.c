/* slice_probe: the staging pattern without libtp (built by hand on a GPU machine, not by make: it includes cuda.h:
 *   gcc -O2 -I/usr/local/cuda/include tests/gpu/slice_probe.c -o slice_probe -lcuda -lpthread; ./slice_probe solo|pair). Each process: its main thread's stream writes ready and waits for
 * done; its proxy thread sees ready, copies 16 B out on its own stream (waits for a tick), meets the other process in
 * shared host memory (pair), copies 16 B back (tick), sets done. solo: one process, no meeting. p50 of the main
 * thread's write+wait+sync. If pair >> solo, the GPU serialises the two processes' contexts while both streams wait. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define CK(x)                                                                                                          \
    do {                                                                                                               \
        CUresult r_ = (x);                                                                                             \
        if (r_ != CUDA_SUCCESS) {                                                                                      \
            fprintf(stderr, "%s: %d\n", #x, r_);                                                                       \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define N 3000
static volatile uint64_t *meet; /* [0], [8]: each process's count, shared between processes */
static uint64_t *wds;           /* ready, done, tick: this process's pinned words */
static CUdeviceptr wdd;
static CUcontext ctx;
static int pair, me;
static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b)
{
    double x = *(double *)a, y = *(double *)b;
    return x < y ? -1 : x > y;
}
static void spin(volatile uint64_t *w, uint64_t v)
{
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < v)
        ;
}
static void *proxy(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    CUstream s;
    CUdeviceptr dev;
    void *pin;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&dev, 16));
    CK(cuMemHostAlloc(&pin, 16, 0));
    uint64_t tick = 0;
    for (uint64_t i = 1; i <= N; i++) {
        spin(&wds[0], i);
        CK(cuMemcpyDtoHAsync(pin, dev, 16, s));
        CK(cuStreamWriteValue64(s, wdd + 16, ++tick, 0));
        spin(&wds[2], tick);
        if (pair) {
            __atomic_store_n(&meet[me], i, __ATOMIC_RELEASE);
            spin(&meet[1 - me], i);
        }
        CK(cuMemcpyHtoDAsync(dev, pin, 16, s));
        CK(cuStreamWriteValue64(s, wdd + 16, ++tick, 0));
        spin(&wds[2], tick);
        __atomic_store_n(&wds[1], i, __ATOMIC_RELEASE);
    }
    return NULL;
}
int main(int argc, char **argv)
{
    pair = argc > 1 && strcmp(argv[1], "pair") == 0;
    meet = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset((void *)meet, 0, 4096);
    pid_t pid = pair ? fork() : 1;
    me = pid == 0;
    CUdevice d;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemHostAlloc((void **)&wds, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    memset(wds, 0, 4096);
    CK(cuMemHostGetDevicePointer(&wdd, wds, 0));
    pthread_t t;
    pthread_create(&t, NULL, proxy, NULL);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    static double v[N];
    for (uint64_t i = 1; i <= N; i++) {
        double t0 = now_us();
        CK(cuStreamWriteValue64(s, wdd, i, 0));
        CK(cuStreamWaitValue64(s, wdd + 8, i, CU_STREAM_WAIT_VALUE_GEQ));
        CK(cuStreamSynchronize(s));
        v[i - 1] = now_us() - t0;
    }
    pthread_join(t, NULL);
    if (pid > 1) waitpid(pid, NULL, 0);
    qsort(v, N, sizeof(double), cmp);
    printf("slice_probe %s, process %d: ready, proxy copy out, %s, copy in, done: p50 %7.1f us, p90 %7.1f us\n",
           pair ? "pair" : "solo", me, pair ? "meet the other process" : "no meeting", v[N / 2], v[N * 9 / 10]);
    return 0;
}
