/*
 * launcher_rank.c: a rank for tprun's tests. Each argument is "R:ACTION,ACTION,..." for rank R (TP_RANK) or
 * "*:..." for ranks without their own; the actions run in order:
 *   env          print the rank's view of the tprun contract, one "key=value" per line
 *   exit=N       exit with status N            sig=N        raise signal N (default action)
 *   sleep=MS     sleep                          hang         wait for signals forever
 *   ignterm      ignore SIGTERM                 termok       exit 0 on SIGTERM
 *   child        fork a grandchild (same process group) that sleeps; print "grandchild PID"
 *   pid          print "pid PID"                touch=PATH   create a file
 *   lines=N:LEN  print N lines of LEN bytes, "R:" then one letter per rank, in odd-sized writes
 *   stdin        read stdin to EOF; print "stdin bytes=N path=<what fd 0 is>"
 *   partial      print "no newline" without a newline to stdout and "err line" to stderr
 *   alloc=MB     allocate and touch memory      ign=N        ignore signal N
 *   usr1exit=N   exit with status N on SIGUSR1 (a test's stand-in for libtp's fate path)
 *   refused      print "boot_refused=1" once connecting to TP_BOOT_ADDR is refused (within 5 s), else 0
 *   keeper       print "keeper PID" for tprun's keeper process (a child of tprun named tprun-keeper)
 *   bind         print the GPU and binding variables, then cpus= (Cpus_allowed_list) and mem= (the memory policy:
 *                bind:NODES or default), as the kernel has them
 * With "check-lines NRANKS N LEN" instead, reads tprun's output on stdin and checks every line is whole (a line
 * over 64 KiB in tprun's marked pieces, rejoined).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int my_rank;

/* Read by AddressSanitizer in a --enable-sanitizers build only: the launcher tests time this stand-in rank's start
 * and exit, and a leak scan at each of its thousands of exits would only slow them (tprun keeps its scans). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) exit(99);
        p += w;
        n -= (size_t)w;
    }
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    write_all(1, buf, (size_t)n);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Whether a file (a /proc cmdline) contains text. */
static int file_contains(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    if (f == NULL || text == NULL || text[0] == '\0') {
        if (f) fclose(f);
        return 0;
    }
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    size_t tl = strlen(text);
    for (size_t i = 0; i + tl <= n; i++)
        if (memcmp(buf + i, text, tl) == 0) return 1;
    return 0;
}

static void print_env(void)
{
    static const char *const names[] = {
        "TP_RANK",    "TP_WORLD_SIZE", "TP_LOCAL_RANK",    "TP_LOCAL_WORLD_SIZE", "TP_NODE_RANK",
        "TP_JOB_ID",  "TP_JOB_KEY",    "TP_BOOT_ADDR",     "TP_BOOT_FD",          "RANK",
        "WORLD_SIZE", "LOCAL_RANK",    "LOCAL_WORLD_SIZE", "MASTER_ADDR",         "MASTER_PORT",
        "TEST_X",     "TEST_Y"};
    char out[8192];
    size_t len = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%d %s=%s\n", my_rank, names[i], v ? v : "<unset>");
    }
    /* The bootstrap socket: on rank 0 a listening socket on TP_BOOT_FD bound to TP_BOOT_ADDR's port. */
    const char *bfd = getenv("TP_BOOT_FD");
    const char *addr = getenv("TP_BOOT_ADDR");
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (bfd != NULL) {
        int fd = atoi(bfd), listening = 0;
        socklen_t sl = sizeof(listening);
        struct sockaddr_in sa;
        socklen_t al = sizeof(sa);
        struct stat st;
        int ok = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
                 getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &sl) == 0 && listening &&
                 getsockname(fd, (struct sockaddr *)&sa, &al) == 0 && colon != NULL &&
                 ntohs(sa.sin_port) == atoi(colon + 1) && sa.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%d boot_socket=%s\n", my_rank,
                                ok ? "listening-on-boot-port" : "bad");
    }
    /* Sockets this process holds at all: only rank 0, only the one. */
    int sockets = 0;
    for (int fd = 0; fd < 1024; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) sockets++;
    }
    const char *key = getenv("TP_JOB_KEY");
    char ppath[64];
    snprintf(ppath, sizeof(ppath), "/proc/%d/cmdline", (int)getppid());
    len += (size_t)snprintf(
        out + len, sizeof(out) - len, "%d sockets=%d\n%d key_in_cmdline=%d\n%d own_pgroup=%d\n", my_rank, sockets,
        my_rank, file_contains("/proc/self/cmdline", key) || file_contains(ppath, key), my_rank, getpgrp() == getpid());
    write_all(1, out, len);
}

static void print_lines(const char *spec)
{
    long count = atol(spec), linelen = 0;
    const char *c = strchr(spec, ':');
    if (c != NULL) linelen = atol(c + 1);
    if (linelen < 4) linelen = 4;
    char *line = malloc((size_t)linelen);
    int hdr = snprintf(line, (size_t)linelen, "%d:", my_rank);
    memset(line + hdr, 'a' + my_rank % 26, (size_t)(linelen - hdr - 1));
    line[linelen - 1] = '\n';
    /* Odd-sized writes so that tprun sees lines in pieces and several ranks' pieces at once. */
    size_t chunk = 4093 + (size_t)my_rank * 17;
    for (long i = 0; i < count; i++)
        for (size_t off = 0; off < (size_t)linelen; off += chunk)
            write_all(1, line + off, (size_t)linelen - off < chunk ? (size_t)linelen - off : chunk);
    free(line);
}

/* tprun cuts a line over 64 KiB into pieces, each but the last ending so (docs/USAGE.md, "Output"). */
#define PIECE_LEN 65536
static const char piece_mark[] = "[tprun: line continues]\n";

/* Reads tprun's output and checks each line is one rank's whole line (rejoining marked pieces); counts per rank. */
static int check_lines(int nranks, long count, long linelen)
{
    long *seen = calloc((size_t)nranks, sizeof(long)), *held = calloc((size_t)nranks, sizeof(long));
    char *line = NULL;
    size_t cap = 0, ml = strlen(piece_mark);
    ssize_t n;
    int bad = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        int piece = (size_t)n == PIECE_LEN + ml && memcmp(line + PIECE_LEN, piece_mark, ml) == 0;
        ssize_t body = piece ? PIECE_LEN : n - 1; /* the line's own bytes here, newline aside */
        char *colon = memchr(line, ':', (size_t)(body < 12 ? body : 12));
        /* A line's first piece starts "R:", the next ones with R's letter. */
        int r = colon != NULL ? atoi(line) : line[0] - 'a';
        int ok = r >= 0 && r < nranks && (colon != NULL) == (held[r] == 0);
        for (ssize_t i = colon ? colon - line + 1 : 0; ok && i < body; i++)
            if (line[i] != 'a' + r % 26) ok = 0;
        if (ok && piece) {
            held[r] += body;
            continue;
        }
        if (!ok || held[r] + n != linelen) {
            fprintf(stderr, "check-lines: a mixed or cut line of %zd bytes: %.60s...\n", n, line);
            bad = 1;
        } else {
            seen[r]++;
        }
        if (ok) held[r] = 0;
    }
    for (int r = 0; r < nranks; r++)
        if (seen[r] != count)
            fprintf(stderr, "check-lines: rank %d: %ld whole lines, expected %ld\n", r, seen[r], count), bad = 1;
    free(line);
    free(seen);
    free(held);
    return bad;
}
/* What tprun's binding service gave this rank, and what the kernel says it is bound to. */
static void print_bind(void)
{
    static const char *const names[] = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES",
                                        "ROCR_VISIBLE_DEVICES", "TP_GPU_BUS_ID",     "TP_BIND_CPUS",
                                        "TP_BIND_NUMA",         "TP_BIND_WHY"};
    char out[4096], line[256] = "?";
    size_t len = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%d %s=%s\n", my_rank, names[i], v ? v : "<unset>");
    }
    FILE *f = fopen("/proc/self/status", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL && strncmp(line, "Cpus_allowed_list:", 18) != 0) {
    }
    if (f != NULL) fclose(f);
    char *cpus = line + strspn(line + 18, " \t") + 18;
    cpus[strcspn(cpus, "\n")] = '\0';
    int mode = -1;
    unsigned long mask[16] = {0};
    char mem[256] = "?";
    if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 64, NULL, 0) == 0) {
        size_t m = (size_t)snprintf(mem, sizeof(mem), "%s", mode == 0 ? "default" : mode == 2 ? "bind:" : "other:");
        for (int n = 0; mode != 0 && n < 16 * 64; n++)
            if (mask[n / 64] & (1ul << (n % 64)))
                m += (size_t)snprintf(mem + m, sizeof(mem) - m, "%s%d", mem[m - 1] == ':' ? "" : ",", n);
    }
    len += (size_t)snprintf(out + len, sizeof(out) - len, "%d cpus=%s\n%d mem=%s\n", my_rank, cpus, my_rank, mem);
    write_all(1, out, len);
}

static void on_term(int sig) { _exit(0); }

static int usr1_status;
static void on_usr1(int sig) { _exit(usr1_status); }

static void run_action(const char *a)
{
    if (strcmp(a, "env") == 0) {
        print_env();
    } else if (strcmp(a, "bind") == 0) {
        print_bind();
    } else if (strncmp(a, "exit=", 5) == 0) {
        exit(atoi(a + 5));
    } else if (strncmp(a, "sig=", 4) == 0) {
        int sig = atoi(a + 4);
        signal(sig, SIG_DFL);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        raise(sig);
        exit(98);
    } else if (strncmp(a, "sleep=", 6) == 0) {
        sleep_ms(atol(a + 6));
    } else if (strcmp(a, "hang") == 0) {
        for (;;) pause();
    } else if (strcmp(a, "ignterm") == 0) {
        signal(SIGTERM, SIG_IGN);
    } else if (strncmp(a, "ign=", 4) == 0) {
        signal(atoi(a + 4), SIG_IGN);
    } else if (strcmp(a, "keeper") == 0) {
        /* The keeper names itself right after its fork: retry until it has (or 5 s have passed). */
        int found = 0;
        for (int tries = 0; tries < 100 && !found; tries++) {
            char path[64], list[4096], comm[64];
            snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)getppid(), (int)getppid());
            FILE *f = fopen(path, "r");
            size_t n = f ? fread(list, 1, sizeof(list) - 1, f) : 0;
            if (f) fclose(f);
            list[n] = '\0';
            for (char *save = NULL, *w = strtok_r(list, " \n", &save); w != NULL; w = strtok_r(NULL, " \n", &save)) {
                snprintf(path, sizeof(path), "/proc/%s/comm", w);
                f = fopen(path, "r");
                if (f == NULL) continue;
                if (fgets(comm, sizeof(comm), f) != NULL && strcmp(comm, "tprun-keeper\n") == 0) {
                    say("keeper %s\n", w);
                    found = 1;
                }
                fclose(f);
            }
            if (!found) sleep_ms(50);
        }
    } else if (strcmp(a, "refused") == 0) {
        /* Once rank 0 has ended nobody may hold the listener: not tprun, not the keeper, not another rank. */
        const char *addr = getenv("TP_BOOT_ADDR");
        const char *colon = addr ? strrchr(addr, ':') : NULL;
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(colon ? atoi(colon + 1) : 0),
                                 .sin_addr = {htonl(INADDR_LOOPBACK)}};
        int refused = 0;
        for (int i = 0; i < 100 && !refused; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            refused = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno == ECONNREFUSED;
            close(fd);
            if (!refused) sleep_ms(50);
        }
        say("%d boot_refused=%d\n", my_rank, refused);
    } else if (strncmp(a, "usr1exit=", 9) == 0) {
        usr1_status = atoi(a + 9);
        signal(SIGUSR1, on_usr1);
    } else if (strcmp(a, "termok") == 0) {
        signal(SIGTERM, on_term);
    } else if (strcmp(a, "child") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGTERM, SIG_IGN); /* only the group SIGKILL may end it */
            for (;;) pause();
        }
        say("grandchild %d\n", (int)pid);
    } else if (strcmp(a, "pid") == 0) {
        say("pid %d\n", (int)getpid());
    } else if (strncmp(a, "touch=", 6) == 0) {
        FILE *f = fopen(a + 6, "w");
        if (f) fclose(f);
    } else if (strncmp(a, "lines=", 6) == 0) {
        print_lines(a + 6);
    } else if (strcmp(a, "stdin") == 0) {
        char buf[65536], path[256] = "?";
        long total = 0;
        ssize_t n;
        while ((n = read(0, buf, sizeof(buf))) > 0) total += n;
        ssize_t pl = readlink("/proc/self/fd/0", path, sizeof(path) - 1);
        if (pl > 0) path[pl] = '\0';
        if (strncmp(path, "pipe:", 5) == 0) strcpy(path, "pipe");
        say("%d stdin bytes=%ld path=%s\n", my_rank, total, path);
    } else if (strcmp(a, "partial") == 0) {
        write_all(2, "err line\n", 9);
        write_all(1, "no newline", 10);
    } else if (strncmp(a, "alloc=", 6) == 0) {
        size_t mb = (size_t)atol(a + 6);
        for (size_t i = 0; i < mb; i++) { /* stores through volatile: a compiler may drop memory nothing reads */
            volatile char *p = malloc(1 << 20);
            for (size_t off = 0; p != NULL && off < (1u << 20); off += 4096) p[off] = 1;
        }
    } else {
        fprintf(stderr, "launcher_rank: unknown action \"%s\"\n", a);
        exit(97);
    }
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "check-lines") == 0)
        return check_lines(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
    const char *r = getenv("TP_RANK");
    my_rank = r ? atoi(r) : 0;
    const char *mine = NULL;
    for (int i = 1; i < argc; i++) {
        char *colon = strchr(argv[i], ':');
        if (colon == NULL) continue;
        if (argv[i][0] == '*' && colon == argv[i] + 1 && mine == NULL) mine = colon + 1;
        else if (atoi(argv[i]) == my_rank && argv[i][0] != '*') mine = colon + 1;
    }
    if (mine == NULL) return 0;
    char *list = strdup(mine);
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a != NULL; a = strtok_r(NULL, ",", &save)) run_action(a);
    free(list);
    return 0;
}
