/* ssh/ssh.h: the ssh backend: one agent per remote host (tprun --agent), reached over ssh's stdin/stdout. */
#ifndef TPRUN_SSH_H
#define TPRUN_SSH_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/backend.h"
#include "core/state.h"
#include "link/link.h"
#include "tprun_wire.h"

/* ssh connections being set up at once: a bounded fan-out, not one host after another. */
#define TPRUN_SSH_FANOUT 32

enum { AGENT_IDLE, AGENT_CONNECTING, AGENT_READY, AGENT_RUNNING, AGENT_GONE };

typedef struct tprun_agent {
    int host; /* index in plan->hosts */
    const char *name;
    int state;
    pid_t pid;         /* the ssh process, in its own process group; 0 once reaped */
    int wstatus;       /* ssh's wait status, once reaped */
    tprun_link_t link; /* to the agent, over ssh's stdin: the plan, then commands */
    struct tprun_agents *all;
    tprun_ev_t *child_ev; /* the ssh process's end */
    tprun_ev_t *out_ev;   /* its channel */
    tprun_ev_t *err_ev;   /* its stderr */
    tprun_stream_t out;   /* ssh's stdout: the agent's messages, one per line */
    tprun_stream_t err;   /* ssh's stderr: ssh's own messages and the agent's */
    double deadline;      /* the launch fails if the agent has not answered by then */
    char ready_ip[256];   /* where this host is reached, best first ("ip,ip"): rank 0's bootstrap on its host */
    char client_ip[64];   /* tprun's end of the ssh connection, as this host sees it */
    int ready_port;       /* rank 0's bootstrap listener, on the host of rank 0 */
    int ready_master;     /* MASTER_PORT, reserved on the host of rank 0 (0 without the torch variables) */
    char error[1024];     /* why it failed: its "error" message, else ssh's last line on stderr */
    int running;          /* its ranks that have not been reported ended */
    int parent;           /* the agent that started this one (its messages come through it), or -1: tprun did */
    int depth;            /* ssh hops from tprun: 1 for the agents tprun starts */
    int subtree;          /* agents below this one */
} tprun_agent_t;

/* Bytes of tprun's stdin sent to rank 0's agent and not yet written into rank 0's stdin: reading pauses beyond. */
#define TPRUN_STDIN_WINDOW (256u * 1024u)

/* The command that starts the agent on host: a NULL-ended argv in one malloc'd block (one free()). */
typedef char **(*tprun_agent_argv_fn)(const tprun_plan_t *plan, const char *exe, const char *host);
/* ssh [TP_SSH's words] -T -o BatchMode=yes -o ConnectTimeout=N HOST "exec 'EXE' --agent". */
char **tprun_ssh_agent_argv(const tprun_plan_t *plan, const char *exe, const char *host);

typedef struct tprun_agents {
    tprun_loop_t *L;
    tprun_agent_argv_fn agent_argv; /* how an agent is started: ssh's command (another backend may swap it) */
    tprun_agent_t *a;
    int n;
    int ndirect;    /* agents tprun starts itself: a[0..ndirect) (every agent without a tree) */
    int fanout;     /* the tree's fan-out (TP_LAUNCH_FANOUT), 0 without a tree */
    char exe[4096]; /* tprun's own path: the agent is the same file on the remote host */
    /* tprun's stdin, forwarded to rank 0 on another host ("i DATA" lines, acknowledged with "ia N") */
    int stdin_agent;         /* rank 0's agent, or -1 */
    int stdin_state;         /* 0: not forwarding; 1: reading; 2: done (end of input sent, or rank 0 stopped reading) */
    int stdin_pollable;      /* fd 0 is in the loop's epoll; else (a regular file) it is read whenever there is room */
    tprun_ev_t *stdin_ev;    /* fd 0's registration (its events are 0 while the window is full) */
    tprun_ev_t *stdin_timer; /* a file on stdin: read whenever the window has room */
    size_t stdin_unacked;
    int ready, failed;        /* during the launch: agents ready, and the first that failed (or -1) */
    tprun_ev_t *cutoff_timer; /* after the SIGKILL: agents still silent then are cut off */
} tprun_agents_t;

/* Places the plan's ranks: which are started here and which by which agent; fills the job's per-host fields. */
tp_status_t tprun_agents_setup(tprun_agents_t *A, tprun_loop_t *L, tprun_job_t *job, const tprun_plan_t *plan);
/*
 * Starts every agent (at most TPRUN_SSH_FANOUT connecting at once), sends each its plan, waits until all are
 * ready (TP_SSH_TIMEOUT), then tells each rank 0's bootstrap address and registers their channels with the loop.
 * On a failure it names the host and ssh's message, ends every agent and returns tprun's exit status (non-zero).
 */
int tprun_agents_launch(tprun_loop_t *L);
/* Routes a running agent's messages to their owners (ranks' starts and ends, stdin, PMIx). */
void tprun_agent_routes(tprun_agent_t *a);
/* A running agent's channel is readable: its messages are handled, its end counts its ranks lost. */
void tprun_agent_on_channel(void *agent, unsigned revents);
/* Sends a signal to every running agent's ranks. */
void tprun_agents_signal(tprun_agents_t *A, int sig);
/* An agent's ssh ended (the loop reaped it). */
void tprun_agent_reaped(void *agent, pid_t pid, int wstatus);
/* Ends the ssh connection of every agent that still has ranks it has not reported: their host is unreachable. */
void tprun_agents_cut_off(tprun_loop_t *L);
/* After the job: waits for every agent to end (ending those that do not within the grace) and frees them. */
void tprun_agents_finish(tprun_loop_t *L);

/* After the launch: starts forwarding tprun's stdin to rank 0's agent (when rank 0 runs on another host). */
void tprun_agents_stdin_start(tprun_loop_t *L);

extern const tprun_backend_ops_t tprun_ssh_backend;

/* Starts argv (ssh, or srun) in its own process group, dying with this process; fds: its stdin's write end, its
 * stdout's and stderr's read ends, all non-blocking. Returns its pid, or -1 with errno. */
pid_t tprun_ssh_spawn(char **argv, const sigset_t *child_mask, const char *what, int fds[3]);

/* ---- ssh/tree.c: agents started as a tree ---- */

/* Default TP_LAUNCH_FANOUT: as many agents as tprun has ssh connections setting up at once, so that a flat
 * launch never waits for a second round of its own connections. */
#define TPRUN_LAUNCH_FANOUT 32
/*
 * Beyond fanout agents, tprun starts the first fanout and agent i's children are agents fanout*(i+1)+j (a heap):
 * each agent starts its children over the same ssh command and relays their messages as "c AGENT LINE".
 */
void tprun_tree_shape(tprun_agents_t *A, int fanout);
/* The plan lines that make agent ai start its children ("ssh", "sshto", "exe", "child", "via"). */
int tprun_tree_plan_lines(const tprun_loop_t *L, int ai, int (*add)(void *ctx, const char *key, const char *value),
                          void *ctx);
/* The plans of agent ai's subtree, each line wrapped "c AGENT ...", appended to buf (realloc'd); -1 on no memory. */
int tprun_tree_wrapped_plans(const tprun_loop_t *L, int ai, char *(*plan)(const tprun_loop_t *L, int ai, size_t *len),
                             char **buf, size_t *len);
/* The agent tprun started whose channel carries a's messages (a itself without a parent). */
tprun_agent_t *tprun_tree_top(tprun_agent_t *a);
/* "c AGENT LINE" from top's channel: the agent below top that sent it and where its line starts, or NULL. */
tprun_agent_t *tprun_tree_unwrap(tprun_agent_t *top, char *line, size_t len, char **rest, size_t *rest_len);
/* Calls fn for every agent below a, parents before children. */
void tprun_tree_each_below(tprun_agent_t *a, void (*fn)(tprun_agent_t *d, void *arg), void *arg);
/* The agents below a tprun just started wait for their answer from now on, their parents' hops included. */
void tprun_tree_started(tprun_agent_t *a, double now, double ssh_timeout_s);

/* Shared by ssh/launch.c and ssh/run.c: queue a line on an agent's link, close its input (it then ends its ranks),
 * and end every agent within the grace after a failure. */
void tprun_agent_send(tprun_agent_t *a, const char *line);
void tprun_agent_close_input(tprun_agent_t *a);
void tprun_agents_abort(tprun_loop_t *L, double grace);

#endif
