/* tprun_args.h: tprun's command line and hostfile, parsed and checked into a plan before anything starts. */
#ifndef TPRUN_ARGS_H
#define TPRUN_ARGS_H

#include <stddef.h>

#include "tp.h"
#include "tprun_config.h"

/* Exit status of tprun for a command line or environment it refuses (nothing was started). */
#define TPRUN_EXIT_USAGE 2
/* Exit status of tprun when it fails itself after starting (fork, pipe, socket). */
#define TPRUN_EXIT_LAUNCH 125

/* Largest -n accepted: beyond it a single host runs out of pids and fds long before. */
#define TPRUN_MAX_RANKS 65536
/* Longest host name in -H and hostfiles (DNS allows 253; ssh's own limit is above). */
#define TPRUN_HOST_NAME_MAX 255

typedef struct tprun_host {
    char *name;
    int slots;
    int slots_given; /* host:N or slots=N: a hard limit; without it a host takes an even share of -n */
    int local;  /* this machine (started by tprun itself, no agent) */
    int nranks; /* ranks placed here */
    int node;   /* TP_NODE_RANK of its ranks: its index among the hosts that got ranks */
} tprun_host_t;

/* Rank placement over the hosts' slots: fill each host in turn, or deal ranks round-robin. */
enum { TPRUN_MAP_SLOT = 0, TPRUN_MAP_NODE = 1 };

typedef struct tprun_plan {
    int np;              /* number of ranks */
    tprun_host_t *hosts; /* from -H and --hostfile, in order; NULL when neither was given */
    size_t num_hosts;
    long total_slots;
    char **env_set; /* "VAR=value" from -x, for every rank (later ones win) */
    size_t num_env_set;
    int tag_output;
    double timeout_s; /* 0: no timeout */
    double grace_s;   /* SIGTERM to SIGKILL; 0 kills at once */
    int torch_env;
    int want_help;
    int want_version;
    int want_info;
    int map_by;
    int *rank_host; /* np entries: the host index of each rank; NULL without -H/--hostfile */
    int *rank_local; /* np entries: each rank's index among its host's ranks */
    int remote;      /* some rank is on a host that is not this machine: the ssh launcher runs the job */
    int slurm;       /* inside a Slurm allocation: srun starts every host's agent (launcher/slurm) */
    char *ssh;       /* --ssh or TP_SSH: the ssh command, split on blanks */
    double ssh_timeout_s;
    int launch_fanout; /* TP_LAUNCH_FANOUT: agents tprun starts itself before they start the rest as a tree */
    char *wdir;      /* --wdir, else the current directory (remote ranks start there) */
    int report_bindings;
    int bind_to;       /* --bind-to or TP_BIND_TO: TPRUN_BIND_* */
    int gpus_per_rank; /* --gpus-per-rank or TP_GPUS_PER_RANK: 1 (the default), or 0: tprun gives ranks no GPU */
    int pmix;           /* --pmix or TP_PMIX: tprun hosts a PMIx server for its ranks */
    const char *launcher; /* --launcher or TP_LAUNCHER: auto, local or slurm */
    const char *json_summary; /* --json-summary FILE, or NULL (points into the caller's argv) */
    char *program_path; /* the resolved file that each rank executes */
    char **argv;        /* the program and its arguments, as given (points into the caller's argv) */
} tprun_plan_t;

/*
 * Parses argv and checks everything in it: option values, hostfiles, that every host is this machine, that
 * the hosts give enough slots, and that the program is found and executable (PATH is taken from envp, like
 * execvp). Defaults come from TP_TIMEOUT, TP_KILL_GRACE and TP_TORCH_ENV in envp. hostname is this
 * machine's name. On error, writes one line (without "tprun: " and newline) into err, frees what it built
 * and returns TP_ERR_INVALID. Leaves no file, socket or process behind.
 */
tp_status_t tprun_args_parse(int argc, char **argv, char *const *envp, const char *hostname, tprun_plan_t *plan,
                             char *err, size_t err_len);
void tprun_plan_free(tprun_plan_t *plan);

/* Places np ranks on the plan's hosts by plan->map_by; fills rank_host, rank_local and each host's counts. */
tp_status_t tprun_plan_place(tprun_plan_t *plan, char *err, size_t err_len);

/* Whether a host name given on the command line means this machine (localhost, 127.x, hostname or its short name). */
int tprun_host_is_local(const char *name, const char *hostname);

/* Whether name[0..len) is a host name tprun accepts: letters, digits and -._:@, at most TPRUN_HOST_NAME_MAX, the
 * first a letter, a digit or ':' (never read by ssh as an option). */
int tprun_host_name_valid(const char *name, size_t len);

/* Within tprun_args: a positive decimal integer of len characters, digits only, not above max; 0 or -1. */
int tprun_parse_count(const char *text, size_t len, long max, long *out);
/* -H's list (host[:slots],...) and a hostfile ("host [slots=N]" lines, '#' comments) appended to the plan's hosts,
 * then a host named twice merged into its first entry (its slots added up, at most TPRUN_MAX_RANKS). */
tp_status_t tprun_hosts_parse_list(tprun_plan_t *plan, const char *opt, const char *list, char *err, size_t err_len);
tp_status_t tprun_hosts_parse_file(tprun_plan_t *plan, const char *path, char *err, size_t err_len);
tp_status_t tprun_hosts_merge(tprun_plan_t *plan, char *err, size_t err_len);
/* Refuses a plan whose ranks on this machine need more descriptors than RLIMIT_NOFILE allows, after raising the
 * soft limit to the hard one; call after tprun_plan_place. */
tp_status_t tprun_plan_check_fds(const tprun_plan_t *plan, char *err, size_t err_len);

/* Finds a program the way execvp does (a name with a slash as is, else each PATH entry); *out is malloc'd. */
tp_status_t tprun_find_program(const char *name, const char *path_env, char **out, char *err, size_t err_len);

/* Whether name is a variable tprun sets for each rank (TP_RANK, ..., and with torch_env RANK, MASTER_PORT, ...). */
int tprun_env_is_launcher_var(const char *name, size_t len, int torch_env);

/* Writes --help text to fd. */
void tprun_usage(int fd);

#endif
