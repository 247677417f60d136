/* tprun_pmix.h: the PMIx server tprun (and later each host's agent) hosts for the ranks it starts (tprun --pmix). */
#ifndef TPRUN_PMIX_H
#define TPRUN_PMIX_H

#include <stddef.h>

#include "tp.h"

/* epoll id of the server's event fd (events that PMIx's progress thread hands to the loop, and the timer). */
#define ID_PMIX 0xfffffff8u

/* The job as the server describes it to its clients: every host, where each rank runs, and which host this is. */
typedef struct tprun_pmix_job {
    const char *nspace;
    int world_size;
    int num_hosts;
    const char *const *hosts; /* names; a host's index is its PMIX_NODEID */
    const int *rank_host;     /* world_size entries, or NULL when every rank is on host 0 */
    int this_host;            /* the host this server runs on: its ranks are the local clients */
} tprun_pmix_job_t;

/* What PMIx's progress thread hands to the event loop. */
typedef enum { TPRUN_PMIX_ABORT = 1, TPRUN_PMIX_NOTIFIED = 2 } tprun_pmix_kind_t;
typedef struct tprun_pmix_event {
    tprun_pmix_kind_t kind;
    int rank;        /* ABORT: the caller's world rank */
    int status;      /* ABORT: the status it passed */
    char msg[512];   /* ABORT: its message */
} tprun_pmix_event_t;

/* ---- The server: one per process, because libpmix allows one. ---- */

/* dlopens libpmix.so.2 and resolves every symbol; on failure writes why into err and returns an error. */
tp_status_t tprun_pmix_load(char *err, size_t err_len);
/* Makes the server's private temporary directory (before the keeper starts, so the keeper can remove it). */
tp_status_t tprun_pmix_tmpdir_create(void);
/* Starts the PMIx server in the tmpdir and registers the job's namespace and this host's ranks. */
tp_status_t tprun_pmix_server_start(const tprun_pmix_job_t *job);
/* A local rank's environment: base without inherited PMIX_* (PMIX_MCA_* kept) plus what PMIx gives it. */
tp_status_t tprun_pmix_rank_env(int rank, char *const *base, char ***out);
/* The fd to poll for events and the timer (readable when something is pending). */
int tprun_pmix_event_fd(void);
/* Takes the next pending event; 0 when there is none. */
int tprun_pmix_next_event(tprun_pmix_event_t *ev);
/* Tells the namespace's survivors that rank died (PMIX_ERR_PROC_ABORTED); TPRUN_PMIX_NOTIFIED follows. */
tp_status_t tprun_pmix_notify_aborted(int rank);
/* Arms (seconds > 0) or disarms (0) the one-shot timer behind the event fd; tprun_pmix_timer_fired reads it. */
void tprun_pmix_timer_arm(double seconds);
int tprun_pmix_timer_fired(void);
/* Finalizes the server and removes the tmpdir; safe to call more than once and when nothing was started. */
void tprun_pmix_server_stop(void);
/* In the keeper after tprun died: removes the tmpdir tprun could not (no PMIx call; the keeper has no server). */
void tprun_pmix_keeper_cleanup(void);

/* ---- tprun's hooks (tprun_pmix_loop.c): what --pmix changes in a single-host job. ---- */

struct tprun_plan;
struct tprun_loop;
/* Before anything starts: libpmix loads and the tmpdir exists; else says why and returns tprun's exit status. */
int tprun_pmix_prepare(const struct tprun_plan *plan);
/* After tprun_job_prepare: starts the server, gives each rank its PMIx environment, polls the event fd. */
tp_status_t tprun_pmix_start(struct tprun_loop *L);
/* Handles pending events: PMIx_Abort ends the job as its first failure; the notify window's end tears it down. */
void tprun_pmix_on_ready(struct tprun_loop *L);
/* Rank r failed first: notify the survivors and return 1 (the teardown follows the notification), else 0. */
int tprun_pmix_rank_failed(struct tprun_loop *L, int r);
/* Ends the server and removes its tmpdir (every exit path of run_job). */
void tprun_pmix_stop(void);

#endif
