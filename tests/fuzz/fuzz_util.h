/* fuzz_util.h: what every fuzz harness shares: quiet logs, a NUL-terminated copy of the input, a socket feeder. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts with a message on a broken invariant: libFuzzer and the replay both report it as a crash. */
#define FUZZ_ASSERT(cond, what)                                                                                        \
    do {                                                                                                               \
        if (!(cond)) fuzz_fail(__FILE__, __LINE__, what);                                                              \
    } while (0)

void fuzz_fail(const char *file, int line, const char *what) __attribute__((noreturn));
/* Logs below errors stay off (a harness formats them all the same); FUZZ_VERBOSE=1 shows them. */
void fuzz_quiet_logs(void);
/* The input as a malloc'd C string (bytes after a NUL are kept but unseen by string parsers). */
char *fuzz_strdup(const uint8_t *data, size_t size);
/*
 * A connected non-blocking AF_UNIX stream pair: fds[0] is what the code under test reads, fds[1] the peer.
 * Returns 0, or -1 (then the input is skipped).
 */
int fuzz_socketpair(int fds[2]);
/* Writes what fits of data[*off..size) to fd without blocking; after the last byte, shuts down the write side. */
void fuzz_feed(int fd, const uint8_t *data, size_t size, size_t *off);

#endif
