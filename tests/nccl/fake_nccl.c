/*
 * fake_nccl.c: a stand-in libnccl.so.2 for tests without a GPU. It moves "device" buffers (host memory) between
 * ranks over Unix sockets, synchronously inside each call or ncclGroupEnd, and writes every call it takes to
 * FAKE_NCCL_LOG.<rank> so a test can check the order of calls. It behaves like nonblocking NCCL: init and calls
 * leave the communicator in progress until polled, a call made while in progress is refused, a dead peer is never
 * noticed (a receive waits until ncclCommAbort), and its sums go in reverse rank order (not libtp's).
 * Knobs: FAKE_NCCL_VERSION, FAKE_NCCL_INIT_HANG=1, FAKE_NCCL_FAIL_RANK + FAKE_NCCL_FAIL_AFTER (an async error).
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef struct fake_comm {
    int n, rank, *fds;
    int pending_polls; /* ncclCommGetAsyncError answers "in progress" this many more times */
    int hang, failed, aborted, ops;
} fake_comm_t;

typedef struct op {
    int is_send, peer;
    fake_comm_t *comm;
    char *buf;
    size_t len, done;
} op_t;

#define MAX_OPS 4096
static __thread op_t queue[MAX_OPS];
static __thread int queued, depth;
static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void note(fake_comm_t *c, const char *fmt, ...)
{
    pthread_mutex_lock(&log_lock);
    if (log_file == NULL && getenv("FAKE_NCCL_LOG") != NULL) {
        char path[4096];
        const char *r = getenv("TP_RANK") ? getenv("TP_RANK") : getenv("RANK");
        snprintf(path, sizeof(path), "%s.%s", getenv("FAKE_NCCL_LOG"), r ? r : "0");
        log_file = fopen(path, "a");
    }
    if (log_file != NULL) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(log_file, "n=%d ", c ? c->n : 0);
        vfprintf(log_file, fmt, ap);
        fputc('\n', log_file);
        fflush(log_file);
        va_end(ap);
    }
    pthread_mutex_unlock(&log_lock);
}

int ncclGetVersion(int *v)
{
    *v = getenv("FAKE_NCCL_VERSION") ? atoi(getenv("FAKE_NCCL_VERSION")) : 22809;
    return 0;
}

const char *ncclGetErrorString(int r) { return r == 6 ? "fake remote error (injected)" : "fake NCCL error"; }

int ncclGetUniqueId(char *id)
{
    const char *base = getenv("FAKE_NCCL_DIR"); /* the test's own directory, removed with it */
    char dir[100];
    snprintf(dir, sizeof(dir), "%.80s/fakenccl.XXXXXX", base ? base : "/tmp");
    if (mkdtemp(dir) == NULL) return 2;
    memset(id, 0, 128);
    snprintf(id, 128, "%s", dir);
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    note(NULL, "getid nvls=%s", nvls ? nvls : "unset");
    return 0;
}

typedef struct config {
    size_t size;
    unsigned magic, version;
    int blocking;
} config_t;

static int dial(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%.100s", path);
    for (int i = 0; i < 20000; i++) { /* the peer's listener appears when it reaches its own init */
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) return fd;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    close(fd);
    return -1;
}

/* ncclUniqueId, passed by value as NCCL declares it. */
typedef struct id128 {
    char b[128];
} id128_t;

int ncclCommInitRankConfig(fake_comm_t **out, int n, id128_t id_value, int rank, const config_t *cfg)
{
    const id128_t *id = &id_value;
    if (cfg == NULL || cfg->magic != 0xcafebeef || cfg->blocking != 0) {
        note(NULL, "init refused: config magic %x blocking %d", cfg ? cfg->magic : 0, cfg ? cfg->blocking : -1);
        return 4;
    }
    fake_comm_t *c = calloc(1, sizeof(*c));
    c->n = n;
    c->rank = rank;
    c->fds = calloc((size_t)n, sizeof(int));
    c->hang = getenv("FAKE_NCCL_INIT_HANG") != NULL;
    c->pending_polls = 2;
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    note(c, "init rank=%d nvls=%s", rank, nvls ? nvls : "unset");
    char path[200];
    snprintf(path, sizeof(path), "%s/%d", id->b, rank);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%.100s", path);
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, n) != 0) return 2;
    for (int p = 0; p < rank; p++) {
        snprintf(path, sizeof(path), "%s/%d", id->b, p);
        c->fds[p] = dial(path);
        if (c->fds[p] < 0 || write(c->fds[p], &rank, sizeof(rank)) != sizeof(rank)) return 2;
    }
    for (int k = rank + 1; k < n; k++) {
        int fd = accept(l, NULL, NULL), who = -1;
        if (fd < 0 || read(fd, &who, sizeof(who)) != sizeof(who) || who <= rank || who >= n) return 2;
        c->fds[who] = fd;
    }
    close(l);
    unlink(a.sun_path);
    rmdir(id->b); /* every rank has bound by now: the last one out removes the directory */
    c->fds[rank] = -1;
    *out = c;
    return 7; /* ncclInProgress: the caller must poll */
}

int ncclCommGetAsyncError(fake_comm_t *c, int *state)
{
    if (c->aborted) return 5;
    if (c->hang) {
        *state = 7;
        return 0;
    }
    if (c->pending_polls > 0) {
        c->pending_polls--;
        *state = 7;
        return 0;
    }
    *state = c->failed ? 6 : 0;
    return 0;
}

static int busy(fake_comm_t *c, const char *what)
{
    if (c->aborted) return 5;
    if (c->pending_polls > 0 || c->hang) {
        note(c, "refused %s: the communicator is still in progress (not polled)", what);
        return 5;
    }
    if (c->failed) return 6;
    return 0;
}

int ncclCommAbort(fake_comm_t *c)
{
    note(c, "abort");
    c->aborted = 1; /* a receive waiting for a dead peer ends; the memory stays (a racing call may still read it) */
    for (int p = 0; p < c->n; p++)
        if (c->fds[p] >= 0) shutdown(c->fds[p], SHUT_RDWR);
    return 0;
}

int ncclCommFinalize(fake_comm_t *c)
{
    note(c, "finalize");
    c->pending_polls = 1;
    return 7;
}

int ncclCommDestroy(fake_comm_t *c)
{
    note(c, "destroy");
    for (int p = 0; p < c->n; p++)
        if (c->fds[p] >= 0) close(c->fds[p]);
    free(c->fds);
    free(c);
    return 0;
}

int ncclMemAlloc(void **p, size_t len)
{
    *p = malloc(len);
    return *p ? 0 : 1;
}

int ncclMemFree(void *p)
{
    free(p);
    return 0;
}

/* Moves every queued op at once, so a group of sends and receives to several peers cannot deadlock. */
static int run_ops(op_t *ops, int n)
{
    for (;;) {
        struct pollfd pfd[MAX_OPS];
        int idx[MAX_OPS], k = 0, left = 0, aborted = 0;
        for (int i = 0; i < n; i++) {
            if (ops[i].comm->aborted) aborted = 1;
            if (ops[i].done == ops[i].len) continue;
            left++;
            int fd = ops[i].comm->fds[ops[i].peer];
            int first = 1; /* only the first pending op per peer and direction may move: the stream stays in order */
            for (int j = 0; j < i; j++)
                if (ops[j].done < ops[j].len && ops[j].comm == ops[i].comm && ops[j].peer == ops[i].peer &&
                    ops[j].is_send == ops[i].is_send)
                    first = 0;
            if (!first || fd < 0) continue;
            pfd[k] = (struct pollfd){.fd = fd, .events = ops[i].is_send ? POLLOUT : POLLIN};
            idx[k++] = i;
        }
        if (aborted) return 6;
        if (left == 0) return 0;
        if (poll(pfd, (nfds_t)k, 1) < 0 && errno != EINTR) return 2;
        for (int m = 0; m < k; m++) {
            op_t *o = &ops[idx[m]];
            if (!(pfd[m].revents & (pfd[m].events | POLLHUP | POLLERR))) continue;
            ssize_t r = o->is_send ? send(pfd[m].fd, o->buf + o->done, o->len - o->done, MSG_DONTWAIT | MSG_NOSIGNAL)
                                   : recv(pfd[m].fd, o->buf + o->done, o->len - o->done, MSG_DONTWAIT);
            if (r > 0) o->done += (size_t)r;
            else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                o->comm->fds[o->peer] = -1; /* a dead peer: NCCL would spin on it until aborted */
        }
    }
}

static int enqueue(fake_comm_t *c, int is_send, int peer, void *buf, size_t len)
{
    if (queued == MAX_OPS) return 3;
    queue[queued++] = (op_t){.is_send = is_send, .peer = peer, .comm = c, .buf = buf, .len = len};
    return 0;
}

static int after(fake_comm_t *c, int r)
{
    c->ops++;
    const char *fr = getenv("FAKE_NCCL_FAIL_RANK"), *fa = getenv("FAKE_NCCL_FAIL_AFTER");
    if (fr && fa && atoi(fr) == atoi(getenv("TP_RANK") ? getenv("TP_RANK") : "0") && c->ops >= atoi(fa)) c->failed = 1;
    c->pending_polls = 1; /* nonblocking: in progress until polled */
    return r == 0 ? 7 : r;
}

int ncclGroupStart(void)
{
    depth++;
    return 0;
}

int ncclGroupEnd(void)
{
    if (--depth > 0) return 0;
    int n = queued;
    queued = 0;
    if (n == 0) return 0;
    note(queue[0].comm, "group ops=%d", n);
    int r = run_ops(queue, n);
    return after(queue[0].comm, r);
}

static size_t dsize(int dt) { return dt == 4 || dt == 5 || dt == 8 ? 8 : dt == 6 || dt == 9 ? 2 : dt <= 1 ? 1 : 4; }

int ncclSend(const void *buf, size_t count, int dt, int peer, fake_comm_t *c, void *stream)
{
    int b = busy(c, "send");
    if (b) return b;
    if (depth == 0) note(c, "send peer=%d bytes=%zu stream=%p", peer, count * dsize(dt), stream);
    else note(c, "  send peer=%d bytes=%zu stream=%p", peer, count * dsize(dt), stream);
    int r = enqueue(c, 1, peer, (void *)buf, count * dsize(dt));
    if (r || depth > 0) return r;
    queued = 0;
    return after(c, run_ops(queue, 1));
}

int ncclRecv(void *buf, size_t count, int dt, int peer, fake_comm_t *c, void *stream)
{
    int b = busy(c, "recv");
    if (b) return b;
    note(c, "%srecv peer=%d bytes=%zu stream=%p", depth ? "  " : "", peer, count * dsize(dt), stream);
    int r = enqueue(c, 0, peer, buf, count * dsize(dt));
    if (r || depth > 0) return r;
    queued = 0;
    return after(c, run_ops(queue, 1));
}

static float from_half(uint16_t h, int bf)
{
    if (bf) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t to_half(float f, int bf)
{
    if (bf) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if (isnan(f)) return 0x7fc0;
        u += 0x7fff + ((u >> 16) & 1);
        return (uint16_t)(u >> 16);
    }
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    float a = fabsf(f);
    if (isnan(f)) return 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00;
    if (a < ldexpf(1, -14)) return sign | (uint16_t)nearbyintf(a * ldexpf(1, 24));
    int e;
    frexpf(a, &e);
    float m = nearbyintf(ldexpf(a, 11 - e)); /* 11 significant bits, round to nearest even */
    if (m >= 2048) m /= 2, e++;
    return sign | (uint16_t)((e + 14) << 10) | (uint16_t)((int)m - 1024);
}

/* dst = terms[n-1] + ... + terms[0]: NCCL's order is not libtp's; halves in f32, rounded once. */
static void reduce_rev(int dt, int op, void *dst, char **terms, int n, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        double acc = 0;
        float accf = 0;
        for (int k = n - 1; k >= 0; k--) {
            double v;
            switch (dt) {
            case 2: v = ((int32_t *)terms[k])[i]; break;
            case 4: v = (double)((int64_t *)terms[k])[i]; break;
            case 7: v = ((float *)terms[k])[i]; break;
            case 8: v = ((double *)terms[k])[i]; break;
            default: v = from_half(((uint16_t *)terms[k])[i], dt == 9);
            }
            if (k == n - 1) acc = v, accf = (float)v;
            else if (op == 0) acc = dt == 8 ? acc + v : acc, accf = accf + (float)v;
            else if ((op == 2) == (v > acc)) acc = v, accf = (float)v;
        }
        switch (dt) {
        case 2: {
            int64_t s = 0; /* integer sums wrap: redo in integers */
            for (int k = n - 1; k >= 0; k--) s = (int32_t)((uint32_t)s + (uint32_t)((int32_t *)terms[k])[i]);
            ((int32_t *)dst)[i] = op == 0 ? (int32_t)s : (int32_t)acc;
            break;
        }
        case 4: {
            uint64_t s = 0;
            int64_t m = ((int64_t *)terms[n - 1])[i];
            for (int k = n - 1; k >= 0; k--) {
                int64_t v = ((int64_t *)terms[k])[i];
                s += (uint64_t)v;
                if (op == 2 ? v > m : v < m) m = v;
            }
            ((int64_t *)dst)[i] = op == 0 ? (int64_t)s : m;
            break;
        }
        case 7: ((float *)dst)[i] = op == 0 ? accf : (float)acc; break;
        case 8: ((double *)dst)[i] = acc; break;
        default: ((uint16_t *)dst)[i] = to_half(op == 0 ? accf : (float)acc, dt == 9);
        }
    }
}

/* Every rank sends blocks[p] to rank p and gets rank p's block for it into got[p]. */
static int swap_blocks(fake_comm_t *c, char **blocks, char **got, size_t b)
{
    for (int p = 0; p < c->n; p++) {
        if (p == c->rank) continue;
        enqueue(c, 1, p, blocks[p], b);
        enqueue(c, 0, p, got[p], b);
    }
    int n = queued;
    queued = 0;
    return run_ops(queue, n);
}

static int reduce_common(const char *what, const void *send, void *recv, size_t count, int dt, int op, fake_comm_t *c,
                         void *stream, int scatter)
{
    int b = busy(c, what);
    if (b) return b;
    note(c, "%s count=%zu dtype=%d op=%d stream=%p", what, count, dt, op, stream);
    size_t bytes = count * dsize(dt);
    char **blocks = calloc((size_t)c->n, sizeof(char *)), **got = calloc((size_t)c->n, sizeof(char *));
    char *tmp = malloc(bytes * (size_t)c->n + 1);
    for (int p = 0; p < c->n; p++) {
        blocks[p] = (char *)send + (scatter ? (size_t)p * bytes : 0);
        got[p] = p == c->rank ? blocks[p] : tmp + (size_t)p * bytes;
    }
    int r = swap_blocks(c, blocks, got, bytes);
    if (r == 0) reduce_rev(dt, op, recv, got, c->n, count);
    free(blocks);
    free(got);
    free(tmp);
    return after(c, r);
}

int ncclAllReduce(const void *s, void *r, size_t count, int dt, int op, fake_comm_t *c, void *stream)
{
    return reduce_common("allreduce", s, r, count, dt, op, c, stream, 0);
}

int ncclReduceScatter(const void *s, void *r, size_t count, int dt, int op, fake_comm_t *c, void *stream)
{
    return reduce_common("reducescatter", s, r, count, dt, op, c, stream, 1);
}

int ncclAllGather(const void *s, void *r, size_t count, int dt, fake_comm_t *c, void *stream)
{
    int b = busy(c, "allgather");
    if (b) return b;
    size_t bytes = count * dsize(dt);
    note(c, "allgather bytes=%zu inplace=%d stream=%p", bytes, s == (char *)r + (size_t)c->rank * bytes, stream);
    char *mine = (char *)r + (size_t)c->rank * bytes;
    const char *sp = s, *rp = r;
    if (s != mine && sp < rp + bytes * (size_t)c->n && rp < sp + bytes) { /* NCCL would read what it overwrites */
        note(c, "refused allgather: send overlaps recv away from this rank's block");
        return 4;
    }
    if (s != mine) memcpy(mine, s, bytes);
    char **blocks = calloc((size_t)c->n, sizeof(char *)), **got = calloc((size_t)c->n, sizeof(char *));
    for (int p = 0; p < c->n; p++) {
        blocks[p] = mine;
        got[p] = (char *)r + (size_t)p * bytes;
    }
    int ret = swap_blocks(c, blocks, got, bytes);
    free(blocks);
    free(got);
    return after(c, ret);
}

int ncclBroadcast(const void *s, void *r, size_t count, int dt, int root, fake_comm_t *c, void *stream)
{
    int b = busy(c, "broadcast");
    if (b) return b;
    size_t bytes = count * dsize(dt);
    note(c, "broadcast bytes=%zu root=%d stream=%p", bytes, root, stream);
    if (c->rank == root) {
        if (s != r) memcpy(r, s, bytes);
        for (int p = 0; p < c->n; p++)
            if (p != root) enqueue(c, 1, p, r, bytes);
    } else {
        enqueue(c, 0, root, r, bytes);
    }
    int n = queued;
    queued = 0;
    return after(c, run_ops(queue, n));
}
