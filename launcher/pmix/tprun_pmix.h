/* tprun_pmix.h: the PMIx server tprun (and later each host's agent) hosts for the ranks it starts (tprun --pmix). */
#ifndef TPRUN_PMIX_H
#define TPRUN_PMIX_H

#include <stddef.h>

#include "tp.h"

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
typedef enum {
    TPRUN_PMIX_ABORT = 1,   /* a local rank called PMIx_Abort */
    TPRUN_PMIX_NOTIFIED,    /* the death notification went out to the local ranks */
    TPRUN_PMIX_FENCE,       /* every local participant entered a fence: this host's part */
    TPRUN_PMIX_DMODEX_WANT, /* a local rank asks for a rank's data that this host does not hold */
    TPRUN_PMIX_DMODEX_DATA, /* a rank's data that another host asked for (tprun_pmix_dmodex_fetch) */
} tprun_pmix_kind_t;
typedef struct tprun_pmix_event {
    tprun_pmix_kind_t kind;
    int rank;            /* ABORT: the caller; DMODEX_*: whose data */
    int status;          /* ABORT: the status it passed; DMODEX_DATA: 0 when found */
    char msg[512];       /* ABORT: its message */
    char *sig;           /* FENCE: the participants, "*" or ascending ranks (malloc'd) */
    unsigned seq;        /* FENCE: its number among this host's fences over sig */
    double timeout_s;    /* FENCE: PMIX_TIMEOUT of the fence, 0 without */
    unsigned id;         /* DMODEX_WANT: answer with tprun_pmix_dmodex_answer; DMODEX_DATA: the fetch's id */
    unsigned char *data; /* FENCE, DMODEX_DATA: the blob (malloc'd) */
    size_t len;
} tprun_pmix_event_t;

/* How a fence ended, as the hosts tell each other (kept free of PMIx's numbers). */
enum { TPRUN_PMIX_FENCE_DONE = 0, TPRUN_PMIX_FENCE_PEER_FAILED = 1, TPRUN_PMIX_FENCE_TIMED_OUT = 2 };

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
/*
 * Takes every pending event. Aborts go to on_abort at once (they name the failure their exit would); the rest come
 * back in order (malloc'd, *count entries, each freed with tprun_pmix_event_free). The caller reaps the exits already
 * there before handling them: a fence part PMIx sends once a rank died must meet that rank's end.
 */
tprun_pmix_event_t *tprun_pmix_take_events(void (*on_abort)(void *ctx, tprun_pmix_event_t *ev), void *ctx,
                                           size_t *count);
void tprun_pmix_event_free(tprun_pmix_event_t *ev);
/* Completes this host's fence (sig, seq) with one of TPRUN_PMIX_FENCE_* and every host's data. */
void tprun_pmix_fence_finish(const char *sig, unsigned seq, int how, const unsigned char *data, size_t len);
/* Answers DMODEX_WANT id: found (the data) or not. */
void tprun_pmix_dmodex_answer(unsigned id, int found, const unsigned char *data, size_t len);
/* Asks this host's server for rank's data (waiting until the rank committed it); DMODEX_DATA id follows. */
void tprun_pmix_dmodex_fetch(int rank, unsigned id);
/* Tells this host's ranks of the namespace that rank died (PMIX_ERR_PROC_ABORTED); TPRUN_PMIX_NOTIFIED follows. */
tp_status_t tprun_pmix_notify_aborted(int rank);
/* Arms (seconds > 0) or disarms (0) the one-shot timer behind the event fd; tprun_pmix_timer_fired reads it. */
void tprun_pmix_timer_arm(double seconds);
int tprun_pmix_timer_fired(void);
/* Finalizes the server and removes the tmpdir; safe to call more than once and when nothing was started. */
void tprun_pmix_server_stop(void);
/* The namespace of job job_id, the same on every host. */
void tprun_pmix_nspace(const char *job_id, char *out, size_t len);

/* ---- tprun's hooks (tprun_pmix_loop.c): what --pmix adds to a job, on one host or across agents. ---- */

struct tprun_plan;
struct tprun_loop;
/* Before anything starts: libpmix loads and the tmpdir exists; else says why and returns tprun's exit status. */
int tprun_pmix_prepare(const struct tprun_plan *plan);
/* After tprun_job_prepare: starts the server for this host's ranks and polls its event fd. */
tp_status_t tprun_pmix_start(struct tprun_loop *L);
/* The job as every agent's server describes it: host names and each rank's host, comma-separated (malloc'd). */
tp_status_t tprun_pmix_describe(char **hosts, char **map);
/* Handles pending events: fences and data requests are matched across hosts, PMIx_Abort ends the job as its first
 * failure, the notify window's end tears it down. */
void tprun_pmix_on_ready(struct tprun_loop *L);
/* A PMIx message ("p...") from agent ai: 1 when it was one (handled), 0 when it is not. */
int tprun_pmix_agent_line(struct tprun_loop *L, int ai, char *line);
/* Agent ai's channel ended: nothing it owed (a notification, a rank's data) will come. */
void tprun_pmix_agent_gone(struct tprun_loop *L, int ai);
/* Rank r ended: fences over it fail; if it failed, requests for its data are answered "not found". */
void tprun_pmix_rank_ended(struct tprun_loop *L, int r);
/* Rank r failed first: notify the survivors on every host and return 1 (the teardown follows), else 0. */
int tprun_pmix_rank_failed(struct tprun_loop *L, int r);
/* Ends the server and removes its tmpdir (every exit path of run_job). */
void tprun_pmix_stop(void);

#endif
