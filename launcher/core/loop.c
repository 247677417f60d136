/* core/loop.c: tprun's event loop: one epoll, one signalfd, timers kept in a list, children reaped in one place. */
#include "core/loop.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EV_FD, EV_TIMER, EV_CHILD, EV_SIGNAL };

struct tprun_ev {
    tprun_evloop_t *loop;
    int kind;
    int removed;
    unsigned flags;
    int fd;          /* EV_FD */
    unsigned events; /* EV_FD: what epoll watches now */
    double deadline; /* EV_TIMER: 0 when disarmed */
    pid_t pid;       /* EV_CHILD */
    int sig;         /* EV_SIGNAL */
    union {
        tprun_ev_fd_fn fd;
        tprun_ev_timer_fn timer;
        tprun_ev_child_fn child;
        tprun_ev_signal_fn signal;
    } fn;
    void *arg;
    tprun_ev_t *next;
};

struct tprun_evloop {
    int epfd;
    int sigfd;
    sigset_t watched;    /* what the signalfd reads */
    sigset_t child_mask; /* the mask before the loop blocked anything */
    tprun_ev_t *list;    /* live registrations, newest first */
    tprun_ev_t *garbage; /* removed during a dispatch: freed when no callback can hold them */
    tprun_ev_t *sigev;   /* the signalfd's own registration */
    int depth;           /* callbacks under way */
    int stopped;
    tprun_ev_reaped_fn reaped_fn;
    void *reaped_arg;
};

double tprun_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static tprun_ev_t *ev_new(tprun_evloop_t *loop, int kind, void *arg)
{
    tprun_ev_t *ev = calloc(1, sizeof(*ev));
    if (ev == NULL) return NULL;
    ev->loop = loop;
    ev->kind = kind;
    ev->fd = -1;
    ev->arg = arg;
    ev->next = loop->list;
    loop->list = ev;
    return ev;
}

static void on_sigfd(void *arg, unsigned revents);

tprun_evloop_t *tprun_evloop_create(void)
{
    tprun_evloop_t *loop = calloc(1, sizeof(*loop));
    if (loop == NULL) return NULL;
    sigemptyset(&loop->watched);
    sigaddset(&loop->watched, SIGCHLD);
    sigprocmask(SIG_BLOCK, &loop->watched, &loop->child_mask);
    loop->sigfd = signalfd(-1, &loop->watched, SFD_CLOEXEC | SFD_NONBLOCK);
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->sigfd < 0 || loop->epfd < 0) goto err_fds;
    loop->sigev = tprun_ev_fd(loop, loop->sigfd, EPOLLIN, 0, on_sigfd, loop);
    if (loop->sigev == NULL) goto err_fds;
    return loop;
err_fds:;
    int why = errno;
    if (loop->sigfd >= 0) close(loop->sigfd);
    if (loop->epfd >= 0) close(loop->epfd);
    free(loop);
    errno = why;
    return NULL;
}

static void free_list(tprun_ev_t *ev)
{
    while (ev != NULL) {
        tprun_ev_t *next = ev->next;
        free(ev);
        ev = next;
    }
}

void tprun_evloop_free(tprun_evloop_t *loop)
{
    if (loop == NULL) return;
    free_list(loop->list);
    free_list(loop->garbage);
    close(loop->epfd);
    close(loop->sigfd);
    free(loop);
}

const sigset_t *tprun_evloop_child_mask(const tprun_evloop_t *loop) { return &loop->child_mask; }

void tprun_evloop_on_reaped(tprun_evloop_t *loop, tprun_ev_reaped_fn fn, void *arg)
{
    loop->reaped_fn = fn;
    loop->reaped_arg = arg;
}

void tprun_evloop_stop(tprun_evloop_t *loop) { loop->stopped = 1; }

tprun_ev_t *tprun_ev_fd(tprun_evloop_t *loop, int fd, unsigned events, unsigned flags, tprun_ev_fd_fn fn, void *arg)
{
    tprun_ev_t *ev = ev_new(loop, EV_FD, arg);
    if (ev == NULL) return NULL;
    struct epoll_event e = {.events = events, .data.ptr = ev};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
        int why = errno;
        loop->list = ev->next;
        free(ev);
        errno = why;
        return NULL;
    }
    ev->fd = fd;
    ev->events = events;
    ev->flags = flags;
    ev->fn.fd = fn;
    return ev;
}

int tprun_ev_fd_set(tprun_ev_t *ev, unsigned events)
{
    if (ev->events == events) return 0;
    struct epoll_event e = {.events = events, .data.ptr = ev};
    if (epoll_ctl(ev->loop->epfd, EPOLL_CTL_MOD, ev->fd, &e) != 0) return -1;
    ev->events = events;
    return 0;
}

tprun_ev_t *tprun_ev_timer(tprun_evloop_t *loop, double deadline, tprun_ev_timer_fn fn, void *arg)
{
    tprun_ev_t *ev = ev_new(loop, EV_TIMER, arg);
    if (ev == NULL) return NULL;
    ev->deadline = deadline;
    ev->fn.timer = fn;
    return ev;
}

void tprun_ev_timer_set(tprun_ev_t *ev, double deadline) { ev->deadline = deadline; }

double tprun_ev_timer_deadline(const tprun_ev_t *ev) { return ev->deadline; }

tprun_ev_t *tprun_ev_child(tprun_evloop_t *loop, pid_t pid, unsigned flags, tprun_ev_child_fn fn, void *arg)
{
    tprun_ev_t *ev = ev_new(loop, EV_CHILD, arg);
    if (ev == NULL) return NULL;
    ev->pid = pid;
    ev->flags = flags;
    ev->fn.child = fn;
    return ev;
}

tprun_ev_t *tprun_ev_signal(tprun_evloop_t *loop, int sig, tprun_ev_signal_fn fn, void *arg)
{
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigaddset(&loop->watched, sig);
    if (sigprocmask(SIG_BLOCK, &one, NULL) != 0 || signalfd(loop->sigfd, &loop->watched, 0) < 0) return NULL;
    tprun_ev_t *ev = ev_new(loop, EV_SIGNAL, arg);
    if (ev == NULL) return NULL;
    ev->sig = sig;
    ev->fn.signal = fn;
    return ev;
}

void tprun_ev_remove(tprun_ev_t *ev)
{
    if (ev == NULL || ev->removed) return;
    tprun_evloop_t *loop = ev->loop;
    if (ev->kind == EV_FD) epoll_ctl(loop->epfd, EPOLL_CTL_DEL, ev->fd, NULL);
    if (ev->kind == EV_SIGNAL) { /* the signal stays blocked: one arriving later is read and dropped */
        sigdelset(&loop->watched, ev->sig);
        sigaddset(&loop->watched, SIGCHLD);
        signalfd(loop->sigfd, &loop->watched, 0);
    }
    ev->removed = 1;
    for (tprun_ev_t **p = &loop->list; *p != NULL; p = &(*p)->next)
        if (*p == ev) {
            *p = ev->next;
            break;
        }
    /* An event of this wake-up may still point at it: freed when no dispatch is under way. */
    ev->next = loop->garbage;
    loop->garbage = ev;
}

static tprun_ev_t *find(tprun_evloop_t *loop, int kind, int key)
{
    for (tprun_ev_t *ev = loop->list; ev != NULL; ev = ev->next)
        if (ev->kind == kind && (kind == EV_CHILD ? ev->pid == (pid_t)key : ev->sig == key)) return ev;
    return NULL;
}

static void child_ended(tprun_ev_t *ev, pid_t pid, int wstatus)
{
    tprun_ev_child_fn fn = ev->fn.child;
    void *arg = ev->arg;
    tprun_ev_remove(ev);
    fn(arg, pid, wstatus);
}

void tprun_evloop_reap(tprun_evloop_t *loop)
{
    siginfo_t si;
    int reported = 0;
    loop->depth++;
    for (;;) { /* stops and continues first: a stopped rank is the likely cause when its peers give up on it */
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WSTOPPED | WCONTINUED | WNOHANG) != 0 || si.si_pid == 0) break;
        tprun_ev_t *ev = find(loop, EV_CHILD, si.si_pid);
        if (ev == NULL || !(ev->flags & TPRUN_EV_CHILD_STOPS)) continue;
        ev->fn.child(ev->arg, si.si_pid, si.si_code == CLD_CONTINUED ? 0xffff : (si.si_status << 8) | 0x7f);
        reported = 1;
    }
    for (;;) {
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) break;
        pid_t pid = si.si_pid;
        tprun_ev_t *ev = find(loop, EV_CHILD, pid);
        /* Whatever it started dies with it; its unreaped zombie keeps the group id from being reused. */
        if (ev != NULL && (ev->flags & TPRUN_EV_CHILD_KILL_GROUP)) kill(-pid, SIGKILL);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (ev == NULL) continue;
        child_ended(ev, pid, st);
        reported = 1;
    }
    if (reported && loop->reaped_fn != NULL) loop->reaped_fn(loop->reaped_arg);
    loop->depth--;
}

void tprun_ev_child_wait(tprun_ev_t *ev)
{
    if (ev == NULL || ev->removed) return;
    tprun_evloop_t *loop = ev->loop;
    int st;
    pid_t p;
    loop->depth++;
    if (ev->flags & TPRUN_EV_CHILD_KILL_GROUP) kill(-ev->pid, SIGKILL);
    while ((p = waitpid(ev->pid, &st, 0)) < 0 && errno == EINTR) {
    }
    if (p == ev->pid) child_ended(ev, p, st);
    else tprun_ev_remove(ev); /* reaped elsewhere: nothing left to wait for */
    loop->depth--;
}

/* Signals in the order they came; SIGCHLD reaps at once, and once more after the last. */
static void on_sigfd(void *arg, unsigned revents)
{
    tprun_evloop_t *loop = arg;
    struct signalfd_siginfo si;
    (void)revents;
    while (read(loop->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            tprun_evloop_reap(loop);
            continue;
        }
        tprun_ev_t *ev = find(loop, EV_SIGNAL, sig);
        if (ev != NULL) ev->fn.signal(ev->arg, sig);
    }
    tprun_evloop_reap(loop);
}

static int by_deadline(const void *a, const void *b)
{
    double x = (*(tprun_ev_t *const *)a)->deadline, y = (*(tprun_ev_t *const *)b)->deadline;
    return x < y ? -1 : x > y;
}

/* Fires what is due at now, earliest first; a timer re-armed by a callback waits for the next turn. */
static int fire_timers(tprun_evloop_t *loop, double now, double *next)
{
    size_t n = 0, k = 0;
    *next = 0;
    for (tprun_ev_t *ev = loop->list; ev != NULL; ev = ev->next) {
        if (ev->kind != EV_TIMER || ev->deadline <= 0) continue;
        if (ev->deadline <= now) n++;
        else if (*next == 0 || ev->deadline < *next) *next = ev->deadline;
    }
    if (n == 0) return 0;
    tprun_ev_t **due = malloc(n * sizeof(*due));
    if (due == NULL) return 0;
    for (tprun_ev_t *ev = loop->list; ev != NULL; ev = ev->next)
        if (ev->kind == EV_TIMER && ev->deadline > 0 && ev->deadline <= now) due[k++] = ev;
    qsort(due, n, sizeof(*due), by_deadline);
    for (k = 0; k < n; k++) {
        tprun_ev_t *ev = due[k];
        if (ev->removed || ev->deadline <= 0 || ev->deadline > now) continue;
        ev->deadline = 0;
        ev->fn.timer(ev->arg);
    }
    free(due);
    return 1;
}

static void collect_garbage(tprun_evloop_t *loop)
{
    if (loop->depth > 0) return;
    free_list(loop->garbage);
    loop->garbage = NULL;
}

int tprun_evloop_run_once(tprun_evloop_t *loop, int max_wait_ms)
{
    double now = tprun_now_s(), next;
    loop->stopped = 0;
    loop->depth++;
    int fired = fire_timers(loop, now, &next);
    loop->depth--;
    int wait_ms = fired ? 0 : max_wait_ms; /* after timers, only what is ready already: the caller re-checks */
    if (next > 0 && !fired) {
        int until = (int)ceil((next - now) * 1000.0);
        if (until < 1) until = 1;
        if (wait_ms < 0 || until < wait_ms) wait_ms = until;
    }
    struct epoll_event events[64];
    int n = epoll_wait(loop->epfd, events, 64, wait_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    loop->depth++;
    for (int pass = 0; pass < 2 && !loop->stopped; pass++)
        for (int i = 0; i < n && !loop->stopped; i++) {
            tprun_ev_t *ev = events[i].data.ptr;
            if (ev->removed || ((ev->flags & TPRUN_EV_FIRST) != 0) != (pass == 0)) continue;
            ev->fn.fd(ev->arg, events[i].events);
        }
    loop->depth--;
    collect_garbage(loop);
    return 0;
}
