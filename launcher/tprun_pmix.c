/* tprun_pmix.c: a PMIx server for the ranks this process starts, with libpmix dlopen'd (tprun --pmix). */
#include "tprun_pmix.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_log.h"

/* The tmpdir's name is known before libpmix is; the keeper (a fork without a server) only removes it. */
static char tmpdir[512];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void tmpdir_remove(void)
{
    if (tmpdir[0] == '\0') return;
    nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    tmpdir[0] = '\0';
}

void tprun_pmix_keeper_cleanup(void) { tmpdir_remove(); }

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
    return TP_OK;
}

#ifdef HAVE_PMIX
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>

#include <pmix.h>
#include <pmix_server.h>

#include "runtime_dl.h"

/* libpmix is loaded only by tprun --pmix: a plain tprun starts as fast as before and needs no libpmix. */
#define PMIX_SYMBOLS(X)                                                                                          \
    X(PMIx_server_init) X(PMIx_server_finalize) X(PMIx_server_register_nspace) X(PMIx_server_register_client)  \
        X(PMIx_server_setup_fork) X(PMIx_generate_regex) X(PMIx_generate_ppn) X(PMIx_Notify_event)             \
            X(PMIx_Error_string) X(PMIx_Info_load) X(PMIx_Value_destruct)
#define PMIX_FIELD(name) __typeof__(name) *p_##name;
#define PMIX_NAME(name) #name,
static struct {
    void *handle;
    PMIX_SYMBOLS(PMIX_FIELD)
} lib;
static const char *const lib_names[] = {PMIX_SYMBOLS(PMIX_NAME)};
/* From here on, every PMIx call (the header's macros included) goes through the loaded table. */
#define PMIx_server_init (*lib.p_PMIx_server_init)
#define PMIx_server_finalize (*lib.p_PMIx_server_finalize)
#define PMIx_server_register_nspace (*lib.p_PMIx_server_register_nspace)
#define PMIx_server_register_client (*lib.p_PMIx_server_register_client)
#define PMIx_server_setup_fork (*lib.p_PMIx_server_setup_fork)
#define PMIx_generate_regex (*lib.p_PMIx_generate_regex)
#define PMIx_generate_ppn (*lib.p_PMIx_generate_ppn)
#define PMIx_Notify_event (*lib.p_PMIx_Notify_event)
#define PMIx_Error_string (*lib.p_PMIx_Error_string)
#define PMIx_Info_load (*lib.p_PMIx_Info_load)
#define PMIx_Value_destruct (*lib.p_PMIx_Value_destruct)

tp_status_t tprun_pmix_load(char *err, size_t err_len)
{
    char why[512];
    if (lib.handle != NULL) return TP_OK;
    lib.handle = tp_dl_open("libpmix.so.2", TP_PMIX_LIBDIR, lib_names, (void **)&lib.p_PMIx_server_init,
                            sizeof(lib_names) / sizeof(lib_names[0]), "PMIx 4", why, sizeof(why));
    if (lib.handle == NULL) {
        snprintf(err, err_len, "--pmix: cannot load libpmix.so.2: %s (install libpmix2, or set LD_LIBRARY_PATH to "
                 "its directory)", why);
        return TP_ERR_UNSUPPORTED;
    }
    return TP_OK;
}

/* Events from PMIx's progress thread: a small queue under a lock, and an eventfd the loop polls. */
#define QUEUE_LEN 64
static struct {
    int up;          /* PMIx_server_init succeeded */
    int pollfd;      /* an epoll over evfd and timerfd, itself polled by tprun's loop */
    int evfd;
    int timerfd;
    pmix_nspace_t nspace;
    int world_size;
    char ***env_mem; /* per local rank, two arrays: what PMIx_server_setup_fork added, and the environment */
    int env_count;
    pmix_info_t notify_info[2];
    pthread_mutex_t lock;
    tprun_pmix_event_t queue[QUEUE_LEN];
    int head, count;
} srv = {.pollfd = -1, .evfd = -1, .timerfd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static void post(const tprun_pmix_event_t *ev)
{
    pthread_mutex_lock(&srv.lock);
    if (srv.count < QUEUE_LEN) srv.queue[(srv.head + srv.count++) % QUEUE_LEN] = *ev;
    pthread_mutex_unlock(&srv.lock);
    uint64_t one = 1;
    ssize_t n = write(srv.evfd, &one, sizeof(one));
    (void)n;
}

int tprun_pmix_next_event(tprun_pmix_event_t *ev)
{
    uint64_t v;
    ssize_t n = read(srv.evfd, &v, sizeof(v));
    (void)n;
    pthread_mutex_lock(&srv.lock);
    int got = srv.count > 0;
    if (got) {
        *ev = srv.queue[srv.head];
        srv.head = (srv.head + 1) % QUEUE_LEN;
        srv.count--;
    }
    pthread_mutex_unlock(&srv.lock);
    return got;
}

int tprun_pmix_event_fd(void) { return srv.pollfd; }

void tprun_pmix_timer_arm(double seconds)
{
    struct itimerspec t = {{0, 0}, {0, 0}};
    if (seconds > 0) {
        t.it_value.tv_sec = (time_t)seconds;
        t.it_value.tv_nsec = (long)((seconds - (double)t.it_value.tv_sec) * 1e9);
        if (t.it_value.tv_sec == 0 && t.it_value.tv_nsec == 0) t.it_value.tv_nsec = 1;
    }
    timerfd_settime(srv.timerfd, 0, &t, NULL);
}

int tprun_pmix_timer_fired(void)
{
    uint64_t v;
    return srv.timerfd >= 0 && read(srv.timerfd, &v, sizeof(v)) == (ssize_t)sizeof(v);
}

/* ---- Upcalls: they run on PMIx's progress thread and only post events. ---- */

static pmix_status_t on_abort(const pmix_proc_t *proc, void *server_object, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object, (void)procs, (void)nprocs, (void)cbfunc, (void)cbdata;
    tprun_pmix_event_t ev = {.kind = TPRUN_PMIX_ABORT, .rank = (int)proc->rank, .status = status};
    snprintf(ev.msg, sizeof(ev.msg), "%s", msg != NULL ? msg : "");
    post(&ev);
    return PMIX_OPERATION_SUCCEEDED; /* the caller's PMIx_Abort returns; tprun ends the job */
}

/* Every participant is on this host, so the data PMIx collected here is all there is: hand it back. */
static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                              char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)procs, (void)info, (void)ninfo;
    tp_log(TP_LOG_DEBUG, "pmix", "fence_nb: %zu participant entries, %zu bytes collected here", nprocs, ndata);
    if (cbfunc != NULL) cbfunc(PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

/* Single host: PMIx finds every rank's data locally and never needs another host's. */
static pmix_status_t on_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                               pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)proc, (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
    return PMIX_ERR_NOT_FOUND;
}

static void notified(pmix_status_t status, void *cbdata)
{
    (void)status, (void)cbdata;
    tprun_pmix_event_t ev = {.kind = TPRUN_PMIX_NOTIFIED, .rank = -1};
    post(&ev);
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
    rc = op_wait(&w, PMIx_server_register_nspace(srv.nspace, (int)nlocal, info, n, op_done, &w));
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
        PMIX_LOAD_PROCID(&proc, srv.nspace, (pmix_rank_t)r);
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
    if (lib.handle == NULL || tmpdir[0] == '\0') return TP_ERR_INVALID;
    srv.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    srv.timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    srv.pollfd = epoll_create1(EPOLL_CLOEXEC);
    if (srv.evfd < 0 || srv.timerfd < 0 || srv.pollfd < 0) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: cannot create the server's event fds: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    struct epoll_event e = {.events = EPOLLIN};
    epoll_ctl(srv.pollfd, EPOLL_CTL_ADD, srv.evfd, &e);
    epoll_ctl(srv.pollfd, EPOLL_CTL_ADD, srv.timerfd, &e);
    PMIX_LOAD_NSPACE(srv.nspace, job->nspace);
    srv.world_size = job->world_size;
    /* The hash store: no shared-memory segments to leave behind, and a faster PMIx_Init in the ranks. */
    setenv("PMIX_MCA_gds", "hash", 0);
    static pmix_server_module_t module = {.abort = on_abort, .fence_nb = on_fence, .direct_modex = on_dmodex};
    pmix_info_t info[2];
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
    pmix_status_t rc = PMIx_server_init(&module, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: PMIx_server_init failed: %s", PMIx_Error_string(rc));
        return TP_ERR_SYSTEM;
    }
    srv.up = 1;
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
    PMIX_LOAD_PROCID(&proc, srv.nspace, (pmix_rank_t)rank);
    char **add = NULL;
    pmix_status_t rc = PMIx_server_setup_fork(&proc, &add);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_ERROR, "pmix", "--pmix: PMIx_server_setup_fork(rank %d) failed: %s", rank,
               PMIx_Error_string(rc));
        return TP_ERR_SYSTEM;
    }
    char ***mem = realloc(srv.env_mem, (size_t)(srv.env_count + 1) * 2 * sizeof(*mem));
    if (mem == NULL) return TP_ERR_NO_MEMORY;
    srv.env_mem = mem;
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
    srv.env_mem[srv.env_count * 2] = add;
    srv.env_mem[srv.env_count * 2 + 1] = env;
    srv.env_count++;
    *out = env;
    return TP_OK;
}

tp_status_t tprun_pmix_notify_aborted(int rank)
{
    if (!srv.up) return TP_ERR_INVALID;
    pmix_proc_t affected, source;
    bool yes = true;
    PMIX_LOAD_PROCID(&affected, srv.nspace, (pmix_rank_t)rank);
    PMIX_LOAD_PROCID(&source, srv.nspace, (pmix_rank_t)rank);
    /* The info must live until PMIx calls back: it is the server's, not the stack's. */
    PMIX_INFO_LOAD(&srv.notify_info[0], PMIX_EVENT_AFFECTED_PROC, &affected, PMIX_PROC);
    PMIX_INFO_LOAD(&srv.notify_info[1], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
    pmix_status_t rc = PMIx_Notify_event(PMIX_ERR_PROC_ABORTED, &source, PMIX_RANGE_NAMESPACE, srv.notify_info, 2,
                                         notified, NULL);
    if (rc == PMIX_SUCCESS) return TP_OK;
    if (rc == PMIX_OPERATION_SUCCEEDED) {
        notified(PMIX_SUCCESS, NULL);
        return TP_OK;
    }
    tp_log(TP_LOG_WARN, "pmix", "PMIx_Notify_event(PROC-ABORTED, rank %d) failed: %s", rank, PMIx_Error_string(rc));
    return TP_ERR_SYSTEM;
}

void tprun_pmix_server_stop(void)
{
    if (srv.up) PMIx_server_finalize();
    srv.up = 0;
    for (int i = 0; i < srv.env_count; i++) {
        for (char **e = srv.env_mem[2 * i]; e != NULL && *e != NULL; e++) free(*e);
        free(srv.env_mem[2 * i]);
        free(srv.env_mem[2 * i + 1]);
    }
    free(srv.env_mem);
    srv.env_mem = NULL;
    srv.env_count = 0;
    int *fds[] = {&srv.pollfd, &srv.evfd, &srv.timerfd};
    for (size_t i = 0; i < 3; i++) {
        if (*fds[i] >= 0) close(*fds[i]);
        *fds[i] = -1;
    }
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
int tprun_pmix_event_fd(void) { return -1; }
int tprun_pmix_next_event(tprun_pmix_event_t *ev) { return (void)ev, 0; }
tp_status_t tprun_pmix_notify_aborted(int rank) { return (void)rank, TP_ERR_UNSUPPORTED; }
void tprun_pmix_timer_arm(double seconds) { (void)seconds; }
int tprun_pmix_timer_fired(void) { return 0; }
void tprun_pmix_server_stop(void) { tmpdir_remove(); }

#endif
