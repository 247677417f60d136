/* tprun_exit.h: how a rank ended (wait status, OOM killer), tprun's exit status and the messages that say so. */
#ifndef TPRUN_EXIT_H
#define TPRUN_EXIT_H

#include <stddef.h>

/* "SIGKILL" for 9, "SIG42" for a signal without a name. */
const char *tprun_signal_name(int sig, char *buf, size_t len);

/* Whether a wait status is a failure: a non-zero exit or death by a signal. */
int tprun_status_failed(int wstatus);

/* tprun's exit status for a rank's wait status: its exit code, or 128+signal. */
int tprun_status_code(int wstatus);

/*
 * Writes why a rank ended: "exited with status 3", "killed by signal 9 (SIGKILL)", or with oom set
 * "killed by the kernel's OOM killer (SIGKILL)".
 */
void tprun_status_describe(int wstatus, int oom, char *buf, size_t len);

/* Whether a rank's end is a consequence, not a cause: success, or libtp's fate path ending a rank whose peer failed
 * (70). Reported causes come first; a consequence waits a moment for its cause (core/job.c). */
int tprun_status_is_consequence(int wstatus);

struct tprun_loop;
/* The host a rank runs on, as the command line named it (this machine's name on a single-host job). */
const char *tprun_loop_rank_host(const struct tprun_loop *L, int r);
/* Why an ended rank ended, as its failure line says: "killed by signal 9 (SIGKILL), sent by tprun ...". */
void tprun_loop_rank_cause(const struct tprun_loop *L, int r, char *buf, size_t len);

/*
 * The kernel's count of OOM kills that would include a rank of this job: the cgroup v2 memory.events
 * oom_kill of tprun's cgroup, else cgroup v1 memory.oom_control oom_kill, else /proc/vmstat oom_kill.
 * tprun_oom_init picks the source once; tprun_oom_count returns -1 when none can be read.
 */
void tprun_oom_init(void);
long long tprun_oom_count(void);
/* Which file tprun_oom_count reads ("" when none). */
const char *tprun_oom_source(void);

/* Reads "key N" from a file of such lines (memory.events, vmstat); -1 when absent or unreadable. */
long long tprun_read_counter(const char *path, const char *key);

/* Writes "tprun: <message>\n" to stderr in one write: the lines a user of tprun reads. */
void tprun_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Calls fn with each later tprun_say message (without "tprun: " and the newline); NULL stops it. */
void tprun_say_observe(void (*fn)(const char *msg, size_t len));

#endif
