/* tprun_output.c: per-rank line buffers (growing as lines need) and the stdin forwarder. */
#include "tprun_output.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime_log.h"

/* Bytes read per wake-up; a longer line grows the buffer over several reads, up to its cap. */
#define TPRUN_READ_CHUNK 65536

void tprun_stream_init(tprun_stream_t *s, int fd, int out_fd)
{
    memset(s, 0, sizeof(*s));
    s->fd = fd;
    s->out_fd = out_fd;
}

/* prefix, data and suffix (may be NULL) to fd in one writev, continuing after a short write. */
static void write_pieces(int fd, const tprun_prefix_t *prefix, const char *data, size_t len, const char *suffix)
{
    struct iovec iov[3] = {{(void *)prefix->text, prefix->len},
                           {(void *)data, len},
                           {(void *)suffix, suffix != NULL ? strlen(suffix) : 0}};
    int first = prefix->len > 0 ? 0 : 1, last = suffix != NULL ? 3 : 2;
    while (first < last) {
        ssize_t n = writev(fd, iov + first, last - first);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, -1);
            continue;
        }
        if (n <= 0) return; /* EPIPE or a closed terminal: the output is lost, the job goes on */
        size_t done = (size_t)n;
        while (first < last && done >= iov[first].iov_len) done -= iov[first++].iov_len;
        if (first < last) {
            iov[first].iov_base = (char *)iov[first].iov_base + done;
            iov[first].iov_len -= done;
        }
    }
}

void tprun_write_line(int fd, const tprun_prefix_t *prefix, const char *data, size_t len)
{
    write_pieces(fd, prefix, data, len, NULL);
}

/* A rank's output lines are cut into pieces; a channel's messages are whole or dropped. */
static size_t line_max(const tprun_stream_t *s) { return s->on_line != NULL ? TPRUN_CHANNEL_LINE_MAX : TPRUN_LINE_MAX; }

/* Writes the complete lines held (a rank's too long ones in marked pieces) and keeps the partial one at the front. */
static void emit_lines(tprun_stream_t *s, const tprun_prefix_t *prefix)
{
    size_t start = 0, max = line_max(s);
    for (;;) {
        char *nl = memchr(s->buf + s->scanned, '\n', s->len - s->scanned);
        size_t end = nl != NULL ? (size_t)(nl - s->buf) + 1 : s->len;
        if (s->skipping) { /* the rest of a message line that was too long */
            s->skipping = nl == NULL;
            start = s->scanned = end;
            if (nl == NULL) break;
            continue;
        }
        if (nl != NULL && end - start - 1 <= max) {
            if (s->on_line != NULL) s->on_line(s->ctx, s->buf + start, end - start);
            else tprun_write_line(s->out_fd, prefix, s->buf + start, end - start);
            start = s->scanned = end;
            continue;
        }
        if (end - start <= max) { /* a partial line that may still end in time */
            s->scanned = end;
            break;
        }
        if (s->on_line == NULL) { /* memory stays bounded: the first max bytes go now, marked as continued */
            write_pieces(s->out_fd, prefix, s->buf + start, max, TPRUN_LINE_CONTINUED "\n");
            start += max;
            s->scanned = start;
            continue;
        }
        tp_log(TP_LOG_WARN, "channel", "a message line over %d bytes was dropped", TPRUN_CHANNEL_LINE_MAX);
        s->skipping = nl == NULL;
        start = s->scanned = end;
        if (nl == NULL) break;
    }
    if (start > 0) {
        memmove(s->buf, s->buf + start, s->len - start);
        s->len -= start;
    }
    s->scanned = s->len;
}

static void emit_partial(tprun_stream_t *s, const tprun_prefix_t *prefix)
{
    if (s->skipping) s->len = 0;
    s->skipping = 0;
    if (s->len == 0) return;
    if (s->len < s->cap) {
        s->buf[s->len++] = '\n';
    } else {
        char *grown = realloc(s->buf, s->cap + 1);
        if (grown != NULL) s->buf = grown, s->cap++, s->buf[s->len++] = '\n';
    }
    if (s->on_line != NULL) s->on_line(s->ctx, s->buf, s->len);
    else tprun_write_line(s->out_fd, prefix, s->buf, s->len);
    s->len = s->scanned = 0;
}

void tprun_stream_close(tprun_stream_t *s, const tprun_prefix_t *prefix)
{
    emit_partial(s, prefix);
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

int tprun_stream_pump(tprun_stream_t *s, const tprun_prefix_t *prefix)
{
    if (s->fd < 0) return 0;
    if (s->cap - s->len < TPRUN_READ_CHUNK) {
        size_t cap = s->cap ? s->cap * 2 : TPRUN_READ_CHUNK;
        while (cap - s->len < TPRUN_READ_CHUNK) cap *= 2;
        char *grown = realloc(s->buf, cap);
        if (grown == NULL) {
            /* No memory for a longer line: write what is held as it is rather than lose it. */
            emit_partial(s, prefix);
            if (s->cap - s->len < TPRUN_READ_CHUNK) return 2;
        } else {
            s->buf = grown;
            s->cap = cap;
        }
    }
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
    if (n <= 0) return 0;
    s->len += (size_t)n;
    emit_lines(s, prefix);
    return 2;
}

void tprun_stream_drain(tprun_stream_t *s, const tprun_prefix_t *prefix)
{
    /* Until EAGAIN: the rank has ended, so whatever still holds the pipe open is not worth waiting for. */
    while (tprun_stream_pump(s, prefix) == 2) {
    }
    tprun_stream_close(s, prefix);
}

void tprun_stream_free(tprun_stream_t *s)
{
    if (s->fd >= 0) close(s->fd);
    free(s->buf);
    memset(s, 0, sizeof(*s));
    s->fd = -1;
}

void tprun_stdin_close(tprun_stdin_t *s)
{
    if (s->pipe_fd >= 0) close(s->pipe_fd);
    s->pipe_fd = -1;
    s->in_fd = -1;
    s->len = s->off = 0;
}

int tprun_stdin_pump(tprun_stdin_t *s, int in_ready)
{
    if (s->pipe_fd < 0) return 0;
    if (s->off == s->len) {
        /* One read per wake-up: the terminal stays blocking (it is shared with the shell), so read only when ready. */
        if (!in_ready || s->in_fd < 0) return 1;
        ssize_t n = read(s->in_fd, s->buf, sizeof(s->buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
        if (n <= 0) return 0; /* end of input (Ctrl-D): rank 0 will see EOF */
        s->len = (size_t)n;
        s->off = 0;
    }
    while (s->off < s->len) {
        ssize_t w = write(s->pipe_fd, s->buf + s->off, s->len - s->off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) return 2;
        if (w < 0) return 0; /* rank 0 closed its stdin or ended */
        s->off += (size_t)w;
    }
    s->off = s->len = 0;
    return 1;
}
