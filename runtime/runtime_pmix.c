/* runtime_pmix.c: a PMIx client that only learns the world and passes rank 0's bootstrap address and job key. */
#include "runtime_pmix.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "runtime_log.h"

#define KEY_BOOT_ADDR "tp.boot.addr"
#define KEY_JOB_KEY "tp.job.key"

int tp_pmix_started(void)
{
    return getenv("TP_RANK") == NULL && getenv("PMIX_NAMESPACE") != NULL && getenv("PMIX_RANK") != NULL;
}

#ifdef HAVE_PMIX
#include <pmix.h>

#include "runtime_pmix_compat.h"

#include "runtime_dl.h"

/* libpmix is dlopen'd only when a PMIx server started this process: ranks under tprun never load it. */
#define PMIX_SYMBOLS(X)                                                                                          \
    X(PMIx_Init) X(PMIx_Finalize) X(PMIx_Get) X(PMIx_Get_nb) X(PMIx_Put) X(PMIx_Commit) X(PMIx_Fence_nb)         \
        X(PMIx_Error_string) X(PMIx_Value_xfer) X(PMIx_Info_load) X(PMIx_Value_destruct)
#define PMIX_FIELD(name) __typeof__(name) *p_##name;
#define PMIX_NAME(name) #name,
static struct {
    void *handle;
    PMIX_SYMBOLS(PMIX_FIELD)
} lib;
static const char *const lib_names[] = {PMIX_SYMBOLS(PMIX_NAME)};
/* From here on, every PMIx call (the header's macros included) goes through the loaded table. */
#define PMIx_Init (*lib.p_PMIx_Init)
#define PMIx_Finalize (*lib.p_PMIx_Finalize)
#define PMIx_Get (*lib.p_PMIx_Get)
#define PMIx_Get_nb (*lib.p_PMIx_Get_nb)
#define PMIx_Put (*lib.p_PMIx_Put)
#define PMIx_Commit (*lib.p_PMIx_Commit)
#define PMIx_Fence_nb (*lib.p_PMIx_Fence_nb)
#define PMIx_Error_string (*lib.p_PMIx_Error_string)
#define PMIx_Value_xfer (*lib.p_PMIx_Value_xfer)
#define PMIx_Info_load (*lib.p_PMIx_Info_load)
#define PMIx_Value_destruct (*lib.p_PMIx_Value_destruct)

/* Loads libpmix.so.2 (the loader's path, then configure's libdir) and every symbol, or says what is wrong. */
static tp_status_t lib_load(void)
{
    char why[512];
    if (lib.handle != NULL) return TP_OK;
    lib.handle = tp_dl_open("libpmix.so.2", TP_PMIX_LIBDIR, lib_names, (void **)&lib.p_PMIx_Init,
                            sizeof(lib_names) / sizeof(lib_names[0]), "PMIx 4", why, sizeof(why));
    if (lib.handle == NULL) {
        tp_log(TP_LOG_ERROR, "pmix", "started by a PMIx server (PMIX_NAMESPACE=%s) but cannot use libpmix.so.2: %s "
               "(install libpmix2, or set LD_LIBRARY_PATH to its directory)", getenv("PMIX_NAMESPACE"), why);
        return TP_ERR_UNSUPPORTED;
    }
    return TP_OK;
}

static int pmix_up;
static pmix_proc_t pmix_me;

/* One non-blocking PMIx call at a time, waited on with our own deadline so a silent server cannot hang us. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned gen; /* the call being waited for; a late callback of an abandoned one is ignored */
    int done;
    pmix_status_t status;
    pmix_value_t *value;
} op = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, PMIX_SUCCESS, NULL};

static void op_complete(unsigned gen, pmix_status_t status, pmix_value_t *value)
{
    pthread_mutex_lock(&op.lock);
    if (gen == op.gen && !op.done) {
        op.done = 1;
        op.status = status;
        op.value = value;
        value = NULL;
    }
    pthread_cond_broadcast(&op.cond);
    pthread_mutex_unlock(&op.lock);
    if (value != NULL) PMIX_VALUE_RELEASE(value);
}

static void fence_cb(pmix_status_t status, void *cbdata) { op_complete((unsigned)(uintptr_t)cbdata, status, NULL); }

static void get_cb(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    pmix_value_t *copy = NULL;
    if (status == PMIX_SUCCESS && kv != NULL) {
        PMIX_VALUE_CREATE(copy, 1);
        if (copy == NULL || PMIx_Value_xfer(copy, kv) != PMIX_SUCCESS) status = PMIX_ERR_NOMEM;
    }
    op_complete((unsigned)(uintptr_t)cbdata, status, copy);
}

static unsigned op_begin(void)
{
    pthread_mutex_lock(&op.lock);
    unsigned gen = ++op.gen;
    op.done = 0;
    op.value = NULL;
    pthread_mutex_unlock(&op.lock);
    return gen;
}

/* Waits for the call started as gen until timeout_s; PMIX_ERR_TIMEOUT when the server never answers. */
static pmix_status_t op_wait(unsigned gen, double timeout_s, pmix_value_t **value)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double whole = floor(timeout_s);
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&op.lock);
    int rc = 0;
    while (!op.done && op.gen == gen && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&op.cond, &op.lock, &until);
    pmix_status_t status = op.done ? op.status : PMIX_ERR_TIMEOUT;
    if (op.done && value != NULL) *value = op.value;
    else if (op.done && op.value != NULL) PMIX_VALUE_RELEASE(op.value);
    op.value = NULL;
    op.gen++; /* abandons the call if it is still pending */
    pthread_mutex_unlock(&op.lock);
    return status;
}

static int value_number(const pmix_value_t *v, uint64_t *out)
{
    switch (v->type) {
    case PMIX_UINT8: *out = v->data.uint8; return 1;
    case PMIX_UINT16: *out = v->data.uint16; return 1;
    case PMIX_UINT32: *out = v->data.uint32; return 1;
    case PMIX_UINT64: *out = v->data.uint64; return 1;
    case PMIX_SIZE: *out = v->data.size; return 1;
    case PMIX_PROC_RANK: *out = v->data.rank; return 1;
    case PMIX_INT: if (v->data.integer < 0) return 0; *out = (uint64_t)v->data.integer; return 1;
    default: return 0;
    }
}

/* A job- or proc-level key the server knows at init: required ones are an error when missing. */
static tp_status_t get_number(const pmix_proc_t *proc, const char *key, int required, int *out)
{
    pmix_info_t info;
    bool yes = true;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, &info, 1, &v);
    PMIX_INFO_DESTRUCT(&info);
    uint64_t n = 0;
    int ok = rc == PMIX_SUCCESS && v != NULL && value_number(v, &n) && n < (1u << 24);
    if (v != NULL) PMIX_VALUE_RELEASE(v);
    if (ok) {
        *out = (int)n;
        return TP_OK;
    }
    if (!required) return TP_OK;
    tp_log(TP_LOG_ERROR, "pmix", "the PMIx server gave no usable %s for namespace %s: %s", key, proc->nspace,
           rc == PMIX_SUCCESS ? "not a number below 2^24" : PMIx_Error_string(rc));
    return TP_ERR_BOOTSTRAP;
}

/* The address other hosts reach rank 0 by: its host name's IPv4 unless loopback, else its first interface's. */
static void root_address(const char *host, int one_host, char *out, size_t len)
{
    snprintf(out, len, "127.0.0.1");
    if (one_host) return;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) == 0) {
        for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
            struct in_addr in = ((struct sockaddr_in *)a->ai_addr)->sin_addr;
            if ((ntohl(in.s_addr) >> 24) == 127) continue;
            inet_ntop(AF_INET, &in, out, (socklen_t)len);
            freeaddrinfo(ai);
            return;
        }
        freeaddrinfo(ai);
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return;
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)len);
        break;
    }
    freeifaddrs(ifs);
}

tp_status_t tp_pmix_world(tp_world_t *w)
{
    tp_status_t s = lib_load();
    if (s != TP_OK) return s;
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "started by a PMIx server (PMIX_NAMESPACE=%s, PMIX_RANK=%s) but PMIx_Init "
               "failed: %s (the server is gone or refused this process; unset PMIX_NAMESPACE to run without it)",
               getenv("PMIX_NAMESPACE"), getenv("PMIX_RANK"), PMIx_Error_string(rc));
        return TP_ERR_BOOTSTRAP;
    }
    pmix_up = 1;
    pmix_me = me;
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    if ((s = get_number(&job, PMIX_JOB_SIZE, 1, &w->size)) != TP_OK) return s;
    if ((s = get_number(&job, PMIX_LOCAL_SIZE, 0, &w->local_size)) != TP_OK) return s;
    if ((s = get_number(&me, PMIX_LOCAL_RANK, 0, &w->local_rank)) != TP_OK) return s;
    if ((s = get_number(&me, PMIX_NODEID, 0, &w->node_rank)) != TP_OK) return s;
    if (me.rank >= (pmix_rank_t)w->size) {
        tp_log(TP_LOG_ERROR, "pmix", "PMIx rank %u is not below the job size %d", me.rank, w->size);
        return TP_ERR_BOOTSTRAP;
    }
    w->rank = (int)me.rank;
    snprintf(w->job_id, sizeof(w->job_id), "pmix-%.120s", me.nspace);
    w->source = TP_WORLD_PMIX;
    if (w->rank == 0) {
        char host[TP_HOST_MAX] = "";
        if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "localhost");
        host[sizeof(host) - 1] = '\0';
        root_address(host, w->local_size == w->size, w->boot_host, sizeof(w->boot_host));
        w->boot_port = 0; /* the kernel picks it; the fence publishes it */
    }
    tp_log(TP_LOG_DEBUG, "pmix", "namespace %s rank %d of %d, local %d/%d, node %d", me.nspace, w->rank, w->size,
           w->local_rank, w->local_size, w->node_rank);
    return TP_OK;
}

static tp_status_t root_publish(tp_world_t *w)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    char addr[128], key[2 * TP_JOB_KEY_BYTES + 1];
    if (getsockname(w->boot_listen_fd, (struct sockaddr *)&sa, &sl) != 0) {
        tp_log(TP_LOG_ERROR, "pmix", "getsockname of the bootstrap listener: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    if (getrandom(w->job_key, TP_JOB_KEY_BYTES, 0) != TP_JOB_KEY_BYTES) {
        tp_log(TP_LOG_ERROR, "pmix", "getrandom for the job key: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    for (int i = 0; i < TP_JOB_KEY_BYTES; i++) sprintf(key + 2 * i, "%02x", w->job_key[i]);
    snprintf(addr, sizeof(addr), "%s:%d", w->advertise_ip, ntohs(sa.sin_port));
    w->boot_port = ntohs(sa.sin_port);
    const char *keys[2] = {KEY_BOOT_ADDR, KEY_JOB_KEY}, *values[2] = {addr, key};
    for (int i = 0; i < 2; i++) {
        pmix_value_t v;
        PMIX_VALUE_CONSTRUCT(&v);
        v.type = PMIX_STRING;
        v.data.string = (char *)values[i];
        pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, keys[i], &v);
        if (rc != PMIX_SUCCESS) {
            tp_log(TP_LOG_ERROR, "pmix", "PMIx_Put(%s) failed: %s", keys[i], PMIx_Error_string(rc));
            return TP_ERR_BOOTSTRAP;
        }
    }
    tp_log(TP_LOG_DEBUG, "pmix", "published bootstrap address %s", addr);
    return TP_OK;
}

/* Reads one of rank 0's strings after the fence. */
static tp_status_t root_string(const tp_world_t *w, const char *key, const pmix_info_t *info, size_t ninfo,
                               char *out, size_t len)
{
    pmix_proc_t root;
    PMIX_LOAD_PROCID(&root, pmix_me.nspace, 0);
    pmix_value_t *v = NULL;
    unsigned gen = op_begin();
    pmix_status_t rc = PMIx_Get_nb(&root, key, info, ninfo, get_cb, (void *)(uintptr_t)gen);
    if (rc == PMIX_SUCCESS) rc = op_wait(gen, w->boot_timeout_s + 1, &v);
    else op_wait(gen, 0, NULL);
    if (rc == PMIX_SUCCESS && (v == NULL || v->type != PMIX_STRING || v->data.string == NULL ||
                               strlen(v->data.string) >= len))
        rc = PMIX_ERR_BAD_PARAM;
    if (rc == PMIX_SUCCESS) snprintf(out, len, "%s", v->data.string);
    if (v != NULL) PMIX_VALUE_RELEASE(v);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "PMIx_Get of rank 0's %s failed: %s", key,
               rc == PMIX_ERR_BAD_PARAM ? "not a string of the expected length" : PMIx_Error_string(rc));
        return TP_ERR_BOOTSTRAP;
    }
    return TP_OK;
}

static tp_status_t parse_boot(tp_world_t *w, const char *addr, const char *key)
{
    const char *colon = strrchr(addr, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof(w->boot_host) || *end != '\0' ||
        port <= 0 || port > 65535 || strlen(key) != 2 * TP_JOB_KEY_BYTES) {
        tp_log(TP_LOG_ERROR, "pmix", "rank 0 published a bad bootstrap address \"%s\" or key", addr);
        return TP_ERR_PROTOCOL;
    }
    memcpy(w->boot_host, addr, (size_t)(colon - addr));
    w->boot_host[colon - addr] = '\0';
    w->boot_port = (int)port;
    for (int i = 0; i < TP_JOB_KEY_BYTES; i++) {
        unsigned b;
        if (sscanf(key + 2 * i, "%2x", &b) != 1) {
            tp_log(TP_LOG_ERROR, "pmix", "rank 0 published a job key that is not hex");
            return TP_ERR_PROTOCOL;
        }
        w->job_key[i] = (uint8_t)b;
    }
    return TP_OK;
}

tp_status_t tp_pmix_share_boot(tp_world_t *w)
{
    tp_status_t s;
    if (w->rank == 0 && (s = root_publish(w)) != TP_OK) return s;
    pmix_status_t rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "PMIx_Commit failed: %s", PMIx_Error_string(rc));
        return TP_ERR_BOOTSTRAP;
    }
    int timeout = (int)ceil(w->boot_timeout_s);
    bool yes = true;
    pmix_info_t info[2];
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &timeout, PMIX_INT);
    PMIX_INFO_LOAD(&info[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, pmix_me.nspace, PMIX_RANK_WILDCARD);
    unsigned gen = op_begin();
    rc = PMIx_Fence_nb(&job, 1, info, 2, fence_cb, (void *)(uintptr_t)gen);
    if (rc == PMIX_SUCCESS) rc = op_wait(gen, w->boot_timeout_s + 1, NULL);
    else op_wait(gen, 0, NULL);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "PMIx_Fence (collecting rank 0's bootstrap address) failed: %s%s",
               PMIx_Error_string(rc),
               rc == PMIX_ERR_TIMEOUT ? ": not every rank reached it within TP_BOOT_TIMEOUT"
               : rc == PMIX_ERR_PARTIAL_SUCCESS ? ": a rank of the job ended before reaching it" : "");
        s = TP_ERR_BOOTSTRAP;
    } else if (w->rank != 0) {
        char addr[TP_HOST_MAX + 16], key[2 * TP_JOB_KEY_BYTES + 1];
        s = root_string(w, KEY_BOOT_ADDR, info, 1, addr, sizeof(addr));
        if (s == TP_OK) s = root_string(w, KEY_JOB_KEY, info, 1, key, sizeof(key));
        if (s == TP_OK) s = parse_boot(w, addr, key);
        memset(key, 0, sizeof(key));
    }
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    return s;
}

void tp_pmix_finalize(void)
{
    if (!pmix_up) return;
    pmix_up = 0;
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS) tp_log(TP_LOG_WARN, "pmix", "PMIx_Finalize: %s", PMIx_Error_string(rc));
}

#else /* built without PMIx */

tp_status_t tp_pmix_world(tp_world_t *w)
{
    (void)w;
    tp_log(TP_LOG_ERROR, "pmix", "started by a PMIx server (PMIX_NAMESPACE=%s) but libtp was built without PMIx "
           "(configure --with-pmix); launch with tprun, or unset PMIX_NAMESPACE", getenv("PMIX_NAMESPACE"));
    return TP_ERR_UNSUPPORTED;
}

tp_status_t tp_pmix_share_boot(tp_world_t *w)
{
    (void)w;
    return TP_ERR_UNSUPPORTED;
}

void tp_pmix_finalize(void) {}

#endif
