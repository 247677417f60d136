/*
 * shm_fault: a peer that writes garbage into the shared-memory transport's segments, and a job whose every rank is
 * SIGKILLed. head|cma|start|mapfd|mapoff|cell|seq|tail|cells|fuzz: rank 1 writes an impossible written position
 * (while rank 0 reads a ring payload), a frame whose payload is to be read from address 8 of rank 1 (CMA), from a
 * ring position that is neither where the last frame ended nor the ring's next start, from a file of its (its own
 * executable) as if it were tp_mem_alloc memory, or from past the end of a real allocation of its, a forged header
 * in a cell, an impossible cell sequence word, an impossible consumed position or cell count (while rank 0 fills the
 * ring or the cells), or random bytes over all of rank 0's segment; rank 0's next call must fail with
 * TP_ERR_PROTOCOL (never read or write out of bounds). ways|waysfuzz: see forged_ways. layout: see foreign_layout.
 * leak: every rank checks that it maps and holds nothing under /dev/shm, rank 0 prints every rank's pid, and all loop
 * in all_reduce until the script SIGKILLs them.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tp.h>

#include "shm.h"

/* Where this process maps rank r's segment (its own or a peer's, taken at connect), or NULL. */
static uint8_t *segment_of(int r)
{
    char line[512], want[64];
    snprintf(want, sizeof(want), "/memfd:tp-shm rank %d ", r);
    FILE *f = fopen("/proc/self/maps", "r");
    uint8_t *at = NULL;
    while (f != NULL && at == NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo;
        if (strstr(line, want) != NULL && sscanf(line, "%lx-", &lo) == 1) at = (uint8_t *)lo;
    }
    if (f != NULL) fclose(f);
    return at;
}

/* Sender's channel in a segment of a world of n. */
static shm_chan_t *chan(uint8_t *seg, int sender, int n)
{
    return (shm_chan_t *)(seg + SHM_CHAN_OFF(sender, shm_ring_bytes(n)));
}

/* What this rank maps or holds open under /dev/shm (a leftover after SIGKILL would be one of them): a count. */
static int dev_shm_uses(void)
{
    char line[512], path[600], target[512];
    int n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) n += strstr(line, " /dev/shm/") != NULL;
    if (f != NULL) fclose(f);
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        if (len > 0) target[len] = '\0';
        n += len > 0 && strncmp(target, "/dev/shm/", 9) == 0;
    }
    if (d != NULL) closedir(d);
    return n;
}

static int verdict_pipe[2];

/* The job's verdict reached this rank: rank 1 may leave. */
static void on_verdict(const tp_failure_t *f, void *arg)
{
    if (write(verdict_pipe[1], "v", 1) != 1) perror("shm_fault: verdict pipe");
}

/* Modes whose garbage rides a frame of rank 1's that rank 0 reads only after a relay through rank 2. */
static int relayed(const char *mode)
{
    return strcmp(mode, "head") == 0 || strcmp(mode, "cma") == 0 || strcmp(mode, "start") == 0 ||
           strcmp(mode, "via") == 0 || strncmp(mode, "map", 3) == 0;
}

static int garbage(const char *mode, int me, tp_comm_t *w)
{
    static float go[1];
    if (tp_barrier(w) != TP_OK) return 1; /* every rank has mapped the others' segments before the garbage */
    /* rank 0 has read all that rank 1 sent: the garbage cannot land in a call rank 0 is still in */
    if (me == 0 && tp_send(w, go, 1, TP_F32, 1, NULL) != TP_OK) return 1;
    if (me == 1 && tp_recv(w, go, 1, TP_F32, 0, NULL) != TP_OK) return 1;
    if (me == 1) {
        uint8_t *seg0 = segment_of(0), *seg1 = segment_of(1);
        if (seg0 == NULL || seg1 == NULL) {
            printf("rank 1: %s: no shm segment of rank 0 or 1 mapped here\n", mode);
            return 1;
        }
        int n = tp_comm_size(w);
        shm_chan_t *c = chan(seg0, 1, n);
        shm_cell_t *cells = (shm_cell_t *)(seg0 + SHM_CELLS_OFF(1, shm_ring_bytes(n)));
        uint64_t next = atomic_load(&c->cells_done); /* rank 0 consumed all: the cell of rank 1's next frame */
        static float big[4096];
        if (strcmp(mode, "head") == 0) { /* a payload in the ring, then its written position a TiB ahead */
            if (tp_send(w, big, 4096, TP_F32, 0, NULL) != TP_OK) return 1;
            atomic_store(&c->head, atomic_load(&c->head) + ((uint64_t)1 << 40));
        } else if (strcmp(mode, "cma") == 0) { /* a payload in the ring, then its cell says: read it at address 8 */
            if (tp_send(w, big, 4096, TP_F32, 0, NULL) != TP_OK) return 1;
            uint64_t via[2] = {SHM_VIA_CMA, 8};
            memcpy(cells[next % SHM_CELLS].body + TP_FRAME_HEADER_BYTES, via, sizeof(via));
        } else if (strncmp(mode, "map", 3) == 0) { /* a payload in the ring, then its cell says: read it mapped */
            void *mem = NULL;
            struct stat exe;
            /* mapfd: its own executable, a file of the right inode and size but no sealed memfd (it could shrink) */
            tp_mem_ref_t ref = {.fd = open("/proc/self/exe", O_RDONLY)};
            if (ref.fd < 0 || fstat(ref.fd, &exe) != 0) return 1;
            ref.ino = (uint64_t)exe.st_ino;
            if (tp_send(w, big, 4096, TP_F32, 0, NULL) != TP_OK) return 1;
            if (strcmp(mode, "mapoff") == 0 && (tp_mem_alloc(65536, &mem) != TP_OK || !tp_mem_find(mem, 65536, &ref)))
                return 1;
            /* mapoff: 16 KiB from 60 KiB on, in 64 KiB (kept: the peer's check must refuse it, not a gone mapping) */
            uint64_t via[2] = {SHM_VIA_MAP | (uint64_t)ref.fd << 8 | (uint64_t)(uint32_t)ref.ino << 32, 61440};
            memcpy(cells[next % SHM_CELLS].body + TP_FRAME_HEADER_BYTES, via, sizeof(via));
        } else if (strcmp(mode, "via") == 0) { /* a payload in the ring, then its cell names no place at all */
            if (tp_send(w, big, 4096, TP_F32, 0, NULL) != TP_OK) return 1;
            uint64_t via[2] = {7, 0};
            memcpy(cells[next % SHM_CELLS].body + TP_FRAME_HEADER_BYTES, via, sizeof(via));
        } else if (strcmp(mode, "start") == 0) { /* a payload in the ring, then its cell says: it starts elsewhere */
            if (tp_send(w, big, 4096, TP_F32, 0, NULL) != TP_OK) return 1;
            uint64_t via[2] = {SHM_VIA_RING, atomic_load(&c->head) - 3};
            memcpy(cells[next % SHM_CELLS].body + TP_FRAME_HEADER_BYTES, via, sizeof(via));
        } else if (strcmp(mode, "cell") == 0) { /* a whole header of garbage in the cell rank 0 reads next */
            for (int i = 0; i < SHM_CELL_BODY; i++) cells[next % SHM_CELLS].body[i] = (uint8_t)(i * 37 + 11);
            atomic_store(&cells[next % SHM_CELLS].seq, next + 1);
        } else if (strcmp(mode, "seq") == 0) { /* a sequence word of neither this lap nor the last */
            atomic_store(&cells[next % SHM_CELLS].seq, next + 1 + 5 * SHM_CELLS);
        } else if (strcmp(mode, "tail") == 0) { /* rank 1 owns these words: rank 0 reads them once it is full */
            atomic_store(&chan(seg1, 0, n)->tail, ((uint64_t)1 << 40) + 12345);
        } else if (strcmp(mode, "cells") == 0) {
            atomic_store(&chan(seg1, 0, n)->cells_done, ((uint64_t)1 << 40) + 12345);
        } else { /* fuzz */
            srand(42);
            for (size_t i = 0; i < SHM_SEG_BYTES(n, shm_ring_bytes(n)); i++) seg0[i] = (uint8_t)rand();
        }
        printf("rank 1: %s: garbage written\n", mode);
        fflush(stdout);
        static float one[1];
        /* rank 0 goes on only after this: straight (tail, cells) or through rank 2 (head: rank 0 then reads from 1) */
        if (strcmp(mode, "tail") == 0 || strcmp(mode, "cells") == 0) tp_send(w, one, 1, TP_F32, 0, NULL);
        if (relayed(mode)) tp_send(w, one, 1, TP_F32, 2, NULL);
        /* waits for the verdict (a call or a finalize now would end rank 0's call before it reads the garbage) */
        char v;
        return read(verdict_pipe[0], &v, 1) != 1;
    }
    static float x[1 << 19]; /* 2 MiB: more than a ring */
    int relay = relayed(mode), fill = strcmp(mode, "tail") == 0 || strcmp(mode, "cells") == 0;
    if (me == 2 && relay && (tp_recv(w, x, 1, TP_F32, 1, NULL) != TP_OK || tp_send(w, x, 1, TP_F32, 0, NULL) != TP_OK))
        return 1;
    if (me != 0) { /* in the barrier, so rank 0 is not told of a finalize before it reads rank 1's garbage */
        if (!fill) tp_barrier(w);
        return 0;
    }
    tp_status_t s = TP_OK;
    if (fill && (s = tp_recv(w, x, 1, TP_F32, 1, NULL)) == TP_OK) {
        if (strcmp(mode, "tail") == 0) s = tp_send(w, x, 1 << 19, TP_F32, 1, NULL);
        for (int i = 0; i < 2 * SHM_CELLS && s == TP_OK && strcmp(mode, "cells") == 0; i++)
            s = tp_send(w, x, 1, TP_F32, 1, NULL);
    } else if (relay) {
        if ((s = tp_recv(w, x, 1, TP_F32, 2, NULL)) == TP_OK) s = tp_recv(w, x, 4096, TP_F32, 1, NULL);
    } else if (!fill) {
        s = tp_barrier(w);
    }
    printf("rank 0: %s: %s: %s\n", mode, tp_status_string(s), s != TP_OK ? tp_last_error() : "");
    fflush(stdout);
    return s != TP_ERR_PROTOCOL;
}

/*
 * ways|waysfuzz, 2 ranks: rank 0 leads the pair's exchanges and, before each of its calls, writes every word of its
 * table in rank 1's segment itself. ways: CMA from the first exchange for 200 all_gathers of 1 MiB, then the ring
 * for 200 (rank 1's close note must count the CMA exchanges that schedule makes); waysfuzz: random words for 400.
 * Every call's values are checked on both ranks.
 */
static int forged_ways(const char *mode, int me, tp_comm_t *w)
{
    size_t count = (size_t)1 << 18; /* 1 MiB of f32 per rank: one exchange a call */
    float *send = malloc(count * sizeof(float)), *recv = malloc(2 * count * sizeof(float));
    if (send == NULL || recv == NULL) return 1;
    for (size_t i = 0; i < count; i++) send[i] = (float)(me * 1000003 + (int)i % 1000);
    if (tp_all_gather(w, send, recv, count, TP_F32, NULL) != TP_OK) return 1; /* connected: the segments mapped */
    shm_ways_t *table = NULL;
    if (me == 0) {
        uint8_t *seg1 = segment_of(1);
        if (seg1 == NULL) {
            printf("rank 0: %s: no shm segment of rank 1 mapped here\n", mode);
            return 1;
        }
        table = (shm_ways_t *)(seg1 + SHM_WAYS_OFF(2, shm_ring_bytes(2), 0));
    }
    int wrong = 0, fuzz = strcmp(mode, "waysfuzz") == 0;
    srand(7);
    for (int call = 0; call < 400 && !wrong; call++) {
        for (int k = 0; table != NULL && k < SHM_XCHG_KINDS * SHM_XCHG_CLASSES; k++) {
            uint64_t word = call < 200 ? 3 : 0; /* from exchange 0 on: CMA (before and after), then the ring */
            if (fuzz) word = (uint64_t)rand() << 40 ^ (uint64_t)rand() << 20 ^ (uint64_t)rand();
            atomic_store(&table->word[k], word);
        }
        /* rank 1 reads the words only after rank 0 wrote them: without this, a rank 0 slowed by a loaded machine
         * left rank 1 to read its own last choice instead, in more calls the busier the machine (182 by CMA) */
        tp_status_t s = tp_barrier(w);
        if (s == TP_OK) s = tp_all_gather(w, send, recv, count, TP_F32, NULL);
        if (s != TP_OK) {
            printf("rank %d: %s: call %d: %s: %s\n", me, mode, call, tp_status_string(s), tp_last_error());
            return 1;
        }
        for (size_t i = 0; i < 2 * count && !wrong; i++)
            wrong = recv[i] != (float)((int)(i / count) * 1000003 + (int)(i % count) % 1000);
        if (wrong) printf("rank %d: %s: call %d: wrong values\n", me, mode, call);
    }
    if (!wrong) printf("rank %d: %s: 400 all_gathers of 1 MiB right\n", me, mode);
    fflush(stdout);
    free(send);
    free(recv);
    return wrong;
}

/*
 * land, 2 ranks: the half of a 1 MiB all_reduce that rank 1 lends rank 0 (the first call of a class goes lent) lies
 * in memory rank 1 made unreadable. Rank 0's read of it into its result must fail as rank 1's protocol violation,
 * naming the bytes. Four calls of another class first let both ranks' CMA probes come in.
 */
static int unreadable_lent(int me, tp_comm_t *w)
{
    size_t count = (size_t)1 << 18, warm = (size_t)1 << 20; /* f32: 1 MiB; the warm-up 4 MiB */
    float *send = mmap(NULL, warm * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *recv = malloc(warm * sizeof(float));
    int bad = send == MAP_FAILED || recv == NULL;
    for (size_t i = 0; !bad && i < warm; i++) send[i] = 1.0f;
    for (int k = 0; !bad && k < 4; k++) bad = tp_all_reduce(w, send, recv, warm, TP_F32, TP_SUM, NULL) != TP_OK;
    /* rank 1's first half is rank 0's piece, which rank 1 never reads itself when the call goes lent */
    if (!bad && me == 1) bad = mprotect(send, count / 2 * sizeof(float), PROT_NONE) != 0;
    if (!bad) {
        tp_status_t s = tp_all_reduce(w, send, recv, count, TP_F32, TP_SUM, NULL);
        printf("rank %d: land: %s: %s\n", me, tp_status_string(s), s != TP_OK ? tp_last_error() : "");
        fflush(stdout);
        bad = me == 0 && s != TP_ERR_PROTOCOL;
    }
    free(recv); /* the sanitizer build counts a leak as a failure */
    if (send != MAP_FAILED) munmap(send, warm * sizeof(float));
    return bad;
}

/*
 * layout, 2 ranks: rank 1 rewrites its own segment's magic as an older libtp build's ("tp-shm04") before rank 0 first
 * maps it (rank 0 waits for the file "layout" that rank 1 then makes in $SHM_FAULT_DIR); rank 0's barrier, its first
 * call, must fail, and its error name another build's layout.
 */
static int foreign_layout(int me, tp_comm_t *w)
{
    const char *dir = getenv("SHM_FAULT_DIR");
    char path[512];
    if (dir == NULL) return 1;
    snprintf(path, sizeof(path), "%s/layout", dir);
    if (me == 1) {
        uint8_t *seg = segment_of(1);
        if (seg == NULL) return 1;
        ((shm_ctl_t *)seg)->magic = shm_magic() - 1;
        int fd = open(path, O_CREAT | O_WRONLY, 0600);
        if (fd < 0) return 1;
        close(fd);
    }
    for (int i = 0; me == 0 && i < 30000 && access(path, F_OK) != 0; i++) usleep(1000);
    tp_status_t s = tp_barrier(w);
    printf("rank %d: layout: %s: %s\n", me, tp_status_string(s), s != TP_OK ? tp_last_error() : "");
    fflush(stdout);
    return me == 0 && s == TP_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2 || pipe(verdict_pipe) != 0) return 2;
    tp_fate_register(on_verdict, NULL);
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) return 1;
    int me = tp_comm_rank(w), n = tp_comm_size(w), bad = 0;
    if (strcmp(argv[1], "leak") == 0) {
        int pid = (int)getpid(), *pids = calloc((size_t)n, sizeof(int));
        size_t count = 1 << 18;
        float *x = calloc(count, sizeof(float));
        if (pids == NULL || x == NULL) return 1;
        bad = tp_all_gather(w, &pid, pids, 1, TP_I32, NULL) != TP_OK || segment_of(me) == NULL || dev_shm_uses() != 0;
        printf("rank %d: segment %s, %d uses of /dev/shm\n", me, segment_of(me) ? "a memfd" : "missing",
               dev_shm_uses());
        if (me == 0) {
            printf("pids:");
            for (int r = 0; r < n; r++) printf(" %d", pids[r]);
            printf("\n");
        }
        fflush(stdout);
        while (!bad) bad = tp_all_reduce(w, x, x, count, TP_F32, TP_SUM, NULL) != TP_OK;
    } else if (strcmp(argv[1], "land") == 0) {
        bad = n != 2 || unreadable_lent(me, w);
    } else if (strcmp(argv[1], "layout") == 0) {
        bad = n != 2 || foreign_layout(me, w);
    } else if (strncmp(argv[1], "ways", 4) == 0) {
        bad = n != 2 || forged_ways(argv[1], me, w);
    } else {
        bad = garbage(argv[1], me, w);
    }
    tp_finalize(w);
    return bad;
}
