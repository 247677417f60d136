/* tprun_spawn.h: the job's resources (ids, bootstrap listener, per-rank environments), starting ranks, the keeper. */
#ifndef TPRUN_SPAWN_H
#define TPRUN_SPAWN_H

#include <signal.h>
#include <sys/types.h>

#include "tp.h"
#include "tprun_args.h"
#include "tprun_output.h"

/* The fd number rank 0 finds the bootstrap listener on (TP_BOOT_FD). */
#define TPRUN_BOOT_FD 3

typedef struct tprun_rank {
    int id;         /* its world rank (TP_RANK) */
    int local_rank; /* TP_LOCAL_RANK */
    int agent;      /* -1: started by this process; else the index of the remote agent that runs it */
    int oom;        /* an agent said the kernel's OOM killer ended it */
    pid_t pid;      /* also its process group; 0 before it starts */
    int running;    /* started and not yet reaped */
    int wstatus;    /* once reaped */
    int exec_errno; /* non-zero when execve failed in the child */
    int ended_by;   /* the signal tprun sent it last (SIGTERM, SIGKILL, a forwarded one), or 0 */
    int stopped_by; /* the signal that stopped it (SIGSTOP, SIGTSTP, ...) while it is stopped, else 0 */
    double start_wall, end_wall; /* wall-clock times tprun saw it start and end (--json-summary); 0: not yet */
    tprun_prefix_t prefix;
    tprun_stream_t out, err;
    struct tprun_ev *out_ev, *err_ev, *child_ev; /* its registrations in the event loop (core/loop.h) */
    struct tprun_local *local;                   /* the local backend that started it (local/local.h) */
} tprun_rank_t;

/* A process forked before the ranks that SIGKILLs their process groups when tprun dies without saying "done". */
typedef struct tprun_keeper {
    pid_t pid; /* 0 when not running */
    int fd;    /* write end of its pipe, -1 when closed */
} tprun_keeper_t;

struct tprun_job;
/* What the job's owner (tprun's job module, the agent) runs in a rank's child before exec: the services' hooks
 * (affinity, limits). A vfork child: system calls only. */
typedef void (*tprun_child_exec_fn)(const struct tprun_job *job, int r);

typedef struct tprun_job {
    const tprun_plan_t *plan;
    int np;         /* entries in ranks: the world for tprun, this host's ranks for an agent */
    int world_size; /* TP_WORLD_SIZE */
    int local_size; /* TP_LOCAL_WORLD_SIZE of the ranks this process starts */
    int node_rank;
    int listen;         /* rank 0 is started here: bind its bootstrap listener */
    const char *boot_bind; /* the listener's address: NULL for 127.0.0.1, else an IPv4 address (0.0.0.0: any) */
    char boot_ip[256];  /* rank 0's bootstrap host(s): "ip" or "ip,ip,..." best first (TP_BOOT_ADDR; MASTER_ADDR: the first) */
    int boot_index;     /* index in ranks of the rank that inherits the listener, or -1 */
    int stdin_index;    /* index in ranks of the rank that gets tprun's stdin, or -1 */
    int defer_envs;     /* tprun_job_prepare leaves the environments to tprun_job_build_envs */
    const char *host_var; /* TP_HOST for the ranks, or NULL on a single-host job */
    char host[256];
    char job_id[320];
    char job_key[33];
    int boot_fd; /* the listening socket, until rank 0 has it */
    int boot_port;
    int master_fd;   /* MASTER_PORT's reservation on rank 0's host: bound, not listening, held for the job's life */
    int master_port; /* MASTER_PORT: not the bootstrap's port, so torch's TCPStore in rank 0 can bind it */
    char **envp_mem; /* all ranks' environment arrays, rank r's at envp[r] */
    char ***envp;
    char *env_strings;
    int devnull_fd;
    int stdin_tty; /* tprun's stdin is a terminal (or, for an agent, comes over the channel): forwarded through stdin_pipe */
    int stdin_forwarded; /* an agent: rank 0's stdin comes from tprun over the channel */
    int stdin_pipe[2];
    int exec_pipe[2];    /* children report a failed execve here as {rank, errno} */
    sigset_t child_mask; /* tprun's signal mask at start, restored in each rank */
    int reset_sigpipe;   /* SIGPIPE was not ignored at start: restore its default in each rank */
    tprun_keeper_t keeper;
    tprun_child_exec_fn child_exec; /* set by the owner before the ranks start; NULL: nothing */
    tprun_rank_t *ranks;
} tprun_job_t;

/*
 * Takes the job's resources, in this order: ids and key, the bootstrap listener on 127.0.0.1 port 0 and
 * MASTER_PORT's reservation, every rank's environment (from environ_ plus the plan), /dev/null and the pipes for
 * stdin and exec reports.
 * Logs and returns an error naming what failed; tprun_job_release undoes any part.
 */
tp_status_t tprun_job_prepare(tprun_job_t *job, const tprun_plan_t *plan, char *const *environ_);
/* Builds the environments of the ranks this process starts (agent < 0); once boot_ip and boot_port are known. */
tp_status_t tprun_job_build_envs(tprun_job_t *job, char *const *environ_);
void tprun_job_release(tprun_job_t *job);

/* Forks and execs rank r in its own process group; on success it is running and the keeper knows its group. */
tp_status_t tprun_rank_start(tprun_job_t *job, int r);

/*
 * Waits (briefly) for the local ranks already inside exit() to become reapable: a PMIx server sees a dying rank's
 * socket close before its parent can reap it, and what the server does about it must not overtake that death.
 */
void tprun_wait_exiting(const tprun_job_t *job);
/* Whether a rank of this host is still running and not stopped (it may yet end on its own). */
int tprun_ranks_running(const tprun_job_t *job);

/* Reads pending {rank, errno} exec reports into the ranks. */
void tprun_exec_reports(tprun_job_t *job);

/* Starts the keeper (before any rank); np bounds the groups it tracks. */
/* Wall-clock seconds since the epoch (a rank's start and end for the summary; the loop's deadlines are monotonic). */
double tprun_wall_s(void);

tp_status_t tprun_keeper_start(tprun_keeper_t *k, int np, void (*cleanup)(void));
/* Tells the keeper a rank's process group started ('S') or is gone ('R'). */
void tprun_keeper_tell(tprun_keeper_t *k, char op, pid_t pgid);
/* Says "done" and waits for the keeper to exit (it does at once). */
void tprun_keeper_finish(tprun_keeper_t *k);

#endif
