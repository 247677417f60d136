/* tprun_exit.c: decoding wait statuses and naming the cause of a rank's end. */
#include "tprun_exit.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime_log.h"
#include "core/state.h"

const char *tprun_signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev != NULL) snprintf(buf, len, "SIG%s", abbrev);
    else snprintf(buf, len, "SIG%d", sig);
    return buf;
}

int tprun_status_failed(int wstatus)
{
    return WIFSIGNALED(wstatus) || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0);
}

int tprun_status_code(int wstatus)
{
    if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
    if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
    return 1;
}

void tprun_status_describe(int wstatus, int oom, char *buf, size_t len)
{
    char name[32];
    if (WIFEXITED(wstatus)) {
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        tprun_signal_name(sig, name, sizeof(name));
        if (oom && sig == SIGKILL) snprintf(buf, len, "killed by the kernel's OOM killer (%s)", name);
        else snprintf(buf, len, "killed by signal %d (%s)", sig, name);
    } else {
        snprintf(buf, len, "ended with wait status 0x%x", (unsigned)wstatus);
    }
}

int tprun_status_is_consequence(int wstatus)
{
    return !tprun_status_failed(wstatus) || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == TP_EXIT_PEER_FAILED);
}

const char *tprun_loop_rank_host(const tprun_loop_t *L, int r)
{
    return L->plan->rank_host != NULL && L->plan->remote ? L->plan->hosts[L->plan->rank_host[r]].name : L->job->host;
}

void tprun_loop_rank_cause(const tprun_loop_t *L, int r, char *buf, size_t len)
{
    const tprun_rank_t *rank = &L->job->ranks[r];
    int st = rank->wstatus;
    char cause[160], sig[32];
    tprun_status_describe(st, rank->oom, cause, sizeof(cause));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && rank->exec_errno < 0)
        snprintf(buf, len, "%s: cannot enter --wdir %s: %s", cause, L->plan->wdir, strerror(-rank->exec_errno));
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && rank->exec_errno != 0)
        snprintf(buf, len, "%s: execve %s: %s", cause, L->plan->program_path, strerror(rank->exec_errno));
    else if (WIFEXITED(st) && WEXITSTATUS(st) == TP_EXIT_PEER_FAILED)
        snprintf(buf, len, "%s (TP_EXIT_PEER_FAILED: libtp ended it because a peer failed)", cause);
    else if (WIFEXITED(st) && WEXITSTATUS(st) == TP_EXIT_FAILED)
        snprintf(buf, len, "%s (TP_EXIT_FAILED: libtp ended it on its own failure)", cause);
    else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && rank->ended_by == SIGKILL)
        snprintf(buf, len, "%s, sent by tprun %s", cause,
                 L->signals_seen > 1 ? "at the second signal" : "after the grace period");
    else if (WIFSIGNALED(st) && WTERMSIG(st) == rank->ended_by && L->signals_seen == 0)
        snprintf(buf, len, "%s, sent by tprun to end the job", cause);
    else if (WIFSIGNALED(st) && WTERMSIG(st) == rank->ended_by)
        snprintf(buf, len, "%s, forwarded by tprun (it received %s)", cause,
                 tprun_signal_name(rank->ended_by, sig, sizeof(sig)));
    else snprintf(buf, len, "%s", cause);
}

long long tprun_read_counter(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) return -1;
    char line[256];
    size_t klen = strlen(key);
    long long v = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
            v = strtoll(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static char oom_path[512];
static const char *oom_key = "oom_kill";

/* The cgroup path tprun runs in, from /proc/self/cgroup: v2's "0::/p" or v1's "N:memory:/p". */
static int own_cgroup(const char *controller, char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL) return -1;
    char line[1024];
    int found = -1;
    size_t clen = strlen(controller);
    while (found != 0 && fgets(line, sizeof(line), f) != NULL) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL) continue;
        line[strcspn(line, "\n")] = '\0';
        if ((size_t)(c2 - c1 - 1) == clen && strncmp(c1 + 1, controller, clen) == 0) {
            snprintf(out, len, "%s", c2 + 1);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

static int try_source(const char *path)
{
    if (tprun_read_counter(path, oom_key) < 0) return 0;
    snprintf(oom_path, sizeof(oom_path), "%s", path);
    return 1;
}

void tprun_oom_init(void)
{
    char cg[400], path[512];
    oom_path[0] = '\0';
    if (own_cgroup("", cg, sizeof(cg)) == 0) {
        snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.events", strcmp(cg, "/") ? cg : "");
        if (try_source(path)) return;
    }
    if (own_cgroup("memory", cg, sizeof(cg)) == 0) {
        snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.oom_control", strcmp(cg, "/") ? cg : "");
        if (try_source(path)) return;
        /* Inside a container the own cgroup is often mounted as the hierarchy's root. */
        if (try_source("/sys/fs/cgroup/memory/memory.oom_control")) return;
    }
    try_source("/proc/vmstat");
}

long long tprun_oom_count(void) { return oom_path[0] ? tprun_read_counter(oom_path, oom_key) : -1; }

const char *tprun_oom_source(void) { return oom_path; }

static void (*say_observer)(const char *msg, size_t len);

void tprun_say_observe(void (*fn)(const char *msg, size_t len)) { say_observer = fn; }

void tprun_say(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(line, sizeof(line), "tprun: ");
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    n += m;
    if ((size_t)n > sizeof(line) - 2) n = (int)sizeof(line) - 2;
    if (say_observer != NULL) say_observer(line + 7, (size_t)n - 7);
    line[n++] = '\n';
    tp_log_write_all(STDERR_FILENO, line, (size_t)n);
}
