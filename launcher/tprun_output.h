/* tprun_output.h: forwarding ranks' output as whole lines, and tprun's stdin to rank 0. */
#ifndef TPRUN_OUTPUT_H
#define TPRUN_OUTPUT_H

#include <stddef.h>
#include <sys/types.h>

/* Longest output line forwarded whole: a longer one goes in pieces of this many bytes, each but the last ending
 * in TPRUN_LINE_CONTINUED, so tprun's memory stays bounded whatever a rank prints. */
#define TPRUN_LINE_MAX       65536
#define TPRUN_LINE_CONTINUED "[tprun: line continues]"
/* Longest message line on a channel (an agent's, srun's stderr): PMIx data travels there; a longer one is dropped. */
#define TPRUN_CHANNEL_LINE_MAX (64 << 20)

/* One stream of one rank: the read end of its pipe and the bytes of a line not yet complete. */
typedef struct tprun_stream {
    int fd;     /* read end (non-blocking), -1 once closed */
    int out_fd; /* where its lines go: 1 or 2 */
    char *buf;
    size_t len;     /* bytes held */
    size_t scanned; /* bytes of buf known to hold no newline */
    size_t cap;
    int skipping; /* a channel's line over TPRUN_CHANNEL_LINE_MAX: its bytes are dropped up to its newline */
    /* When set, each whole line (newline included) goes here instead of to out_fd: an agent's channel. */
    void (*on_line)(void *ctx, char *line, size_t len);
    void *ctx;
} tprun_stream_t;

/* Line prefix for --tag-output ("[3] "), or an empty prefix; kept with the stream's owner. */
typedef struct tprun_prefix {
    char text[24];
    size_t len;
} tprun_prefix_t;

void tprun_stream_init(tprun_stream_t *s, int fd, int out_fd);

/*
 * Reads once from the stream (what the pipe holds, up to a chunk) and writes every complete line, each with
 * its prefix in one write. Returns 2 after reading, 1 when the pipe was empty, 0 at EOF or a read error
 * (then the caller closes the stream).
 */
int tprun_stream_pump(tprun_stream_t *s, const tprun_prefix_t *prefix);

/* Writes a last partial line (with a newline added), closes the fd and frees the buffer. */
void tprun_stream_close(tprun_stream_t *s, const tprun_prefix_t *prefix);

/* Reads until the pipe is empty or at EOF, writes everything (a partial line with a newline) and closes. */
void tprun_stream_drain(tprun_stream_t *s, const tprun_prefix_t *prefix);

void tprun_stream_free(tprun_stream_t *s);

/* Writes prefix and data to fd in one writev (continuing after a short write); waits out EAGAIN. */
void tprun_write_line(int fd, const tprun_prefix_t *prefix, const char *data, size_t len);

/* tprun's stdin, read when it is a terminal and written to a pipe whose other end is rank 0's stdin. */
typedef struct tprun_stdin {
    int in_fd;   /* 0 while forwarding, -1 when done */
    int pipe_fd; /* write end (non-blocking), -1 when closed */
    char buf[65536];
    size_t len; /* bytes read but not yet written */
    size_t off;
} tprun_stdin_t;

/*
 * Reads once when in_ready and writes what it holds without blocking. Returns 1 to wait for in_fd readable,
 * 2 for pipe_fd writable, 0 when forwarding is over (then the caller calls tprun_stdin_close).
 */
int tprun_stdin_pump(tprun_stdin_t *s, int in_ready);
void tprun_stdin_close(tprun_stdin_t *s);

#endif
