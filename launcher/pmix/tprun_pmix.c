/* tprun_pmix.c: a PMIx server for the ranks this process starts, with libpmix dlopen'd (tprun --pmix). */
#include "tprun_pmix.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_log.h"
#include "services.h"

/* The tmpdir's name is known before libpmix is; it is registered with the keeper, which removes it if tprun dies. */
static char tmpdir[512];

static void tmpdir_remove(void)
{
    tprun_services_remove_path(tmpdir);
    tmpdir[0] = '\0';
}

tp_status_t tprun_pmix_tmpdir_create(void)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    snprintf(tmpdir, sizeof(tmpdir), "%s/tprun-pmix.XXXXXX", base);
    if (mkdtemp(tmpdir) == NULL) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: cannot create the server's directory %s: %s", tmpdir, strerror(errno));
        tmpdir[0] = '\0';
        return TP_ERR_SYSTEM;
    }
    if (tprun_services_keep_path(tmpdir) != 0) {
        tmpdir_remove();
        return TP_ERR_SYSTEM;
    }
    return TP_OK;
}

#ifdef HAVE_PMIX
#include <pthread.h>
#include <time.h>

#include "runtime_dl.h"
#include "tprun_pmix_lib.h"

/* libpmix is loaded only by tprun --pmix: a plain tprun starts as fast as before and needs no libpmix. */
tprun_pmix_lib_t tprun_pmix_lib;
tprun_pmix_server_t tprun_pmix_srv;
#define TPRUN_PMIX_NAME(name) #name,
static const char *const lib_names[] = {TPRUN_PMIX_SYMBOLS(TPRUN_PMIX_NAME)};

/* Per local rank, two arrays: what PMIx_server_setup_fork added, and the environment built from it. */
static char ***env_mem;
static int env_count;

tp_status_t tprun_pmix_load(char *err, size_t err_len)
{
    char why[512];
    if (tprun_pmix_lib.handle != NULL) return TP_OK;
    tprun_pmix_lib.handle = tp_dl_open("libpmix.so.2", TP_PMIX_LIBDIR, lib_names,
                                       (void **)&tprun_pmix_lib.p_PMIx_server_init,
                                       sizeof(lib_names) / sizeof(lib_names[0]), "PMIx 4", why, sizeof(why));
    if (tprun_pmix_lib.handle == NULL) {
        snprintf(err, err_len, "--pmix: cannot load libpmix.so.2: %s (install libpmix2, or set LD_LIBRARY_PATH to "
                 "its directory)", why);
        return TP_ERR_UNSUPPORTED;
    }
    return TP_OK;
}

/* ---- Registration: blocking calls made from the main thread, waited on with a bound. ---- */

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    pmix_status_t status;
} waiter_t;

static void op_done(pmix_status_t status, void *cbdata)
{
    waiter_t *w = cbdata;
    pthread_mutex_lock(&w->lock);
    w->status = status;
    w->done = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static pmix_status_t op_wait(waiter_t *w, pmix_status_t rc)
{
    if (rc == PMIX_OPERATION_SUCCEEDED) return PMIX_SUCCESS;
    if (rc != PMIX_SUCCESS) return rc;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&w->lock);
    int e = 0;
    while (!w->done && e != ETIMEDOUT) e = pthread_cond_timedwait(&w->cond, &w->lock, &until);
    rc = w->done ? w->status : PMIX_ERR_TIMEOUT;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

#define WAITER_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, PMIX_SUCCESS}

static int rank_host(const tprun_pmix_job_t *job, int r) { return job->rank_host != NULL ? job->rank_host[r] : 0; }

/* "0,1;2,3": each host's ranks, hosts in PMIX_NODEID order (the input of PMIx_generate_ppn). */
static char *ranks_by_host(const tprun_pmix_job_t *job, int only_host)
{
    size_t cap = (size_t)job->world_size * 12 + (size_t)job->num_hosts + 1, used = 0;
    char *s = malloc(cap);
    if (s == NULL) return NULL;
    s[0] = '\0';
    for (int h = 0; h < job->num_hosts; h++) {
        if (only_host >= 0 && h != only_host) continue;
        int first = 1;
        if (only_host < 0 && h > 0) used += (size_t)snprintf(s + used, cap - used, ";");
        for (int r = 0; r < job->world_size; r++)
            if (rank_host(job, r) == h)
                used += (size_t)snprintf(s + used, cap - used, "%s%d", first ? "" : ",", r), first = 0;
    }
    return s;
}

static char *host_list(const tprun_pmix_job_t *job)
{
    size_t cap = 1;
    for (int h = 0; h < job->num_hosts; h++) cap += strlen(job->hosts[h]) + 1;
    char *s = malloc(cap);
    if (s == NULL) return NULL;
    s[0] = '\0';
    for (int h = 0; h < job->num_hosts; h++) {
        if (h > 0) strcat(s, ",");
        strcat(s, job->hosts[h]);
    }
    return s;
}

static tp_status_t register_job(const tprun_pmix_job_t *job)
{
    char *hosts = host_list(job), *ppn_in = ranks_by_host(job, -1), *peers = ranks_by_host(job, job->this_host);
    char *node_map = NULL, *proc_map = NULL;
    tp_status_t st = TP_ERR_NO_MEMORY;
    if (hosts == NULL || ppn_in == NULL || peers == NULL) goto out;
    pmix_status_t rc = PMIx_generate_regex(hosts, &node_map);
    if (rc == PMIX_SUCCESS) rc = PMIx_generate_ppn(ppn_in, &proc_map);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: cannot describe the job's hosts to PMIx: %s", PMIx_Error_string(rc));
        st = TP_ERR_SYSTEM;
        goto out;
    }
    uint32_t size = (uint32_t)job->world_size, nnodes = (uint32_t)job->num_hosts, zero = 0, nlocal = 0;
    pmix_rank_t leader = PMIX_RANK_UNDEF, appldr = 0;
    for (int r = 0; r < job->world_size; r++)
        if (rank_host(job, r) == job->this_host && nlocal++ == 0) leader = (pmix_rank_t)r;
    pmix_info_t info[12];
    size_t n = 0;
    PMIX_INFO_LOAD(&info[n++], PMIX_UNIV_SIZE, &size, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_JOB_SIZE, &size, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_MAX_PROCS, &size, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCAL_SIZE, &nlocal, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCAL_PEERS, peers, PMIX_STRING);
    PMIX_INFO_LOAD(&info[n++], PMIX_NODE_MAP, node_map, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[n++], PMIX_PROC_MAP, proc_map, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[n++], PMIX_NUM_NODES, &nnodes, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_APPNUM, &zero, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCALLDR, &leader, PMIX_PROC_RANK);
    PMIX_INFO_LOAD(&info[n++], PMIX_APPLDR, &appldr, PMIX_PROC_RANK);
    PMIX_INFO_LOAD(&info[n++], PMIX_JOBID, job->nspace, PMIX_STRING);
    waiter_t w = WAITER_INIT;
    rc = op_wait(&w, PMIx_server_register_nspace(tprun_pmix_srv.nspace, (int)nlocal, info, n, op_done, &w));
    for (size_t i = 0; i < n; i++) PMIX_INFO_DESTRUCT(&info[i]);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: PMIx_server_register_nspace(%s) failed: %s", job->nspace,
               PMIx_Error_string(rc));
        st = TP_ERR_SYSTEM;
        goto out;
    }
    st = TP_OK;
    for (int r = 0; r < job->world_size && st == TP_OK; r++) {
        if (rank_host(job, r) != job->this_host) continue;
        pmix_proc_t proc;
        PMIX_LOAD_PROCID(&proc, tprun_pmix_srv.nspace, (pmix_rank_t)r);
        waiter_t wc = WAITER_INIT;
        rc = op_wait(&wc, PMIx_server_register_client(&proc, geteuid(), getegid(), NULL, op_done, &wc));
        if (rc != PMIX_SUCCESS) {
            tp_log(TP_LOG_ERROR, "pmix", "--pmix: PMIx_server_register_client(rank %d) failed: %s", r,
                   PMIx_Error_string(rc));
            st = TP_ERR_SYSTEM;
        }
    }
out:
    free(hosts);
    free(ppn_in);
    free(peers);
    free(node_map);
    free(proc_map);
    return st;
}

tp_status_t tprun_pmix_server_start(const tprun_pmix_job_t *job)
{
    if (tprun_pmix_lib.handle == NULL || tmpdir[0] == '\0') return TP_ERR_INVALID;
    if (tprun_pmix_ops_open() != 0) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: cannot create the server's event fds: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    PMIX_LOAD_NSPACE(tprun_pmix_srv.nspace, job->nspace);
    tprun_pmix_srv.world_size = job->world_size;
    /* The hash store: no shared-memory segments to leave behind, and a faster PMIx_Init in the ranks. */
    setenv("PMIX_MCA_gds", "hash", 0);
    pmix_info_t info[2];
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
    pmix_status_t rc = PMIx_server_init(&tprun_pmix_module, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: PMIx_server_init failed: %s", PMIx_Error_string(rc));
        return TP_ERR_SYSTEM;
    }
    tprun_pmix_srv.up = 1;
    return register_job(job);
}

/* Inherited PMIx contact variables would point a rank at another server; MCA tuning passes through. */
static int stale_pmix_var(const char *entry)
{
    return strncmp(entry, "PMIX_", 5) == 0 && strncmp(entry, "PMIX_MCA_", 9) != 0;
}

tp_status_t tprun_pmix_rank_env(int rank, char *const *base, char ***out)
{
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, tprun_pmix_srv.nspace, (pmix_rank_t)rank);
    char **add = NULL;
    pmix_status_t rc = PMIx_server_setup_fork(&proc, &add);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: PMIx_server_setup_fork(rank %d) failed: %s", rank,
               PMIx_Error_string(rc));
        return TP_ERR_SYSTEM;
    }
    char ***mem = realloc(env_mem, (size_t)(env_count + 1) * 2 * sizeof(*mem));
    if (mem == NULL) return TP_ERR_NO_MEMORY;
    env_mem = mem;
    size_t nbase = 0, nadd = 0;
    for (char *const *e = base; e != NULL && *e != NULL; e++) nbase++;
    for (char **e = add; e != NULL && *e != NULL; e++) nadd++;
    char **env = malloc((nbase + nadd + 1) * sizeof(*env));
    if (env == NULL) return TP_ERR_NO_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < nbase; i++)
        if (!stale_pmix_var(base[i])) env[k++] = base[i];
    for (size_t i = 0; i < nadd; i++) env[k++] = add[i];
    env[k] = NULL;
    env_mem[env_count * 2] = add;
    env_mem[env_count * 2 + 1] = env;
    env_count++;
    *out = env;
    return TP_OK;
}

void tprun_pmix_server_stop(void)
{
    if (tprun_pmix_srv.up) PMIx_server_finalize();
    tprun_pmix_srv.up = 0;
    for (int i = 0; i < env_count; i++) {
        for (char **e = env_mem[2 * i]; e != NULL && *e != NULL; e++) free(*e);
        free(env_mem[2 * i]);
        free(env_mem[2 * i + 1]);
    }
    free(env_mem);
    env_mem = NULL;
    env_count = 0;
    tprun_pmix_ops_close();
    tmpdir_remove();
}

#else /* built without the PMIx headers: --pmix says so before anything starts */

tp_status_t tprun_pmix_load(char *err, size_t err_len)
{
    snprintf(err, err_len, "--pmix: this tprun was built without the PMIx headers (install libpmix-dev and "
             "reconfigure)");
    return TP_ERR_UNSUPPORTED;
}
tp_status_t tprun_pmix_server_start(const tprun_pmix_job_t *job) { return (void)job, TP_ERR_UNSUPPORTED; }
tp_status_t tprun_pmix_rank_env(int rank, char *const *base, char ***out)
{
    return (void)rank, (void)base, (void)out, TP_ERR_UNSUPPORTED;
}
void tprun_pmix_server_stop(void) { tmpdir_remove(); }

#endif
