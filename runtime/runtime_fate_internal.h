/* runtime_fate_internal.h: the fate path's state and what its files (API, verdicts, the thread) share. */
#ifndef RUNTIME_FATE_INTERNAL_H
#define RUNTIME_FATE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include "runtime_wire.h"
#include "runtime_world.h"

#define FATE_CALLBACKS_MAX 64
#define FATE_MSG_MAX       TP_FAIL_MSG_MAX
#define FATE_BYE_MAX       (256 * 1024) /* a BYE carries the rank's call counts per comm (tp_coll_stop_table) */
/* Rank 0 sends finalize news this long after it changed, so a clean finalize (every rank at once) sends none. */
#define STOP_RELAY_NS          1000000
#define ENDED_WITHOUT_FINALIZE "it ended without tp_finalize (the process died or exited)"
#define FATE_SLICE_NS          100000    /* the shortest slice the kernel grants */
#define FATE_THREAD_NAME       "tp-fate" /* how a peer on this kernel finds the thread in /proc */
#define FATE_LOCAL_WATCH       4         /* same-kernel ranks watched through pidfds on each side (rank 0: all) */

typedef struct fate_peer {
    int fd;
    int pidfd;        /* the peer's process, when it runs on this kernel: its death is seen without a relay */
    int64_t ended_at; /* its process ended and nothing says why yet: blamed if nothing does in time */
    int bye;          /* it called tp_finalize */
    int servicing;    /* its messages are being read (arbitrate reads them early, never twice at once) */
    int64_t last_rx;
    int live; /* heard since its fate started: TP_HEARTBEAT_TIMEOUT applies, before that (its tp_init) TP_BOOT_TIMEOUT */
    int local;        /* it runs on this kernel: /proc shows whether its silent fate thread waits for a CPU */
    int watched;      /* on this kernel and watched through a pidfd (all of them on rank 0, neighbours elsewhere) */
    pid_t fate_tid;   /* its fate thread, once found in /proc (0: not yet) */
    pid_t wait_tid;   /* the thread whose CPU time wait_cpu counts from, 0 while it is not waiting for a CPU */
    int64_t wait_cpu; /* that thread's CPU time when its silence was first found to be a wait for a CPU */
    tp_msg_reader_t reader;
} fate_peer_t;

typedef struct tp_fate_state {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    struct {
        tp_fate_fn fn;
        void *arg;
    } callbacks[FATE_CALLBACKS_MAX];
    int num_callbacks;
    tp_world_t *world;
    pthread_t thread;
    int running;
    int wake_fd;
    int watch_fd;               /* epoll: the wake fd, every peer's connection and pidfd (registered once) */
    struct epoll_event *events; /* room for all of them: one wait sees every message before any end */
    int events_len;
    int64_t next_scan;            /* when a peer's silence or unexplained end may next be due (INT64_MAX: none) */
    int reported, report_pending; /* a transport or a call reported a failure (the first report is the one taken) */
    int report_rank;
    tp_status_t report_status;
    char report_reason[FATE_MSG_MAX];
    int finalize_requested;
    const char *finalize_table; /* this rank's call counts, sent with its BYE */
    int finished;
    atomic_int quit; /* tp_fate_abandon: the thread ends without a BYE, verdict or not */
    atomic_int dying;
    fate_peer_t *peers;
    int64_t interval_ns, timeout_ns, boot_timeout_ns;
    int64_t test_burn_ns; /* TP_TEST_FATE_BURN: CPU time the thread spends before each heartbeat round */
    int64_t first_hb_at;  /* when tp_fate_start began the first heartbeat round: the thread's rounds follow it */
    int errors_return;    /* TP_ERRORS=return: calls return the failure instead of the process exiting */
    /* the verdict: the job's first failure as rank 0 decided it (under lock; verdict set once) */
    atomic_int verdict;
    int deciding; /* the fate thread is making the verdict */
    tp_failure_t failure;
    tp_status_t failure_status; /* what calls return: TP_ERR_PEER_FAILED, or TP_ERR_DESYNC / TP_ERR_PROTOCOL */
    char failure_host[TP_HOST_MAX];
    char failure_reason[FATE_MSG_MAX];
    pthread_cond_t verdict_cond;
    int suspect; /* a non-zero rank: the rank it reported to rank 0, -1 when none */
    tp_status_t suspect_status;
    char suspect_reason[FATE_MSG_MAX];
    int64_t suspect_until; /* when it stops waiting for rank 0's verdict and decides itself */
    int64_t relay_at;      /* rank 0: when finalize news goes out, 0 when none is due */
    /* TP_LOG_LEVEL=debug: when each stage of ending on a failure ran here (CLOCK_MONOTONIC ns), for benchmarks */
    struct {
        int64_t woke, decided, sent_first, sent_last, quiesced, logged, called;
        const char *via;
    } stage;
} tp_fate_state_t;

extern tp_fate_state_t tp_fate;

/* runtime_fate_verdict.c */
/* Ends this rank (TP_ERRORS=fatal): logs the cause, runs the engine's callbacks, exits with TP_EXIT_PEER_FAILED. */
void tp_fate_die(const tp_failure_t *f);
/* The verdict, made by the fate thread only; from_zero: it is rank 0's, which needs no copy back. */
void tp_fate_decide(int rank, tp_status_t status, const char *reason, int from_zero);
/* What this rank saw: rank 0 decides at once; another rank tells rank 0 and waits for its verdict. */
void tp_fate_suspect(int rank, tp_status_t status, const char *reason, int64_t now);
/* A FAIL message: from rank 0 it is the verdict; at rank 0, another rank's suspicion. */
void tp_fate_on_fail(int from, char *payload, int64_t now);

/* runtime_fate_silence.c */
/* Peer r sent nothing for longer than its limit: 0 with reason filled when it failed (stopped, hung, or never
 * started its fate), else when to look again (its fate thread, on this kernel, is waiting for a CPU). */
int64_t tp_fate_silence(int r, int64_t now, char *reason, size_t len);

/* runtime_fate_thread.c */
/* Reads what peer r sent; returns 1 when this rank's finalize is complete. */
int tp_fate_service_peer(int r, int64_t now);
/* The epoll set of the wake fd and every peer's connection and pidfd, made before the thread starts (N system calls
 * on a busy core), and its release after the thread ended. */
tp_status_t tp_fate_watch_open(tp_world_t *w);
void tp_fate_watch_close(void);
/* The fate thread: watches every peer until the job is over for this rank. */
void *tp_fate_thread_main(void *arg);
/* One heartbeat to every watched peer, from the thread that calls it (tp_fate_start: before tp_init returns). */
void tp_fate_heartbeat_all(void);

#endif
