/* runtime_log.c: levelled, prefixed log records, each written whole. */
#include "runtime_log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tp.h"

static _Atomic int log_level = TP_LOG_WARN;
static _Atomic int log_rank = -1;
static const char *log_program = "tp";
static _Thread_local char last_error[512];

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

int tp_log_level_parse(const char *text)
{
    for (int i = 0; i <= TP_LOG_TRACE; i++)
        if (text != NULL && strcasecmp(text, level_names[i]) == 0) return i;
    return -1;
}

void tp_log_set_level(tp_log_level_t level) { log_level = (int)level; }
void tp_log_set_rank(int rank) { log_rank = rank; }
void tp_log_set_program(const char *name) { log_program = name; }
int tp_log_enabled(tp_log_level_t level) { return (int)level <= log_level; }

const char *tp_last_error(void) { return last_error; }

void tp_log_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        buf += n;
        len -= (size_t)n;
    }
}

static void log_v(tp_log_level_t level, int as_error, const char *subsys, const char *fmt, va_list ap)
{
    if (level == TP_LOG_ERROR || as_error) {
        va_list copy;
        va_copy(copy, ap);
        vsnprintf(last_error, sizeof(last_error), fmt, copy);
        va_end(copy);
    }
    if (!tp_log_enabled(level)) return;
    char line[4096];
    char host[64];
    const char *named = getenv("TP_HOST"); /* the launcher's name: hosts sharing a kernel share gethostname */
    if (named != NULL && named[0] != '\0') snprintf(host, sizeof(host), "%s", named);
    else if (gethostname(host, sizeof(host)) != 0) strcpy(host, "?");
    host[sizeof(host) - 1] = '\0';
    int n;
    int rank = log_rank;
    const char *tag = level == TP_LOG_ERROR ? "error: " : level == TP_LOG_WARN ? "warning: " : "";
    if (rank >= 0)
        n = snprintf(line, sizeof(line), "%s rank %d (%s:%d) %s: %s", log_program, rank, host, (int)getpid(),
                     subsys, tag);
    else
        n = snprintf(line, sizeof(line), "%s (%s:%d) %s: %s", log_program, host, (int)getpid(), subsys, tag);
    if (n < 0) return;
    if ((size_t)n < sizeof(line)) {
        int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        if (m > 0) n += m;
    }
    if ((size_t)n >= sizeof(line) - 1) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    tp_log_write_all(STDERR_FILENO, line, (size_t)n);
}

void tp_log_v(tp_log_level_t level, const char *subsys, const char *fmt, va_list ap)
{
    log_v(level, 0, subsys, fmt, ap);
}

void tp_log_status(tp_log_level_t level, const char *subsys, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(level, 1, subsys, fmt, ap);
    va_end(ap);
}

void tp_log(tp_log_level_t level, const char *subsys, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tp_log_v(level, subsys, fmt, ap);
    va_end(ap);
}

void tp_format_ranks(const int *ranks, size_t n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        size_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) j++;
        int w = j > i ? snprintf(out + used, len - used, "%s%d-%d", i ? "," : "", ranks[i], ranks[j])
                      : snprintf(out + used, len - used, "%s%d", i ? "," : "", ranks[i]);
        if (w < 0) return;
        used += (size_t)w;
        i = j;
    }
    if (used >= len && len > 4) strcpy(out + len - 4, "...");
}

char *tp_quote(const char *in, char *out, size_t out_len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, total = 0;
    if (out_len < 8) return out_len > 0 ? (out[0] = '\0', out) : out;
    for (const char *p = in; *p != '\0'; p++) total += (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f ? 1 : 4;
    /* A value that does not fit keeps room for "..." and the NUL. */
    size_t room = total < out_len ? out_len - 1 : out_len - 4;
    for (; *in != '\0'; in++) {
        unsigned char c = (unsigned char)*in;
        size_t need = c >= 0x20 && c < 0x7f ? 1 : 4;
        if (o + need > room) break;
        if (need == 1) out[o++] = (char)c;
        else out[o++] = '\\', out[o++] = 'x', out[o++] = hex[c >> 4], out[o++] = hex[c & 15];
    }
    strcpy(out + o, *in != '\0' ? "..." : "");
    return out;
}
