/*
 * runtime_mem.c: tp_mem_alloc and tp_mem_free, host memory that same-host peers map and read in place. Each
 * allocation is a memfd sealed against shrinking, mapped shared; the set of live ones lets a transport find the
 * memfd behind a send buffer (tp_mem_find), so a peer reads the bytes with one copy instead of two through a ring.
 * Every collective call asks whether its buffers are host memory, and a GPU driver's answer costs ~90 ns a buffer;
 * tp_mem_known answers for two kinds of memory without the driver: the first MEM_KNOWN allocations, mirrored for
 * readers that take no lock, and the process's brk heap, where malloc puts the main thread's small buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime_devices.h"
#include "runtime_log.h"
#include "tp.h"

#define MEM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

typedef struct mem_region {
    uint8_t *base;
    size_t bytes; /* mapped: the request rounded up to whole pages */
    int fd;
    uint64_t ino;
} mem_region_t;

static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_region_t *regions;
static size_t n_regions, cap_regions;

/* Bounds of the first MEM_KNOWN live allocations under a sequence count (odd while a writer, holding regions_lock,
 * changes them): a reader whose count differed before and after its look saw nothing it may trust. */
#define MEM_KNOWN 32
static struct {
    _Atomic uintptr_t lo, hi;
} known[MEM_KNOWN];
static _Atomic unsigned known_n, known_seq;

/* Called with regions_lock held, after every change to the table. */
static void known_update(void)
{
    unsigned n = n_regions < MEM_KNOWN ? (unsigned)n_regions : MEM_KNOWN;
    atomic_fetch_add_explicit(&known_seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release); /* the odd count is seen before any bound changes */
    for (unsigned i = 0; i < n; i++) {
        atomic_store_explicit(&known[i].lo, (uintptr_t)regions[i].base, memory_order_relaxed);
        atomic_store_explicit(&known[i].hi, (uintptr_t)regions[i].base + regions[i].bytes, memory_order_relaxed);
    }
    atomic_store_explicit(&known_n, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&known_seq, 1, memory_order_release);
}

/* Where the brk heap begins (/proc/self/stat's 47th field, start_brk), 0 where it cannot be read. */
static uintptr_t heap_start;
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;

static void find_heap(void)
{
    char line[2048];
    FILE *f = fopen("/proc/self/stat", "re");
    if (f == NULL) return;
    char *got = fgets(line, sizeof(line), f), *end = got != NULL ? strrchr(line, ')') : NULL;
    fclose(f);
    if (end == NULL) return;
    char *tok, *save = NULL;
    int field = 2; /* ")" ends the second field, the command's name, which may hold spaces and parentheses */
    for (tok = strtok_r(end + 1, " ", &save); tok != NULL && ++field < 47;) tok = strtok_r(NULL, " ", &save);
    if (tok != NULL) heap_start = (uintptr_t)strtoull(tok, NULL, 10);
}

/* The heap is one mapping from its start to the break: the kernel grows it only where nothing else is mapped, and
 * no driver maps over it, so an address below the break is host memory. (The break read may lag a trim by another
 * thread: the pages that thread's free just gave back, no buffer a caller may still pass.) */
static int in_heap(uintptr_t a)
{
    pthread_once(&heap_once, find_heap);
    return heap_start != 0 && a >= heap_start && a < (uintptr_t)sbrk(0);
}

int tp_mem_known(const void *p)
{
    if (in_heap((uintptr_t)p)) return 1;
    unsigned seq = atomic_load_explicit(&known_seq, memory_order_acquire);
    if (seq & 1) return 0;
    unsigned n = atomic_load_explicit(&known_n, memory_order_relaxed);
    uintptr_t a = (uintptr_t)p;
    int in = 0;
    for (unsigned i = 0; i < n && !in; i++)
        in = a >= atomic_load_explicit(&known[i].lo, memory_order_relaxed) &&
             a < atomic_load_explicit(&known[i].hi, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire); /* the bounds are read before the count is read again */
    return in && atomic_load_explicit(&known_seq, memory_order_relaxed) == seq;
}

static int region_of(const void *p)
{
    for (size_t i = 0; i < n_regions; i++)
        if ((const uint8_t *)p >= regions[i].base && (const uint8_t *)p < regions[i].base + regions[i].bytes)
            return (int)i;
    return -1;
}

tp_status_t tp_mem_alloc(size_t bytes, void **ptr)
{
    if (ptr == NULL) {
        tp_log(TP_LOG_ERROR, "mem", "tp_mem_alloc: ptr is NULL: pass where the address goes");
        return TP_ERR_INVALID;
    }
    *ptr = NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
    if (bytes == 0 || len < bytes || len > (size_t)INT64_MAX) {
        tp_log(TP_LOG_ERROR, "mem", "tp_mem_alloc: %zu bytes: ask for 1 byte or more, below 2^63", bytes);
        return TP_ERR_INVALID;
    }
    int fd = memfd_create("tp-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    struct stat st;
    void *base = MAP_FAILED;
    const char *what = NULL;
    if (fd < 0) what = "memfd_create";
    else if (ftruncate(fd, (off_t)len) != 0) what = "ftruncate";
    else if (fcntl(fd, F_ADD_SEALS, MEM_SEALS) != 0) what = "sealing";
    else if (fstat(fd, &st) != 0) what = "fstat";
    /* populated now, by the owner: a peer's first read of each page then only maps it */
    else if ((base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)) == MAP_FAILED)
        what = "mmap";
    if (what != NULL) {
        int e = errno;
        if (fd >= 0) close(fd);
        tp_log(TP_LOG_ERROR, "mem", "tp_mem_alloc: %zu bytes: %s failed: %s", bytes, what, strerror(e));
        return e == ENOMEM || e == ENOSPC || e == EMFILE || e == ENFILE ? TP_ERR_NO_MEMORY : TP_ERR_SYSTEM;
    }
    pthread_mutex_lock(&regions_lock);
    if (n_regions == cap_regions) {
        size_t cap = cap_regions ? 2 * cap_regions : 16;
        mem_region_t *r = realloc(regions, cap * sizeof(*r));
        if (r == NULL) {
            pthread_mutex_unlock(&regions_lock);
            munmap(base, len);
            close(fd);
            tp_log(TP_LOG_ERROR, "mem", "tp_mem_alloc: no memory for the table of allocations");
            return TP_ERR_NO_MEMORY;
        }
        regions = r;
        cap_regions = cap;
    }
    regions[n_regions++] = (mem_region_t){.base = base, .bytes = len, .fd = fd, .ino = (uint64_t)st.st_ino};
    known_update();
    pthread_mutex_unlock(&regions_lock);
    *ptr = base;
    return TP_OK;
}

tp_status_t tp_mem_free(void *ptr)
{
    if (ptr == NULL) return TP_OK;
    pthread_mutex_lock(&regions_lock);
    int i = region_of(ptr);
    mem_region_t r = i >= 0 ? regions[i] : (mem_region_t){0};
    if (i >= 0 && r.base == ptr) {
        regions[i] = regions[--n_regions];
        known_update(); /* before munmap: the range may come back as any kind of memory */
    }
    pthread_mutex_unlock(&regions_lock);
    if (i < 0 || r.base != ptr) {
        tp_log(TP_LOG_ERROR, "mem", "tp_mem_free: %p is not an address tp_mem_alloc returned%s", ptr,
               i >= 0 ? " (it lies inside one)" : " (or it was freed already)");
        return TP_ERR_INVALID;
    }
    munmap(r.base, r.bytes);
    close(r.fd);
    return TP_OK;
}

int tp_mem_find(const void *p, size_t n, tp_mem_ref_t *ref)
{
    pthread_mutex_lock(&regions_lock);
    int i = region_of(p);
    int found = i >= 0 && n <= regions[i].bytes - (size_t)((const uint8_t *)p - regions[i].base);
    if (found)
        *ref = (tp_mem_ref_t){.fd = regions[i].fd,
                              .ino = regions[i].ino,
                              .bytes = regions[i].bytes,
                              .offset = (size_t)((const uint8_t *)p - regions[i].base)};
    pthread_mutex_unlock(&regions_lock);
    return found;
}
