/* fake_ptrace.c: an LD_PRELOAD shim that plays the kernels shm must cope with (tests/shm_ptrace.sh). FAKE_NO_PIDFD=1:
 * pidfd_open and pidfd_getfd fail with ENOSYS (Linux before 5.3, or valgrind 3.19). FAKE_YAMA_SCOPE=N: reading
 * /proc/sys/kernel/yama/ptrace_scope gives N, and prctl(PR_SET_PTRACER), written to stderr, succeeds as Yama's would
 * (FAKE_PTRACER_FAILS=1: EPERM). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define YAMA "/proc/sys/kernel/yama/ptrace_scope"

long syscall(long n, ...)
{
    va_list ap;
    va_start(ap, n);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    const char *no = getenv("FAKE_NO_PIDFD");
    if (no != NULL && strcmp(no, "1") == 0 && (n == 434 || n == 438)) { /* pidfd_open, pidfd_getfd */
        errno = ENOSYS;
        return -1;
    }
    static long (*real)(long, ...);
    if (real == NULL) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* The faked scope as a file's text: a memfd holding "N\n". */
static int yama_fd(const char *path)
{
    const char *scope = getenv("FAKE_YAMA_SCOPE");
    if (scope == NULL || strcmp(path, YAMA) != 0) return -2;
    int fd = memfd_create("fake-yama", MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (dprintf(fd, "%s\n", scope) < 0 || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int open_with(const char *name, const char *path, int flags, va_list ap)
{
    int fd = yama_fd(path);
    if (fd != -2) return fd;
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, name);
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = open_with("open", path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = open_with("open64", path, flags, ap);
    va_end(ap);
    return fd;
}

int prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    unsigned long a[4];
    for (int i = 0; i < 4; i++) a[i] = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_PTRACER && getenv("FAKE_YAMA_SCOPE") != NULL) { /* Yama answers it; without Yama: EINVAL */
        fprintf(stderr, "fake_ptrace: pid %d: prctl(PR_SET_PTRACER, %s)\n", (int)getpid(),
                a[0] == PR_SET_PTRACER_ANY ? "PR_SET_PTRACER_ANY" : "a pid");
        const char *fails = getenv("FAKE_PTRACER_FAILS");
        if (fails == NULL || strcmp(fails, "1") != 0) return 0;
        errno = EPERM;
        return -1;
    }
    static int (*real)(int, ...);
    if (real == NULL) real = (int (*)(int, ...))dlsym(RTLD_NEXT, "prctl");
    return real(option, a[0], a[1], a[2], a[3]);
}
