/* agent/agent_tree.h: an agent that starts agents: the part of the launch tree below one host (ssh/tree.c is
 * tprun's side). Its children's messages go up as "c AGENT LINE"; tprun's "c AGENT LINE" come down to them. */
#ifndef TPRUN_AGENT_TREE_H
#define TPRUN_AGENT_TREE_H

#include "core/loop.h"
#include "link/link.h"
#include "tprun_args.h"
#include "tprun_output.h"
#include "tprun_spawn.h"

typedef struct tprun_subagent {
    int id;     /* tprun's index of that agent */
    char *name; /* its host */
    pid_t pid;  /* the ssh process; 0 once reaped */
    int ready;  /* it said "ready": its stderr passes through from then on */
    int open;   /* its channel has not ended */
    tprun_link_t link;
    tprun_stream_t out, err;
    tprun_ev_t *out_ev, *err_ev, *child_ev;
    char last[512]; /* ssh's last line on stderr before "ready": why it failed */
    struct tprun_subtree *tree;
} tprun_subagent_t;

typedef struct tprun_subtree {
    tprun_plan_t ssh; /* the ssh command and its timeout, as tprun's */
    char exe[4096];   /* tprun's path, the same on every host */
    const char *host; /* this host's name, for messages */
    tprun_subagent_t *c;
    int n;
    int *via_id, *via_child; /* agents further down: which child's subtree holds them */
    int nvia;
    int open; /* children whose channel is still open */
    tprun_evloop_t *ev;
    tprun_keeper_t *keeper;
} tprun_subtree_t;

/* A plan line of the tree ("ssh", "sshto", "exe", "child", "via"): 1 taken, 0 not a tree line, -1 bad or no memory. */
int tprun_subtree_plan_line(tprun_subtree_t *T, const char *key, const char *value);
/* Starts an ssh to every child (their plans come from tprun as "c" lines); -1 with err set. */
int tprun_subtree_start(tprun_subtree_t *T, tprun_evloop_t *ev, tprun_keeper_t *keeper, const sigset_t *child_mask,
                        const char *host, char *err, size_t err_len);
/* "c AGENT LINE" from tprun (NUL-terminated, no newline): to that child, or to the child whose subtree holds it. */
int tprun_subtree_route(void *tree, char *msg, size_t len);
/* Closes every child's channel: their agents end their ranks and their own children. */
void tprun_subtree_close(tprun_subtree_t *T);
/* Frees what the plan lines allocated (the children's processes are not touched). */
void tprun_subtree_free(tprun_subtree_t *T);

#endif
