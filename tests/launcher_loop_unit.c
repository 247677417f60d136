/* launcher_loop_unit.c: unit tests of tprun's event loop (launcher/core/loop.c): fds, timers in deadline order,
 * children reaped with their wait status, signals, and registrations removed while events are dispatched. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/loop.h"

#include "unit_check.h"

typedef struct seen {
    int calls;
    int order[8];
    int norder;
    pid_t pid;
    int wstatus;
    int sig;
    tprun_ev_t *victim; /* removed by the callback */
    tprun_ev_t *self;
} seen_t;

/* Runs turns until cond or about 5 s of turns: a loop that never delivers fails the check, it does not hang. */
#define RUN_UNTIL(loop, cond)                                                                                          \
    do {                                                                                                               \
        for (int turn_ = 0; turn_ < 500 && !(cond); turn_++) tprun_evloop_run_once(loop, 10);                          \
    } while (0)

static void on_read(void *arg, unsigned revents)
{
    seen_t *s = arg;
    s->calls++;
    CHECK(revents & EPOLLIN, "readable");
    char c;
    if (read(s->sig, &c, 1) == 1) s->order[s->norder++ % 8] = c;
    tprun_ev_remove(s->victim);
    if (s->self != NULL) tprun_ev_remove(s->self);
}

static void test_fd(tprun_evloop_t *loop)
{
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    seen_t s = {.sig = p[0]};
    tprun_ev_t *ev = tprun_ev_fd(loop, p[0], EPOLLIN, 0, on_read, &s);
    CHECK(ev != NULL, "register a pipe");
    tprun_evloop_run_once(loop, 0);
    CHECK(s.calls == 0, "nothing to read yet: %d calls", s.calls);
    CHECK(write(p[1], "ab", 2) == 2, "write");
    RUN_UNTIL(loop, s.norder == 2);
    CHECK(s.norder == 2 && s.order[0] == 'a' && s.order[1] == 'b', "read %d bytes", s.norder);
    CHECK(tprun_ev_fd_set(ev, 0) == 0, "silence it");
    CHECK(write(p[1], "c", 1) == 1, "write");
    tprun_evloop_run_once(loop, 20);
    CHECK(s.norder == 2, "silenced fd dispatched");
    CHECK(tprun_ev_fd_set(ev, EPOLLIN) == 0, "watch it again");
    RUN_UNTIL(loop, s.norder == 3);
    CHECK(s.norder == 3 && s.order[2] == 'c', "after watching again");
    tprun_ev_remove(ev);
    close(p[0]);
    close(p[1]);
}

static void on_timer(void *arg)
{
    seen_t *s = ((seen_t **)arg)[0];
    s->order[s->norder++ % 8] = (int)(long)((void **)arg)[1];
}

static void test_timers(tprun_evloop_t *loop)
{
    seen_t s = {0};
    void *args[4][2];
    double now = tprun_now_s();
    const double at[4] = {0.030, 0.010, 0.020, 0.010};
    tprun_ev_t *ev[4];
    for (int i = 0; i < 4; i++) {
        args[i][0] = &s, args[i][1] = (void *)(long)i;
        ev[i] = tprun_ev_timer(loop, now + at[i], on_timer, args[i]);
    }
    tprun_ev_timer_set(ev[3], 0); /* disarmed: never fires */
    RUN_UNTIL(loop, s.norder == 3);
    tprun_evloop_run_once(loop, 40);
    CHECK(s.norder == 3, "%d timers fired, 3 armed", s.norder);
    CHECK(s.order[0] == 1 && s.order[1] == 2 && s.order[2] == 0, "order %d %d %d", s.order[0], s.order[1], s.order[2]);
    CHECK(tprun_ev_timer_deadline(ev[0]) == 0, "a fired timer is disarmed");
    /* Due at once: fired earliest first within one turn. */
    s.norder = 0;
    tprun_ev_timer_set(ev[2], now + 0.002);
    tprun_ev_timer_set(ev[0], now + 0.001);
    tprun_ev_timer_set(ev[1], now + 0.003);
    usleep(5000);
    tprun_evloop_run_once(loop, 0);
    CHECK(s.norder == 3 && s.order[0] == 0 && s.order[1] == 2 && s.order[2] == 1, "same turn: %d fired", s.norder);
    for (int i = 0; i < 4; i++) tprun_ev_remove(ev[i]);
}

static void on_child(void *arg, pid_t pid, int wstatus)
{
    seen_t *s = arg;
    s->calls++;
    s->pid = pid;
    s->wstatus = wstatus;
    if (WIFSTOPPED(wstatus)) s->order[s->norder++ % 8] = 'S';
    else if (WIFCONTINUED(wstatus)) s->order[s->norder++ % 8] = 'C';
    else s->order[s->norder++ % 8] = 'X';
}

static void on_reaped(void *arg) { ((seen_t *)arg)->sig++; }

static void test_children(tprun_evloop_t *loop)
{
    seen_t s = {0}, passes = {0};
    tprun_evloop_on_reaped(loop, on_reaped, &passes);
    pid_t pid = fork();
    if (pid == 0) _exit(3);
    CHECK(tprun_ev_child(loop, pid, 0, on_child, &s) != NULL, "register a child");
    RUN_UNTIL(loop, s.calls == 1);
    CHECK(s.calls == 1 && s.pid == pid && WIFEXITED(s.wstatus) && WEXITSTATUS(s.wstatus) == 3, "exit 3: %#x",
          s.wstatus);
    CHECK(passes.sig >= 1, "the reaped hook ran");
    CHECK(waitpid(pid, NULL, WNOHANG) < 0, "the child is reaped");

    /* Stops and continues reported; the group killed with it (a grandchild in its group ends too). */
    memset(&s, 0, sizeof(s));
    int gp[2];
    CHECK(pipe(gp) == 0, "pipe");
    pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (fork() == 0) { /* the grandchild holds the pipe's write end until it is killed */
            close(gp[0]);
            pause();
            _exit(0);
        }
        close(gp[1]);
        pause();
        _exit(0);
    }
    close(gp[1]);
    setpgid(pid, pid);
    tprun_ev_t *ev = tprun_ev_child(loop, pid, TPRUN_EV_CHILD_STOPS | TPRUN_EV_CHILD_KILL_GROUP, on_child, &s);
    kill(pid, SIGSTOP);
    RUN_UNTIL(loop, s.norder == 1);
    kill(pid, SIGCONT);
    RUN_UNTIL(loop, s.norder == 2);
    CHECK(s.norder == 2 && s.order[0] == 'S' && s.order[1] == 'C', "stop then continue: %d reports", s.norder);
    kill(pid, SIGTERM);
    RUN_UNTIL(loop, s.norder == 3);
    CHECK(s.norder == 3 && WIFSIGNALED(s.wstatus) && WTERMSIG(s.wstatus) == SIGTERM, "ended by SIGTERM: %#x",
          s.wstatus);
    char c;
    struct pollfd pf = {gp[0], POLLIN, 0};
    poll(&pf, 1, 5000); /* the grandchild's end closes the pipe */
    fcntl(gp[0], F_SETFL, O_NONBLOCK);
    CHECK(read(gp[0], &c, 1) == 0, "the grandchild was killed with the group");
    kill(-pid, SIGKILL); /* when it was not, it does not outlive the test */
    close(gp[0]);
    (void)ev;

    /* Waiting for one child blocks until its end and runs its callback. */
    memset(&s, 0, sizeof(s));
    pid = fork();
    if (pid == 0) _exit(5);
    tprun_ev_child_wait(tprun_ev_child(loop, pid, 0, on_child, &s));
    CHECK(s.calls == 1 && WEXITSTATUS(s.wstatus) == 5, "waited: %d calls", s.calls);
    tprun_evloop_on_reaped(loop, NULL, NULL);
}

static void on_signal(void *arg, int sig)
{
    seen_t *s = arg;
    s->calls++;
    s->sig = sig;
}

static void test_signal(tprun_evloop_t *loop)
{
    seen_t s = {0};
    tprun_ev_t *ev = tprun_ev_signal(loop, SIGUSR1, on_signal, &s);
    CHECK(ev != NULL, "register SIGUSR1");
    kill(getpid(), SIGUSR1);
    RUN_UNTIL(loop, s.calls == 1);
    CHECK(s.calls == 1 && s.sig == SIGUSR1, "SIGUSR1 delivered: %d calls", s.calls);
    tprun_ev_remove(ev);
    kill(getpid(), SIGUSR1); /* blocked and dropped, never the default action */
    tprun_evloop_run_once(loop, 20);
    CHECK(s.calls == 1, "a removed signal was delivered");
}

static void test_removal(tprun_evloop_t *loop)
{
    int p[2], q[2];
    CHECK(pipe(p) == 0 && pipe(q) == 0, "pipes");
    seen_t a = {.sig = p[0]}, b = {.sig = q[0]};
    tprun_ev_t *eva = tprun_ev_fd(loop, p[0], EPOLLIN, 0, on_read, &a);
    tprun_ev_t *evb = tprun_ev_fd(loop, q[0], EPOLLIN, 0, on_read, &b);
    a.victim = evb, b.victim = eva; /* whichever runs first removes the other */
    a.self = eva, b.self = evb;
    CHECK(write(p[1], "x", 1) == 1 && write(q[1], "y", 1) == 1, "write");
    RUN_UNTIL(loop, a.calls + b.calls > 0);
    tprun_evloop_run_once(loop, 20);
    CHECK(a.calls + b.calls == 1, "both ran (%d, %d): a removed registration was dispatched", a.calls, b.calls);
    /* The first-flagged fd runs before the others of the same wake-up. */
    seen_t c = {.sig = p[0]}, d = {.sig = q[0]};
    tprun_ev_t *evd = tprun_ev_fd(loop, q[0], EPOLLIN, 0, on_read, &d);
    tprun_ev_t *evc = tprun_ev_fd(loop, p[0], EPOLLIN, TPRUN_EV_FIRST, on_read, &c);
    c.victim = evd;
    CHECK(write(p[1], "x", 1) == 1 && write(q[1], "y", 1) == 1, "write");
    usleep(1000);
    RUN_UNTIL(loop, c.calls > 0);
    CHECK(c.calls == 1 && d.calls == 0, "first-flagged fd did not run first (%d, %d)", c.calls, d.calls);
    tprun_ev_remove(evc);
    close(p[0]), close(p[1]), close(q[0]), close(q[1]);
}

int main(void)
{
    tprun_evloop_t *loop = tprun_evloop_create();
    if (loop == NULL) {
        perror("tprun_evloop_create");
        return 1;
    }
    test_fd(loop);
    test_timers(loop);
    test_children(loop);
    test_signal(loop);
    test_removal(loop);
    tprun_evloop_free(loop);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("launcher_loop_unit: fds, timers, children, signals, removal: all checks passed\n");
    return failures ? 1 : 0;
}
