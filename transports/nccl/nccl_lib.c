/* nccl_lib.c: libnccl.so.2 opened once, from one symbol list, with the environment NCCL must see before it opens. */
#include "nccl_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
    pthread_once_t once;
    nccl_lib_t lib;
    int ok;
    char why[512];
} loaded = {.once = PTHREAD_ONCE_INIT};

static const char *const names[] = {
    "ncclGetVersion", "ncclGetErrorString", "ncclGetUniqueId", "ncclCommInitRankConfig", "ncclCommGetAsyncError",
    "ncclCommAbort",  "ncclCommFinalize",   "ncclCommDestroy", "ncclMemAlloc",           "ncclMemFree",
    "ncclGroupStart", "ncclGroupEnd",       "ncclAllReduce",   "ncclReduceScatter",      "ncclAllGather",
    "ncclBroadcast",  "ncclSend",           "ncclRecv",
};

static void load_once(void)
{
    /* NVLink multicast can take a shared host's GPUs out of service: off unless the user asked for it. */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    const char *path = getenv("TP_NCCL_LIBRARY");
    if (path == NULL || path[0] == '\0') path = "libnccl.so.2";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(loaded.why, sizeof(loaded.why), "cannot load %s (%s)", path, dlerror());
        return;
    }
    void **slots = (void **)&loaded.lib;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if ((slots[i] = dlsym(h, names[i])) != NULL) continue;
        snprintf(loaded.why, sizeof(loaded.why), "%s lacks %s: NCCL 2.19 or later is needed (TP_NCCL_LIBRARY)", path,
                 names[i]);
        dlclose(h);
        return;
    }
    if (loaded.lib.get_version(&loaded.lib.version) != NCCL_OK || loaded.lib.version < 21900) {
        snprintf(loaded.why, sizeof(loaded.why), "%s is NCCL %d: NCCL 2.19 or later is needed (TP_NCCL_LIBRARY)", path,
                 loaded.lib.version);
        dlclose(h);
        return;
    }
    loaded.ok = 1; /* kept open for the life of the process: communicators and fate's aborts use it */
}

const nccl_lib_t *nccl_lib_load(char *why, size_t why_len)
{
    pthread_once(&loaded.once, load_once);
    if (loaded.ok) return &loaded.lib;
    snprintf(why, why_len, "%s", loaded.why);
    return NULL;
}

const char *nccl_lib_error(const nccl_lib_t *lib, nccl_result_t r)
{
    const char *s = lib != NULL ? lib->get_error_string(r) : NULL;
    return s != NULL ? s : "unknown NCCL error";
}
