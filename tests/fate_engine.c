/*
 * fate_engine: an engine written only against tp.h, the way engines end on errors and stop their serving loops
 * (tests/fate_cause.sh, tests/stop_word.sh), or idle while their fate threads run (tests/fate_starved.sh). Modes by
 * argv; every "engine:" line names the rank it comes from.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <tp.h>

#define LOOP_FLOATS  4096 /* 16 KiB of f32, the size the engine used */
#define REQUEST_INTS 4

static int my_rank = -1;

/* FATE_SLOW_CALLBACK=R:MS: rank R's callback (TP_RANK, so also before tp_init returns) takes MS ms, as an engine's
 * ncclCommAbort can on a busy CPU; every other rank's returns at once. */
static long slow_callback_ms(void)
{
    const char *spec = getenv("FATE_SLOW_CALLBACK"), *me = getenv("TP_RANK"), *colon;
    if (spec == NULL || me == NULL || (colon = strchr(spec, ':')) == NULL || atoi(spec) != atoi(me)) return 0;
    return atol(colon + 1);
}

static void on_failure(const tp_failure_t *f, void *arg)
{
    (void)arg;
    printf("callback: rank %d saw peer %d (%s) fail: %s\n", my_rank, f->rank, f->host, f->reason);
    fflush(stdout);
    long ms = slow_callback_ms();
    struct timespec t = {ms / 1000, ms % 1000 * 1000000};
    while (ms > 0 && nanosleep(&t, &t) != 0) {
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: fate_engine loop [--fail-exit CODE] [--ready FIFO] | straggler [CALLS] | "
                    "serve [REQUESTS] [--no-finalize] | p2p [REQUESTS] | split [REQUESTS] | hold [MS] | "
                    "init [--fail-exit CODE] [--fd-room RANK:FDS]\n");
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The engine's usual end on a failed call: one line naming the status and libtp's message, then exit. */
static void die_on(tp_status_t st, int code)
{
    fprintf(stderr, "engine: rank %d: %s: %s\n", my_rank, tp_status_string(st), tp_last_error());
    exit(code);
}

/* The serving loop's way out: the peers stopped, so this rank leaves too; tp_finalize must complete. */
static void leave_stopped(tp_comm_t *world, tp_comm_t *sub, long served)
{
    printf("engine: rank %d: stopped after %ld requests: %s\n", my_rank, served, tp_last_error());
    fflush(stdout);
    if (sub != NULL && tp_comm_destroy(sub) != TP_OK) die_on(TP_ERR_INVALID, 6);
    tp_status_t st = tp_finalize(world);
    if (st != TP_OK) die_on(st, 6);
    exit(0);
}

static void finalize_or_die(tp_comm_t *world)
{
    tp_status_t st = tp_finalize(world);
    if (st != TP_OK) die_on(st, 6);
}

/* An engine idle between requests for ms milliseconds, then done: the fate thread is all that runs meanwhile. */
static int mode_hold(tp_comm_t *world, long ms)
{
    printf("ready %d\n", my_rank);
    fflush(stdout);
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0) { /* a signal cut it short: the rest */
    }
    finalize_or_die(world);
    printf("engine: rank %d: done\n", my_rank);
    return 0;
}

/* After a failed call under TP_ERRORS=return: what tp_fate_failure says, and that the job stays failed. */
static void check_failed_job(tp_comm_t *world, tp_status_t st, float *buf)
{
    tp_failure_t f;
    if (tp_fate_failure(&f))
        fprintf(stderr, "engine: rank %d: tp_fate_failure: rank %d (host %s, pid %d): %s\n", my_rank, f.rank, f.host,
                (int)f.pid, f.reason);
    else fprintf(stderr, "engine: rank %d: tp_fate_failure: none\n", my_rank);
    tp_status_t again = tp_all_reduce(world, buf, buf, LOOP_FLOATS, TP_F32, TP_SUM, NULL);
    double t0 = now_s();
    tp_status_t fin = tp_finalize(world);
    double took = now_s() - t0;
    if (again != st || fin != st || took > 1.0) {
        fprintf(stderr, "engine: rank %d: after %s: a later call returned %s, tp_finalize %s in %.3f s\n", my_rank,
                tp_status_string(st), tp_status_string(again), tp_status_string(fin), took);
        exit(5);
    }
}

/* Loops on an all_reduce until a call fails; TP_STOPPED is a clean end, anything else ends with fail_exit. */
static int mode_loop(tp_comm_t *world, int fail_exit, const char *ready)
{
    static float buf[LOOP_FLOATS];
    for (long i = 0;; i++) {
        for (int k = 0; k < LOOP_FLOATS; k++) buf[k] = (float)(my_rank + k % 7);
        tp_status_t st = tp_all_reduce(world, buf, buf, LOOP_FLOATS, TP_F32, TP_SUM, NULL);
        if (st == TP_STOPPED) leave_stopped(world, NULL, i);
        if (st != TP_OK) {
            fprintf(stderr, "engine: rank %d: %s: %s\n", my_rank, tp_status_string(st), tp_last_error());
            check_failed_job(world, st, buf);
            return fail_exit;
        }
        if (i > 0 || ready == NULL) continue;
        /* Ready once every rank is inside the loop: the test's signal then lands among calls. */
        printf("ready rank %d pid %d\n", my_rank, (int)getpid());
        fflush(stdout);
        int fd = open(ready, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || dprintf(fd, "ready %d %d\n", my_rank, (int)getpid()) < 0) {
            perror("fate_engine: --ready");
            return 3;
        }
        close(fd);
    }
}

/* Rank 1 makes one all_reduce more than the others, who call tp_finalize: its extra call must stop. */
static int mode_straggler(tp_comm_t *world, long calls)
{
    static float buf[LOOP_FLOATS];
    int n = tp_comm_size(world);
    for (long i = 0; i < calls + (my_rank == 1); i++) {
        for (int k = 0; k < LOOP_FLOATS; k++) buf[k] = (float)(my_rank + 1);
        double t0 = now_s();
        tp_status_t st = tp_all_reduce(world, buf, buf, LOOP_FLOATS, TP_F32, TP_SUM, NULL);
        if (st == TP_STOPPED && i == calls) {
            printf("engine: rank %d: call %ld stopped in %.3f s: %s\n", my_rank, i, now_s() - t0, tp_last_error());
            fflush(stdout);
            finalize_or_die(world);
            return 0;
        }
        if (st != TP_OK) die_on(st, 4);
        if (buf[0] != (float)(n * (n + 1) / 2)) {
            fprintf(stderr, "engine: rank %d: all_reduce %ld gave %g\n", my_rank, i, buf[0]);
            return 5;
        }
    }
    if (my_rank == 1) {
        fprintf(stderr, "engine: rank 1: the extra all_reduce returned TP_OK\n");
        return 5;
    }
    finalize_or_die(world);
    return 0;
}

static void request_fill(int32_t *req, long i)
{
    req[0] = (int32_t)i;
    req[1] = (int32_t)(i * 3);
    req[2] = 7;
    req[3] = (int32_t)-i;
}

static int request_ok(const int32_t *req, long i)
{
    int32_t want[REQUEST_INTS];
    request_fill(want, i);
    return memcmp(req, want, sizeof(want)) == 0;
}

/* Workers wait for requests from the sub-root (broadcast on comm, or recv from rank 0 on world). */
static int serve_worker(tp_comm_t *world, tp_comm_t *comm, int p2p)
{
    int32_t req[REQUEST_INTS];
    for (long served = 0;; served++) {
        memset(req, 0, sizeof(req));
        tp_status_t st = p2p ? tp_recv(world, req, REQUEST_INTS, TP_I32, 0, NULL)
                             : tp_broadcast(comm, req, REQUEST_INTS, TP_I32, 0, NULL);
        if (st == TP_STOPPED) leave_stopped(world, comm != world ? comm : NULL, served);
        if (st != TP_OK) die_on(st, 4);
        if (!request_ok(req, served)) {
            fprintf(stderr, "engine: rank %d: request %ld arrived as %d %d %d %d\n", my_rank, served, req[0], req[1],
                    req[2], req[3]);
            return 5;
        }
    }
}

/* Rank 0 (of world, or of each sub-comm) sends the requests, then stops the job by calling tp_finalize. */
static int serve_root(tp_comm_t *world, tp_comm_t *comm, long requests, int p2p, int finalize)
{
    int32_t req[REQUEST_INTS];
    for (long i = 0; i < requests; i++) {
        request_fill(req, i);
        for (int w = p2p ? 1 : tp_comm_size(comm) - 1; w < tp_comm_size(comm); w++) {
            tp_status_t st = p2p ? tp_send(world, req, REQUEST_INTS, TP_I32, w, NULL)
                                 : tp_broadcast(comm, req, REQUEST_INTS, TP_I32, 0, NULL);
            if (st != TP_OK) die_on(st, 4);
        }
    }
    printf("engine: rank %d: served %ld requests\n", my_rank, requests);
    fflush(stdout);
    if (!finalize) exit(0); /* an engine that forgets tp_finalize: its peers must see a failure */
    if (comm != world && tp_comm_destroy(comm) != TP_OK) die_on(TP_ERR_INVALID, 6);
    finalize_or_die(world);
    return 0;
}

#define FDS_MAX 1024

/* Entries of a /proc/self folder (fd, task) numbered below FDS_MAX, marked in seen when given; with name, only the
 * tasks of that name; -1 when unreadable. */
static int proc_count(const char *dir, const char *name, char *seen)
{
    char path[300], comm[64];
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int id = (int)strtol(e->d_name, NULL, 10);
        if (e->d_name[0] == '.' || id == dirfd(d)) continue;
        if (name != NULL) {
            snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
            FILE *f = fopen(path, "r");
            int same = f != NULL && fgets(comm, sizeof(comm), f) != NULL && strncmp(comm, name, strlen(name)) == 0 &&
                       comm[strlen(name)] == '\n';
            if (f != NULL) fclose(f);
            if (!same) continue;
        }
        if (seen != NULL && id >= 0 && id < FDS_MAX) seen[id] = 1;
        n++;
    }
    closedir(d);
    return n;
}

/* --fd-room RANK:FDS: that rank's tp_init may open only FDS more files (RLIMIT_NOFILE ends below the next free fd
 * number), so that it fails for real where it opens the next one; -1 when the limit cannot be set. */
static int limit_fds(const char *room, const char *rank)
{
    static char open_fds[FDS_MAX];
    int r, n, limit = 0;
    if (room == NULL || sscanf(room, "%d:%d", &r, &n) != 2 || r != atoi(rank)) return 0;
    if (proc_count("/proc/self/fd", NULL, open_fds) < 0) return -1;
    for (int free_fds = 0; limit < FDS_MAX; limit++)
        if (!open_fds[limit] && free_fds++ == n) break;
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return -1;
    lim.rlim_cur = (rlim_t)limit;
    return setrlimit(RLIMIT_NOFILE, &lim);
}

/*
 * An engine whose tp_init may fail (TP_ERRORS=return): once it has, no fate thread and no fd that tp_init opened
 * is left (it may close the one its launcher lent, TP_BOOT_FD), a second tp_init is refused without a crash, and
 * the engine ends with fail_exit. A tp_init that worked loops as mode_loop, or with room (--fd-room) makes one
 * all_reduce and finalizes (every rank's tp_init may then have worked).
 */
static int mode_init(int fail_exit, const char *room)
{
    const char *rank = getenv("TP_RANK") != NULL ? getenv("TP_RANK") : getenv("RANK") ? getenv("RANK") : "?";
    static char before[FDS_MAX], after[FDS_MAX];
    static float buf[LOOP_FLOATS];
    if (limit_fds(room, rank) != 0) {
        perror("fate_engine: --fd-room");
        return 2;
    }
    int fds = proc_count("/proc/self/fd", NULL, before), tasks = proc_count("/proc/self/task", NULL, NULL);
    tp_comm_t *world;
    tp_status_t st = tp_init(NULL, &world);
    if (st == TP_OK) {
        my_rank = tp_comm_rank(world);
        if (room == NULL) return mode_loop(world, fail_exit, NULL);
        if ((st = tp_all_reduce(world, buf, buf, LOOP_FLOATS, TP_F32, TP_SUM, NULL)) == TP_OK) {
            finalize_or_die(world);
            return 0;
        }
        fprintf(stderr, "engine: rank %d: %s: %s\n", my_rank, tp_status_string(st), tp_last_error());
        check_failed_job(world, st, buf);
        return fail_exit;
    }
    fprintf(stderr, "engine: rank %s: tp_init: %s: %s\n", rank, tp_status_string(st), tp_last_error());
    int fds_after = proc_count("/proc/self/fd", NULL, after), tasks_after = proc_count("/proc/self/task", NULL, NULL);
    /* A joined thread can stay listed for a moment: pthread_join returns when the kernel clears its tid, before the
     * kernel releases it (seen once in ~50 runs beside a busy check). Look again for up to 1 s; one still running
     * then is a thread left behind. */
    for (int ms = 0; tasks_after > tasks && ms < 1000; ms++) {
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
        tasks_after = proc_count("/proc/self/task", NULL, NULL);
    }
    int fate = proc_count("/proc/self/task", "tp-fate", NULL), opened = 0;
    for (int fd = 0; fd < FDS_MAX; fd++) opened += after[fd] && !before[fd];
    tp_status_t again = tp_init(NULL, &world);
    fprintf(stderr,
            "engine: rank %s: after the failed tp_init: %d fds (%d before, %d new), %d threads (%d before), %d "
            "named tp-fate; tp_init again: %s: %s\n",
            rank, fds_after, fds, opened, tasks_after, tasks, fate, tp_status_string(again), tp_last_error());
    if (opened != 0 || fds_after < 0 || tasks_after != tasks || fate != 0 || again != TP_ERR_STATE) return 5;
    return fail_exit;
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    const char *mode = argv[1], *ready = NULL, *room = NULL;
    long count = -1;
    int fail_exit = 4, finalize = 1;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--fail-exit") == 0 && i + 1 < argc) fail_exit = atoi(argv[++i]);
        else if (strcmp(argv[i], "--ready") == 0 && i + 1 < argc) ready = argv[++i];
        else if (strcmp(argv[i], "--no-finalize") == 0) finalize = 0;
        else if (strcmp(argv[i], "--fd-room") == 0 && i + 1 < argc) room = argv[++i];
        else if (count < 0 && atol(argv[i]) > 0) count = atol(argv[i]);
        else usage();
    }
    if (count < 0) count = 100;
    tp_fate_register(on_failure, NULL);
    if (strcmp(mode, "init") == 0) return mode_init(fail_exit, room);
    tp_comm_t *world;
    tp_status_t st = tp_init(NULL, &world);
    if (st != TP_OK) die_on(st, 1);
    my_rank = tp_comm_rank(world);
    if (strcmp(mode, "loop") == 0) return mode_loop(world, fail_exit, ready);
    if (strcmp(mode, "hold") == 0) return mode_hold(world, count);
    if (strcmp(mode, "straggler") == 0) return mode_straggler(world, count);
    int p2p = strcmp(mode, "p2p") == 0;
    if (p2p || strcmp(mode, "serve") == 0)
        return my_rank == 0 ? serve_root(world, world, count, p2p, finalize) : serve_worker(world, world, p2p);
    if (strcmp(mode, "split") != 0) usage();
    /* Pairs {0,1}, {2,3}, ...; pair c serves (c + 1) * REQUESTS, so one pair's stop comes while another serves. */
    tp_comm_t *sub;
    int color = my_rank / 2;
    if ((st = tp_comm_split(world, color, my_rank, &sub)) != TP_OK) die_on(st, 4);
    if (tp_comm_size(sub) < 2) {
        fprintf(stderr, "engine: rank %d: split needs an even number of ranks\n", my_rank);
        return 2;
    }
    if (tp_comm_rank(sub) == 0) return serve_root(world, sub, count * (color + 1), 0, finalize);
    return serve_worker(world, sub, 0);
}
