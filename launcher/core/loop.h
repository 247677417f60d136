/* core/loop.h: tprun's one event loop: fds, timers, child processes and signals, each a registration with a
 * callback and its argument. Every part of the launcher (main, backends, the agent, PMIx) waits here. */
#ifndef TPRUN_CORE_LOOP_H
#define TPRUN_CORE_LOOP_H

#include <signal.h>
#include <sys/types.h>

typedef struct tprun_evloop tprun_evloop_t;
/* A registration; epoll's data points at it, so a handle is all its owner keeps. */
typedef struct tprun_ev tprun_ev_t;

typedef void (*tprun_ev_fd_fn)(void *arg, unsigned revents);
typedef void (*tprun_ev_timer_fn)(void *arg);
/* wstatus as waitpid gives it; with TPRUN_EV_CHILD_STOPS also stops (WIFSTOPPED) and continues (WIFCONTINUED). */
typedef void (*tprun_ev_child_fn)(void *arg, pid_t pid, int wstatus);
typedef void (*tprun_ev_signal_fn)(void *arg, int sig);
typedef void (*tprun_ev_reaped_fn)(void *arg);

/* fd flag: dispatched before the other fds ready at the same wake-up (an abort before the exit it causes). */
#define TPRUN_EV_FIRST 1u
/* child flags: its process group is killed while its zombie still holds the group id; stops are reported. */
#define TPRUN_EV_CHILD_KILL_GROUP 1u
#define TPRUN_EV_CHILD_STOPS      2u

/* Monotonic seconds: every deadline in the launcher is on this clock. */
double tprun_now_s(void);

/* Blocks SIGCHLD (children are reaped from a signalfd); NULL with errno set when epoll or signalfd fails. */
tprun_evloop_t *tprun_evloop_create(void);
/* Frees every registration, restores the signal mask it started with. */
void tprun_evloop_free(tprun_evloop_t *loop);
/* The signal mask from before the loop blocked anything: what a child must restore before exec. */
const sigset_t *tprun_evloop_child_mask(const tprun_evloop_t *loop);
/*
 * One turn: fires the timers that are due, then waits up to max_wait_ms (-1: until an event or the next timer; not
 * at all when a timer fired, so the caller re-checks its condition) and dispatches. -1 on an epoll failure.
 */
int tprun_evloop_run_once(tprun_evloop_t *loop, int max_wait_ms);
/* Ends the dispatch under way: the rest of this wake-up's events wait for the next turn. */
void tprun_evloop_stop(tprun_evloop_t *loop);
/* Reaps every child that has ended (and reports stops), now: one pass, then the reaped hook. */
void tprun_evloop_reap(tprun_evloop_t *loop);
/* Called after each reaping pass that reported something (the launcher orders causes before consequences). */
void tprun_evloop_on_reaped(tprun_evloop_t *loop, tprun_ev_reaped_fn fn, void *arg);

tprun_ev_t *tprun_ev_fd(tprun_evloop_t *loop, int fd, unsigned events, unsigned flags, tprun_ev_fd_fn fn, void *arg);
/* New epoll events for a registered fd (0 keeps it registered but silent). Returns 0, or -1 with errno. */
int tprun_ev_fd_set(tprun_ev_t *ev, unsigned events);
/* A timer at deadline (tprun_now_s() seconds; 0 disarms it); it fires once and stays registered, disarmed. */
tprun_ev_t *tprun_ev_timer(tprun_evloop_t *loop, double deadline, tprun_ev_timer_fn fn, void *arg);
void tprun_ev_timer_set(tprun_ev_t *ev, double deadline);
double tprun_ev_timer_deadline(const tprun_ev_t *ev);
/* A child's end (its registration is removed after the callback); flags TPRUN_EV_CHILD_*. */
tprun_ev_t *tprun_ev_child(tprun_evloop_t *loop, pid_t pid, unsigned flags, tprun_ev_child_fn fn, void *arg);
/* Waits (blocking) for that child's end and runs its callback; ev is gone afterwards. */
void tprun_ev_child_wait(tprun_ev_t *ev);
/* A signal, blocked and read from the loop's signalfd (SIGCHLD is the loop's own). */
tprun_ev_t *tprun_ev_signal(tprun_evloop_t *loop, int sig, tprun_ev_signal_fn fn, void *arg);
/* Removes a registration (safe inside any callback, its own included); NULL is ignored. */
void tprun_ev_remove(tprun_ev_t *ev);

#endif
