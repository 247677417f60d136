/* tprun_summary.c: --json-summary FILE: the job and each rank's end as one JSON object, written atomically. */
#include "tprun_summary.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tprun_exit.h"

/* Lines tprun said during the job, kept for "cause" and "messages". */
#define SUMMARY_MAX_MESSAGES 64

static char *said[SUMMARY_MAX_MESSAGES];
static size_t num_said;
static double job_start;

static void keep_message(const char *msg, size_t len)
{
    if (num_said < SUMMARY_MAX_MESSAGES && (said[num_said] = strndup(msg, len)) != NULL) num_said++;
}

static void forget_messages(void)
{
    for (size_t i = 0; i < num_said; i++) free(said[i]);
    num_said = 0;
}

/* The temporary name FILE is written under before the rename: FILE.tmp.PID, in FILE's own directory. */
static char *temp_name(const char *path)
{
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (tmp != NULL) snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid());
    return tmp;
}

/* FILE's directory, for messages: "." for a bare name. */
static void dir_of(const char *path, char *out, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) snprintf(out, len, ".");
    else if (slash == path) snprintf(out, len, "/");
    else snprintf(out, len, "%.*s", (int)(slash - path), path);
}

tp_status_t tprun_summary_check(const tprun_plan_t *plan, char *err, size_t err_len)
{
    const char *path = plan->json_summary;
    char dir[4096];
    /* rename() would replace an empty directory of that name: refuse any directory. */
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        close(dfd);
        return snprintf(err, err_len, "--json-summary %s: is a directory (give a file name)", path), TP_ERR_INVALID;
    }
    char *tmp = temp_name(path);
    if (tmp == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
    dir_of(path, dir, sizeof(dir));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, err_len, "--json-summary %s: cannot create a file in %s: %s", path, dir, strerror(errno));
        free(tmp);
        return TP_ERR_INVALID;
    }
    close(fd);
    unlink(tmp);
    free(tmp);
    job_start = tprun_wall_s();
    tprun_say_observe(keep_message);
    return TP_OK;
}

/* s as a JSON string: quotes, backslashes and control bytes escaped, invalid UTF-8 as U+FFFD. */
static void json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p != '\0') {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else if (c < 0x80) {
            fputc((int)c, f);
        } else {
            /* A well-formed UTF-8 sequence goes through as it is; anything else is one U+FFFD per byte. */
            size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
            unsigned lo = 0x80, hi = 0xbf;
            if (c == 0xe0) lo = 0xa0; /* overlong */
            if (c == 0xed) hi = 0x9f; /* surrogates */
            if (c == 0xf0) lo = 0x90; /* overlong */
            if (c == 0xf4) hi = 0x8f; /* beyond U+10FFFF */
            size_t k = 1;
            while (n > 0 && k < n && p[k] >= (k == 1 ? lo : 0x80) && p[k] <= (k == 1 ? hi : 0xbf)) k++;
            if (n > 0 && k == n) {
                fwrite(p, 1, n, f);
                p += n;
                continue;
            }
            fputs("\\ufffd", f);
        }
        p++;
    }
    fputc('"', f);
}

/* ISO 8601 UTC with microseconds, as a JSON string; null when the time is not known. */
static void json_time(FILE *f, double t)
{
    if (t <= 0) {
        fputs("null", f);
        return;
    }
    time_t sec = (time_t)t;
    long usec = (long)((t - (double)sec) * 1e6);
    if (usec > 999999) usec = 999999;
    struct tm tm;
    char buf[64];
    gmtime_r(&sec, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(f, "\"%s.%06ldZ\"", buf, usec);
}

/* A string, or null when it is NULL or empty. */
static void json_opt_string(FILE *f, const char *s)
{
    if (s != NULL && s[0] != '\0') json_string(f, s);
    else fputs("null", f);
}

static void json_rank(FILE *f, const tprun_loop_t *L, int r)
{
    const tprun_rank_t *rank = &L->job->ranks[r];
    int st = rank->wstatus;
    char cause[400], sig[32];
    int ended = rank->pid > 0 && !rank->running;
    fprintf(f, "    {\"rank\": %d, \"host\": ", r);
    json_string(f, tprun_loop_rank_host(L, r));
    if (rank->pid > 0) fprintf(f, ", \"pid\": %d", (int)rank->pid);
    else fputs(", \"pid\": null", f);
    const char *state = rank->pid <= 0    ? "not started"
                        : rank->running   ? "running"
                        : WIFSIGNALED(st) ? "killed"
                                          : "exited";
    fprintf(f, ", \"state\": \"%s\"", state);
    if (ended && WIFEXITED(st))
        fprintf(f, ", \"exit_code\": %d, \"signal\": null, \"signal_name\": null", WEXITSTATUS(st));
    else if (ended && WIFSIGNALED(st))
        fprintf(f, ", \"exit_code\": null, \"signal\": %d, \"signal_name\": \"%s\"", WTERMSIG(st),
                tprun_signal_name(WTERMSIG(st), sig, sizeof(sig)));
    else fputs(", \"exit_code\": null, \"signal\": null, \"signal_name\": null", f);
    if (ended) fprintf(f, ", \"status\": %d", tprun_status_code(st));
    else fputs(", \"status\": null", f);
    fputs(", \"start_time\": ", f);
    json_time(f, rank->start_wall);
    fputs(", \"end_time\": ", f);
    json_time(f, ended ? rank->end_wall : 0);
    fprintf(f, ", \"ended_by_tprun\": %s, \"tprun_signal\": ", rank->ended_by != 0 ? "true" : "false");
    json_opt_string(f, rank->ended_by != 0 ? tprun_signal_name(rank->ended_by, sig, sizeof(sig)) : NULL);
    fprintf(f, ", \"oom\": %s, \"cause\": ", ended && rank->oom ? "true" : "false");
    if (ended) tprun_loop_rank_cause(L, r, cause, sizeof(cause));
    else snprintf(cause, sizeof(cause), "%s", state);
    json_string(f, cause);
    fputs("}", f);
}

static void json_job(FILE *f, const tprun_loop_t *L, int exit_status)
{
    const tprun_plan_t *plan = L->plan;
    fputs("{\n  \"job_id\": ", f);
    json_opt_string(f, L->job->job_id);
    fprintf(f, ",\n  \"exit_status\": %d,\n  \"program\": ", exit_status);
    json_string(f, plan->program_path);
    fputs(",\n  \"argv\": [", f);
    for (int i = 0; plan->argv[i] != NULL; i++) {
        if (i > 0) fputs(", ", f);
        json_string(f, plan->argv[i]);
    }
    fprintf(f, "],\n  \"np\": %d,\n  \"start_time\": ", plan->np);
    json_time(f, job_start);
    fputs(",\n  \"end_time\": ", f);
    json_time(f, tprun_wall_s());
    if (L->first_failure >= 0) fprintf(f, ",\n  \"first_failure\": %d", L->first_failure);
    else fputs(",\n  \"first_failure\": null", f);
    fprintf(f, ",\n  \"timed_out\": %s,\n  \"launch_failed\": %s,\n  \"cause\": ", L->timed_out ? "true" : "false",
            L->launch_failed || (exit_status == TPRUN_EXIT_LAUNCH && L->first_failure < 0 && !L->timed_out) ? "true"
                                                                                                            : "false");
    json_opt_string(f, exit_status != 0 && num_said > 0 ? said[0] : NULL);
    fputs(",\n  \"messages\": [", f);
    for (size_t i = 0; i < num_said; i++) {
        fputs(i > 0 ? ",\n    " : "\n    ", f);
        json_string(f, said[i]);
    }
    fputs(num_said > 0 ? "\n  ],\n  \"ranks\": [\n" : "],\n  \"ranks\": [\n", f);
    for (int r = 0; r < L->job->np && L->job->ranks != NULL; r++) {
        json_rank(f, L, r);
        fputs(r + 1 < L->job->np ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
}

tp_status_t tprun_summary_write(const tprun_loop_t *L, int exit_status)
{
    const char *path = L->plan->json_summary;
    tprun_say_observe(NULL);
    char *text = NULL, *tmp = temp_name(path);
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL || tmp == NULL) goto err_mem;
    json_job(mem, L, exit_status);
    if (fclose(mem) != 0) goto err_mem;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) goto err_file;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        off += (size_t)n;
    }
    if (off < len) {
        int saved = errno;
        close(fd);
        errno = saved;
        goto err_written;
    }
    if (close(fd) != 0) goto err_written;
    if (rename(tmp, path) != 0) goto err_written;
    free(text);
    free(tmp);
    forget_messages();
    return TP_OK;
err_written:
    tprun_say("--json-summary %s: cannot write %s: %s", path, tmp, strerror(errno));
    unlink(tmp);
    goto err_out;
err_file:
    tprun_say("--json-summary %s: cannot create %s: %s", path, tmp, strerror(errno));
    goto err_out;
err_mem:
    tprun_say("--json-summary %s: out of memory", path);
err_out:
    free(text);
    free(tmp);
    forget_messages();
    return TP_ERR_SYSTEM;
}
