/* runtime_log.h: the one logging facility; each record is one write() so lines never interleave. */
#ifndef RUNTIME_LOG_H
#define RUNTIME_LOG_H

#include <stdarg.h>
#include <stddef.h>

#include "tp_provider.h"

/* Parses "error".."trace"; -1 when unknown. */
int tp_log_level_parse(const char *text);
/* Sets the threshold (from TP_LOG_LEVEL at init) and the identity printed in each record's prefix. */
void tp_log_set_level(tp_log_level_t level);
void tp_log_set_rank(int rank);
/* Program name used as the prefix's first word ("tp" for libtp, "tprun" for the launcher). */
void tp_log_set_program(const char *name);

void tp_log_v(tp_log_level_t level, const char *subsys, const char *fmt, va_list ap);
/* Like tp_log, and the message becomes this thread's tp_last_error() whatever the level (a status that is not an
 * error, TP_STOPPED, still says why). */
void tp_log_status(tp_log_level_t level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats a sorted rank list compactly for messages: "0-2,5,7-9" ("..." when it does not fit). */
void tp_format_ranks(const int *ranks, size_t n, char *out, size_t len);

/* Room for a value that tp_quote cuts: messages quote untrusted text into a buffer of this size. */
#define TP_QUOTE_LEN 256
/* Copies untrusted text for a one-line message: control and non-ASCII bytes become \xNN, a long value ends in
 * "..."; returns out. */
char *tp_quote(const char *in, char *out, size_t out_len);

/* Writes a whole line to fd with one write() (retrying short writes); used for user-facing output too. */
void tp_log_write_all(int fd, const char *buf, size_t len);

#endif
