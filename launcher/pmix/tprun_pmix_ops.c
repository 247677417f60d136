/* tprun_pmix_ops.c: the server's upcalls (abort, fence, direct modex) and their answers, across PMIx's thread. */
#include "tprun_pmix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_log.h"

void tprun_pmix_nspace(const char *job_id, char *out, size_t len) { snprintf(out, len, "tprun.%.200s", job_id); }

#ifdef HAVE_PMIX
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>

#include "tprun_pmix_lib.h"

/* An upcall PMIx waits on: its callback, until the host answers. */
typedef struct waiting {
    struct waiting *next;
    char *sig; /* fences: the participants and the number among this host's fences over them */
    unsigned seq;
    unsigned id; /* direct modex requests */
    pmix_modex_cbfunc_t cbfunc;
    void *cbdata;
} waiting_t;

/* How many fences over one set of participants this host has started. */
typedef struct sig_count {
    struct sig_count *next;
    char *sig;
    unsigned next_seq;
} sig_count_t;

typedef struct queued {
    struct queued *next;
    tprun_pmix_event_t ev;
} queued_t;

/* Everything the upcalls (PMIx's thread) and the loop (main thread) share is under lock. */
static struct {
    int pollfd; /* an epoll over evfd and timerfd, itself polled by the loop */
    int evfd;
    int timerfd;
    pthread_mutex_t lock;
    queued_t *head, *tail;
    waiting_t *fences, *wants;
    sig_count_t *counts;
    unsigned next_want;
    pmix_info_t notify_info[2];
} ops = {.pollfd = -1, .evfd = -1, .timerfd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

int tprun_pmix_ops_open(void)
{
    ops.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ops.timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    ops.pollfd = epoll_create1(EPOLL_CLOEXEC);
    if (ops.evfd < 0 || ops.timerfd < 0 || ops.pollfd < 0) return -1;
    struct epoll_event e = {.events = EPOLLIN};
    epoll_ctl(ops.pollfd, EPOLL_CTL_ADD, ops.evfd, &e);
    epoll_ctl(ops.pollfd, EPOLL_CTL_ADD, ops.timerfd, &e);
    return 0;
}

void tprun_pmix_event_free(tprun_pmix_event_t *ev)
{
    free(ev->sig);
    free(ev->data);
    ev->sig = NULL;
    ev->data = NULL;
}

static void waiting_free_all(waiting_t **list)
{
    while (*list != NULL) {
        waiting_t *w = *list;
        *list = w->next;
        free(w->sig);
        free(w);
    }
}

void tprun_pmix_ops_close(void)
{
    /* The server is finalized: nothing calls in any more. */
    while (ops.head != NULL) {
        queued_t *q = ops.head;
        ops.head = q->next;
        tprun_pmix_event_free(&q->ev);
        free(q);
    }
    ops.tail = NULL;
    waiting_free_all(&ops.fences);
    waiting_free_all(&ops.wants);
    while (ops.counts != NULL) {
        sig_count_t *c = ops.counts;
        ops.counts = c->next;
        free(c->sig);
        free(c);
    }
    int *fds[] = {&ops.pollfd, &ops.evfd, &ops.timerfd};
    for (size_t i = 0; i < 3; i++) {
        if (*fds[i] >= 0) close(*fds[i]);
        *fds[i] = -1;
    }
}

/* Hands ev (and what it points to) to the loop; 0, or -1 when out of memory (then ev is freed). */
static int post(tprun_pmix_event_t *ev)
{
    queued_t *q = malloc(sizeof(*q));
    if (q == NULL) {
        tprun_pmix_event_free(ev);
        return -1;
    }
    q->ev = *ev;
    q->next = NULL;
    pthread_mutex_lock(&ops.lock);
    if (ops.tail != NULL) ops.tail->next = q;
    else ops.head = q;
    ops.tail = q;
    pthread_mutex_unlock(&ops.lock);
    uint64_t one = 1;
    ssize_t n = write(ops.evfd, &one, sizeof(one));
    (void)n;
    return 0;
}

static int tprun_pmix_next_event(tprun_pmix_event_t *ev)
{
    uint64_t v;
    ssize_t n = read(ops.evfd, &v, sizeof(v));
    (void)n;
    pthread_mutex_lock(&ops.lock);
    queued_t *q = ops.head;
    if (q != NULL) {
        ops.head = q->next;
        if (ops.head == NULL) ops.tail = NULL;
    }
    pthread_mutex_unlock(&ops.lock);
    if (q == NULL) return 0;
    *ev = q->ev;
    free(q);
    return 1;
}

tprun_pmix_event_t *tprun_pmix_take_events(void (*on_abort)(void *ctx, tprun_pmix_event_t *ev), void *ctx,
                                           size_t *count)
{
    tprun_pmix_event_t *evs = NULL, ev;
    size_t n = 0, cap = 0;
    while (tprun_pmix_next_event(&ev)) {
        if (ev.kind == TPRUN_PMIX_ABORT) {
            on_abort(ctx, &ev);
            tprun_pmix_event_free(&ev);
            continue;
        }
        if (n == cap) {
            tprun_pmix_event_t *g = realloc(evs, sizeof(*g) * (cap = cap ? cap * 2 : 8));
            if (g == NULL) {
                tp_log(TP_LOG_ERROR, "pmix", "out of memory taking the PMIx server's events");
                tprun_pmix_event_free(&ev);
                break;
            }
            evs = g;
        }
        evs[n++] = ev;
    }
    *count = n;
    return evs;
}

int tprun_pmix_event_fd(void) { return ops.pollfd; }

void tprun_pmix_timer_arm(double seconds)
{
    struct itimerspec t = {{0, 0}, {0, 0}};
    if (seconds > 0) {
        t.it_value.tv_sec = (time_t)seconds;
        t.it_value.tv_nsec = (long)((seconds - (double)t.it_value.tv_sec) * 1e9);
        if (t.it_value.tv_sec == 0 && t.it_value.tv_nsec == 0) t.it_value.tv_nsec = 1;
    }
    timerfd_settime(ops.timerfd, 0, &t, NULL);
}

int tprun_pmix_timer_fired(void)
{
    uint64_t v;
    return ops.timerfd >= 0 && read(ops.timerfd, &v, sizeof(v)) == (ssize_t)sizeof(v);
}

/* ---- Upcalls: they run on PMIx's progress thread, post an event and keep the callback for the answer. ---- */

static pmix_status_t on_abort(const pmix_proc_t *proc, void *server_object, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object, (void)procs, (void)nprocs, (void)cbfunc, (void)cbdata;
    tprun_pmix_event_t ev = {.kind = TPRUN_PMIX_ABORT, .rank = (int)proc->rank, .status = status};
    snprintf(ev.msg, sizeof(ev.msg), "%s", msg != NULL ? msg : "");
    post(&ev);
    return PMIX_OPERATION_SUCCEEDED; /* the caller's PMIx_Abort returns; tprun ends the job */
}

static int cmp_rank(const void *a, const void *b)
{
    pmix_rank_t x = *(const pmix_rank_t *)a, y = *(const pmix_rank_t *)b;
    return x < y ? -1 : x > y;
}

/* The fence's participants as every host names them: "*", or its ranks ascending without repeats. */
static char *fence_sig(const pmix_proc_t procs[], size_t nprocs, pmix_status_t *why)
{
    *why = PMIX_ERR_NOT_SUPPORTED;
    pmix_rank_t *r = malloc(sizeof(*r) * (nprocs + 1));
    if (r == NULL) return NULL;
    size_t n = 0;
    int all = nprocs == 0;
    for (size_t i = 0; i < nprocs; i++) {
        if (!PMIX_CHECK_NSPACE(procs[i].nspace, tprun_pmix_srv.nspace)) {
            tp_log(TP_LOG_ERROR, "pmix", "fence over namespace %s: only %s is served here", procs[i].nspace,
                   tprun_pmix_srv.nspace);
            free(r);
            return NULL;
        }
        if (procs[i].rank == PMIX_RANK_WILDCARD) all = 1;
        else if (procs[i].rank < (pmix_rank_t)tprun_pmix_srv.world_size) r[n++] = procs[i].rank;
        else {
            tp_log(TP_LOG_ERROR, "pmix", "fence over rank %u: not a rank of this %d-rank job", procs[i].rank,
                   tprun_pmix_srv.world_size);
            free(r);
            return NULL;
        }
    }
    *why = PMIX_ERR_NOMEM;
    char *s = malloc(all ? 2 : n * 11 + 1);
    if (s != NULL && all) strcpy(s, "*");
    if (s != NULL && !all) {
        qsort(r, n, sizeof(*r), cmp_rank);
        size_t o = 0;
        for (size_t i = 0; i < n; i++)
            if (i == 0 || r[i] != r[i - 1]) o += (size_t)sprintf(s + o, "%s%u", o ? "," : "", r[i]);
    }
    free(r);
    return s;
}

static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                              char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    pmix_status_t why;
    tprun_pmix_event_t ev = {.kind = TPRUN_PMIX_FENCE, .rank = -1};
    if ((ev.sig = fence_sig(procs, nprocs, &why)) == NULL) return why;
    /* Once a fence is handed to the host, libpmix no longer times it out: the hub does, from PMIX_TIMEOUT. */
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT) && info[i].value.type == PMIX_INT && info[i].value.data.integer > 0)
            ev.timeout_s = info[i].value.data.integer;
    waiting_t *w = calloc(1, sizeof(*w));
    if (ndata > 0 && (ev.data = malloc(ndata)) != NULL) memcpy(ev.data, data, ndata), ev.len = ndata;
    if (w == NULL || (ndata > 0 && ev.data == NULL) || (w->sig = strdup(ev.sig)) == NULL) {
        free(w);
        tprun_pmix_event_free(&ev);
        return PMIX_ERR_NOMEM;
    }
    w->cbfunc = cbfunc, w->cbdata = cbdata;
    pthread_mutex_lock(&ops.lock);
    sig_count_t *c = ops.counts;
    while (c != NULL && strcmp(c->sig, ev.sig) != 0) c = c->next;
    if (c == NULL && (c = calloc(1, sizeof(*c))) != NULL && (c->sig = strdup(ev.sig)) != NULL) {
        c->next = ops.counts;
        ops.counts = c;
    }
    if (c == NULL || c->sig == NULL) {
        pthread_mutex_unlock(&ops.lock);
        if (c != NULL) free(c);
        free(w->sig);
        free(w);
        tprun_pmix_event_free(&ev);
        return PMIX_ERR_NOMEM;
    }
    w->seq = ev.seq = c->next_seq++;
    w->next = ops.fences;
    ops.fences = w;
    pthread_mutex_unlock(&ops.lock);
    tp_log(TP_LOG_DEBUG, "pmix", "fence_nb over %s (#%u): %zu bytes collected here", ev.sig, ev.seq, ndata);
    return post(&ev) == 0 ? PMIX_SUCCESS : PMIX_ERR_NOMEM;
}

/* A rank's data that this host does not hold: the loop asks the rank's host. */
static pmix_status_t on_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                               pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)info, (void)ninfo;
    if (!PMIX_CHECK_NSPACE(proc->nspace, tprun_pmix_srv.nspace) || proc->rank >= (pmix_rank_t)tprun_pmix_srv.world_size)
        return PMIX_ERR_NOT_FOUND;
    waiting_t *w = calloc(1, sizeof(*w));
    if (w == NULL) return PMIX_ERR_NOMEM;
    w->cbfunc = cbfunc, w->cbdata = cbdata;
    pthread_mutex_lock(&ops.lock);
    w->id = ops.next_want++;
    w->next = ops.wants;
    ops.wants = w;
    pthread_mutex_unlock(&ops.lock);
    tprun_pmix_event_t ev = {.kind = TPRUN_PMIX_DMODEX_WANT, .rank = (int)proc->rank, .id = w->id};
    return post(&ev) == 0 ? PMIX_SUCCESS : PMIX_ERR_NOMEM;
}

pmix_server_module_t tprun_pmix_module = {.abort = on_abort, .fence_nb = on_fence, .direct_modex = on_dmodex};

/* ---- Answers from the loop ---- */

/* Takes the waiting upcall that matches (sig, seq) or id out of list; NULL when there is none. */
static waiting_t *take(waiting_t **list, const char *sig, unsigned seq, unsigned id)
{
    pthread_mutex_lock(&ops.lock);
    waiting_t *found = NULL;
    for (waiting_t **p = list; *p != NULL; p = &(*p)->next)
        if (sig != NULL ? (*p)->seq == seq && strcmp((*p)->sig, sig) == 0 : (*p)->id == id) {
            found = *p;
            *p = found->next;
            break;
        }
    pthread_mutex_unlock(&ops.lock);
    return found;
}

/* PMIx frees nothing it is handed: the copy is released when it says it is done with it. */
static void release_copy(void *cbdata) { free(cbdata); }

static void answer(waiting_t *w, pmix_status_t st, const unsigned char *data, size_t len)
{
    char *copy = len > 0 ? malloc(len) : NULL;
    if (len > 0 && copy == NULL) st = PMIX_ERR_NOMEM, len = 0;
    if (copy != NULL) memcpy(copy, data, len);
    if (w->cbfunc != NULL) w->cbfunc(st, copy, len, w->cbdata, release_copy, copy);
    else free(copy);
    free(w->sig);
    free(w);
}

void tprun_pmix_fence_finish(const char *sig, unsigned seq, int how, const unsigned char *data, size_t len)
{
    waiting_t *w = take(&ops.fences, sig, seq, 0);
    if (w == NULL) {
        tp_log(TP_LOG_WARN, "pmix", "an answer to fence over %.80s (#%u), which no rank here waits on", sig, seq);
        return;
    }
    pmix_status_t st = how == TPRUN_PMIX_FENCE_DONE          ? PMIX_SUCCESS
                       : how == TPRUN_PMIX_FENCE_PEER_FAILED ? PMIX_ERR_PROC_ABORTED
                                                             : PMIX_ERR_TIMEOUT;
    answer(w, st, data, st == PMIX_SUCCESS ? len : 0);
}

void tprun_pmix_dmodex_answer(unsigned id, int found, const unsigned char *data, size_t len)
{
    waiting_t *w = take(&ops.wants, NULL, 0, id);
    if (w != NULL) answer(w, found ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND, data, found ? len : 0);
}

static void fetched(pmix_status_t status, char *data, size_t sz, void *cbdata)
{
    tprun_pmix_event_t ev = {.kind = TPRUN_PMIX_DMODEX_DATA, .id = (unsigned)(uintptr_t)cbdata, .status = status};
    if (status == PMIX_SUCCESS && sz > 0 && (ev.data = malloc(sz)) != NULL) memcpy(ev.data, data, sz), ev.len = sz;
    if (status == PMIX_SUCCESS && sz > 0 && ev.data == NULL) ev.status = PMIX_ERR_NOMEM;
    post(&ev);
}

void tprun_pmix_dmodex_fetch(int rank, unsigned id)
{
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, tprun_pmix_srv.nspace, (pmix_rank_t)rank);
    pmix_status_t rc = PMIx_server_dmodex_request(&proc, fetched, (void *)(uintptr_t)id);
    if (rc != PMIX_SUCCESS) {
        tp_log(TP_LOG_WARN, "pmix", "PMIx_server_dmodex_request(rank %d) failed: %s", rank, PMIx_Error_string(rc));
        fetched(rc, NULL, 0, (void *)(uintptr_t)id);
    }
}

static void notified(pmix_status_t status, void *cbdata)
{
    (void)status, (void)cbdata;
    tprun_pmix_event_t ev = {.kind = TPRUN_PMIX_NOTIFIED, .rank = -1};
    post(&ev);
}

tp_status_t tprun_pmix_notify_aborted(int rank)
{
    if (!tprun_pmix_srv.up) return TP_ERR_INVALID;
    pmix_proc_t affected, source;
    bool yes = true;
    PMIX_LOAD_PROCID(&affected, tprun_pmix_srv.nspace, (pmix_rank_t)rank);
    PMIX_LOAD_PROCID(&source, tprun_pmix_srv.nspace, (pmix_rank_t)rank);
    /* The info must live until PMIx calls back: it is the server's, not the stack's. */
    PMIX_INFO_LOAD(&ops.notify_info[0], PMIX_EVENT_AFFECTED_PROC, &affected, PMIX_PROC);
    PMIX_INFO_LOAD(&ops.notify_info[1], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
    pmix_status_t rc =
        PMIx_Notify_event(PMIX_ERR_PROC_ABORTED, &source, PMIX_RANGE_NAMESPACE, ops.notify_info, 2, notified, NULL);
    if (rc == PMIX_SUCCESS) return TP_OK;
    if (rc == PMIX_OPERATION_SUCCEEDED) {
        notified(PMIX_SUCCESS, NULL);
        return TP_OK;
    }
    tp_log(TP_LOG_WARN, "pmix", "PMIx_Notify_event(PROC-ABORTED, rank %d) failed: %s", rank, PMIx_Error_string(rc));
    return TP_ERR_SYSTEM;
}

#else /* built without the PMIx headers: tprun_pmix_load refused --pmix before any of these could be reached */

int tprun_pmix_event_fd(void) { return -1; }
tprun_pmix_event_t *tprun_pmix_take_events(void (*on_abort)(void *ctx, tprun_pmix_event_t *ev), void *ctx,
                                           size_t *count)
{
    (void)on_abort, (void)ctx;
    *count = 0;
    return NULL;
}
void tprun_pmix_event_free(tprun_pmix_event_t *ev) { (void)ev; }
void tprun_pmix_fence_finish(const char *sig, unsigned seq, int how, const unsigned char *data, size_t len)
{
    (void)sig, (void)seq, (void)how, (void)data, (void)len;
}
void tprun_pmix_dmodex_answer(unsigned id, int found, const unsigned char *data, size_t len)
{
    (void)id, (void)found, (void)data, (void)len;
}
void tprun_pmix_dmodex_fetch(int rank, unsigned id) { (void)rank, (void)id; }
tp_status_t tprun_pmix_notify_aborted(int rank) { return (void)rank, TP_ERR_UNSUPPORTED; }
void tprun_pmix_timer_arm(double seconds) { (void)seconds; }
int tprun_pmix_timer_fired(void) { return 0; }

#endif
