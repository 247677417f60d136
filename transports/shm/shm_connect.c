/* shm_connect.c: the segment (a sealed memfd, so nothing is ever left in /dev/shm), reach, connect and close. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define SHM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* What a peer must share with this rank for its fds and memory to be taken: user, IPC and network namespace. */
typedef struct shm_ident {
    int pid, memfd, eventfd;
    unsigned uid;
    unsigned long long ipcns, netns;
} shm_ident_t;

static unsigned long long ns_inode(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 ? (unsigned long long)s.st_ino : 0;
}

static int ident_parse(const char *a, shm_ident_t *id)
{
    int end = 0;
    if (a == NULL || sscanf(a, "%d:%d:%d:%u:%llu:%llu%n", &id->pid, &id->memfd, &id->eventfd, &id->uid, &id->ipcns,
                            &id->netns, &end) != 6)
        return -1;
    return a[end] == '\0' && id->pid > 0 && id->memfd >= 0 && id->eventfd >= 0 ? 0 : -1;
}

static void shm_close_segment(void *state)
{
    shm_state_t *st = state;
    if (st == NULL) return;
    for (int r = 0; st->peers != NULL && r < st->size; r++) {
        shm_peer_t *p = &st->peers[r];
        if (p->ring_frames > 0)
            tp_log(TP_LOG_DEBUG, "shm",
                   "rank %d: %llu ring frames written to it, %llu chunks streaming, %llu changes of way; back at the "
                   "ring's start: %llu frames of %d KiB and more, %llu of transfers of several",
                   r, (unsigned long long)p->ring_frames, (unsigned long long)p->write.streamed,
                   (unsigned long long)p->write.switches, (unsigned long long)p->ring_large_back,
                   SHM_RING_WINDOW / 1024, (unsigned long long)p->ring_parts_back);
        if (p->xchg.timed > 0)
            tp_log(TP_LOG_DEBUG, "shm", "rank %d: %llu exchanges timed, %llu of them by CMA", r,
                   (unsigned long long)p->xchg.timed, (unsigned long long)p->xchg.by_cma);
        free(p->xchg.classes);
        if (p->seg != NULL) munmap(p->seg, p->seg_bytes);
        if (p->pidfd >= 0) close(p->pidfd);
        if (p->eventfd >= 0) close(p->eventfd);
        shm_map_close(p);
        free(p->address);
    }
    if (st->seg != NULL) munmap(st->seg, st->seg_bytes);
    if (st->memfd >= 0) close(st->memfd);
    if (st->eventfd >= 0) close(st->eventfd);
    free(st->peers);
    free(st->pfds);
    free(st->dead);
    free(st);
}

static int has_cap_sys_ptrace(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    return syscall(SYS_capget, &h, d) == 0 && (d[CAP_SYS_PTRACE / 32].effective >> (CAP_SYS_PTRACE % 32) & 1);
}

/*
 * Whether peers on this kernel may take this rank's fds (pidfd_getfd) and read its memory (CMA); NULL when they may,
 * else why not, in why. Both need the system calls (Linux 5.6; a tool such as valgrind 3.19 lacks them, seccomp may
 * refuse them) and ptrace access, which Yama (/proc/sys/kernel/yama/ptrace_scope) limits: at 1 to a process's own
 * descendants, so each rank names any process of its user as its tracer, as Open MPI's vader does for CMA; at 2 to
 * holders of CAP_SYS_PTRACE; at 3 to none.
 */
static const char *fds_refused(char *why, size_t len)
{
    int self = (int)syscall(SYS_pidfd_open, getpid(), 0), fd = self >= 0 ? shm_take_fd(self, self) : -1;
    if (fd < 0) {
        snprintf(why, len, "%s of itself failed: %s (Linux 5.6 has it; a tool such as valgrind may not)",
                 self < 0 ? "pidfd_open" : "pidfd_getfd", strerror(errno));
        if (self >= 0) close(self);
        return why;
    }
    close(fd);
    close(self);
    char text[16] = "";
    int f = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    ssize_t n = f >= 0 ? read(f, text, sizeof(text) - 1) : -1;
    if (f >= 0) close(f);
    int scope = n > 0 ? atoi(text) : 0;
    if (scope == 1 && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0)
        snprintf(why, len, "Yama's ptrace_scope is 1 and prctl(PR_SET_PTRACER) failed: %s", strerror(errno));
    else if (scope == 2 && !has_cap_sys_ptrace())
        snprintf(why, len, "Yama's ptrace_scope 2 allows it only with CAP_SYS_PTRACE, which this rank lacks");
    else if (scope >= 3) snprintf(why, len, "Yama's ptrace_scope %d allows it to no process", scope);
    else return NULL;
    return why;
}

static tp_status_t shm_open_segment(const tp_transport_env_t *env, void **state, char *address, size_t address_len)
{
    char refused[160];
    if (env->size > 1 && fds_refused(refused, sizeof(refused)) != NULL) {
        tp_log(TP_LOG_WARN, "shm", "not available: peers could not take this rank's segment: %s; ranks on this host "
               "use TCP", refused);
        return TP_ERR_UNSUPPORTED;
    }
    shm_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) return TP_ERR_NO_MEMORY;
    st->env = *env;
    st->size = env->size;
    st->memfd = st->eventfd = -1;
    const char *what = "the peer table";
    st->peers = calloc((size_t)env->size, sizeof(*st->peers));
    st->pfds = calloc((size_t)env->size, sizeof(*st->pfds));
    st->dead = calloc((size_t)env->size, sizeof(*st->dead));
    if (st->peers == NULL || st->pfds == NULL || st->dead == NULL) goto err;
    for (int r = 0; r < env->size; r++) st->peers[r].pidfd = st->peers[r].eventfd = -1;
    char name[32];
    snprintf(name, sizeof(name), "tp-shm rank %d", env->rank);
    st->seg_bytes = SHM_SEG_BYTES(env->size, shm_ring_bytes(env->size));
    what = "memfd_create";
    if ((st->memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) goto err;
    what = "ftruncate of the segment";
    if (ftruncate(st->memfd, (off_t)st->seg_bytes) != 0) goto err;
    what = "sealing the segment"; /* no peer can shrink it under this rank's mapping (SIGBUS) */
    if (fcntl(st->memfd, F_ADD_SEALS, SHM_SEALS) != 0) goto err;
    what = "mmap of the segment";
    /* populated only when every peer maps it at once: on demand a ring's pages come when its sender first writes */
    int populate = env->connect_lazy ? 0 : MAP_POPULATE;
    void *m = mmap(NULL, st->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | populate, st->memfd, 0);
    if (m == MAP_FAILED) goto err;
    st->seg = m;
    what = "eventfd";
    if ((st->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) goto err;
    st->ctl = (shm_ctl_t *)st->seg;
    *st->ctl = (shm_ctl_t){.magic = shm_magic(),
                           .size = (uint32_t)env->size,
                           .rank = (uint32_t)env->rank,
                           .ring_bytes = shm_ring_bytes(env->size),
                           .seg_bytes = st->seg_bytes,
                           .probe_addr = (uint64_t)(uintptr_t)&st->probe,
                           .probe_value = st->probe = shm_magic() ^ (uint64_t)getpid()};
    st->uid = (unsigned)getuid();
    st->ipcns = ns_inode("/proc/self/ns/ipc");
    st->netns = ns_inode("/proc/self/ns/net");
    snprintf(address, address_len, "%d:%d:%d:%u:%llu:%llu", (int)getpid(), st->memfd, st->eventfd, st->uid, st->ipcns,
             st->netns);
    *state = st;
    return TP_OK;
err:
    tp_log(TP_LOG_DEBUG, "shm", "not available: %s failed: %s", what, strerror(errno));
    shm_close_segment(st);
    return TP_ERR_SYSTEM;
}

static void shm_caps(void *state, tp_transport_caps_t *caps)
{
    *caps = (tp_transport_caps_t){.mem_types = 1u << TP_MEM_HOST, .flags = TP_TRANSPORT_DELIVER | TP_TRANSPORT_MIRROR};
}

/* A peer on this kernel, as this user, in this IPC and network namespace: both ends see the same. */
static int shm_reach(void *state, const tp_peer_view_t *peer)
{
    const shm_state_t *me = state;
    shm_ident_t them;
    if (!peer->same_kernel || ident_parse(peer->address, &them) != 0) return TP_REACH_NO;
    if (them.uid != me->uid || them.ipcns != me->ipcns || them.netns != me->netns || them.ipcns == 0 || them.netns == 0)
        return TP_REACH_NO;
    return SHM_REACH_PRIORITY;
}

/* Takes one of the peer's fds through its pidfd. */
int shm_take_fd(int pidfd, int fd) { return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0); }

int shm_peer_exited(const shm_peer_t *p)
{
    struct pollfd ended = {.fd = p->pidfd, .events = POLLIN};
    return p->pidfd >= 0 && poll(&ended, 1, 0) == 1;
}

tp_status_t shm_peer_exited_why(const shm_peer_t *p, char *why, size_t why_len)
{
    snprintf(why, why_len, "its process (pid %d) exited in the middle of a call", p->pid);
    return TP_ERR_PEER_FAILED;
}

/* Maps peer r's segment after checking that it is what this layout expects (sealed, its size, its header). */
static tp_status_t connect_peer(shm_state_t *st, int r, const char *address)
{
    shm_peer_t *p = &st->peers[r];
    shm_ident_t id;
    const char *what = "its published address";
    int memfd = -1, saved = 0, foreign = 0;
    size_t ring = shm_ring_bytes(st->size), want = SHM_SEG_BYTES(st->size, ring);
    if (ident_parse(address, &id) != 0) goto err;
    p->pid = id.pid;
    what = "pidfd_open";
    if ((p->pidfd = (int)syscall(SYS_pidfd_open, id.pid, 0)) < 0) goto err;
    what = "pidfd_getfd of its segment";
    if ((memfd = shm_take_fd(p->pidfd, id.memfd)) < 0) goto err;
    what = "pidfd_getfd of its eventfd";
    if ((p->eventfd = shm_take_fd(p->pidfd, id.eventfd)) < 0) goto err;
    struct stat s;
    int seals = fcntl(memfd, F_GET_SEALS);
    what = "its segment (not a sealed memfd of the expected size)";
    errno = EINVAL;
    if (fstat(memfd, &s) != 0 || seals < 0 || (seals & SHM_SEALS) != SHM_SEALS || (size_t)s.st_size != want) goto err;
    what = "mmap of its segment";
    void *m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED | (st->env.connect_lazy ? 0 : MAP_POPULATE), memfd,
                   0);
    if (m == MAP_FAILED) goto err;
    p->seg = m;
    p->seg_bytes = want;
    p->ctl = (shm_ctl_t *)p->seg;
    foreign = 1; /* what its header says is the peer's doing: a protocol violation, which the job names */
    what = "its segment header is another libtp build's layout and protocol (not " SHM_MAGIC_TEXT ")";
    errno = EINVAL;
    if (p->ctl->magic != shm_magic()) goto err;
    what = "its segment header names another rank, world size or ring size";
    if (p->ctl->rank != (uint32_t)r || p->ctl->size != (uint32_t)st->size || p->ctl->ring_bytes != ring) goto err;
    close(memfd);
    p->out = (shm_chan_t *)(p->seg + SHM_CHAN_OFF(st->env.rank, ring));
    p->out_cells = (shm_cell_t *)(p->seg + SHM_CELLS_OFF(st->env.rank, ring));
    p->out_ring = p->seg + SHM_RING_OFF(st->env.rank, ring);
    p->in = (shm_chan_t *)(st->seg + SHM_CHAN_OFF(r, ring));
    p->in_cells = (const shm_cell_t *)(st->seg + SHM_CELLS_OFF(r, ring));
    p->in_ring = st->seg + SHM_RING_OFF(r, ring);
    p->out_ways = (shm_ways_t *)(p->seg + SHM_WAYS_OFF(st->size, ring, st->env.rank));
    p->in_ways = (const shm_ways_t *)(st->seg + SHM_WAYS_OFF(st->size, ring, r));
    p->ring = ring;
    p->use = 1;
    shm_cma_probe(st, p, r); /* before attached: the peer's first send sees what this rank can read */
    p->map_min = shm_min_frame("TP_SHM_MAP_BYTES", SHM_MAP_BYTES_TEXT);
    uint64_t one = 1;
    atomic_store(&p->out->attached, 1);
    tp_log(TP_LOG_DEBUG, "shm", "rank %d: connected (its segment mapped)", r);
    if (write(p->eventfd, &one, sizeof(one)) < 0) { /* full: the peer is awake anyway */
    }
    return TP_OK;
err:
    saved = errno;
    if (memfd >= 0) close(memfd);
    if (saved == EBADF && p->pidfd >= 0 && shm_peer_exited(p)) saved = ESRCH; /* a zombie has no fds left */
    if (p->seg != NULL) munmap(p->seg, p->seg_bytes);
    if (p->pidfd >= 0) close(p->pidfd);
    if (p->eventfd >= 0) close(p->eventfd);
    p->seg = NULL;
    p->pidfd = p->eventfd = -1; /* a later post tries again, or meets fate's verdict */
    if (saved == ESRCH) { /* it died after it published: a peer failure, which the job names */
        char why[96];
        snprintf(why, sizeof(why), "its process (pid %d) exited before shared memory was connected", id.pid);
        tp_log(TP_LOG_DEBUG, "shm", "rank %d: %s", r, why);
        tp_fate_report(r, why);
        return TP_ERR_PEER_FAILED;
    }
    if (st->env.abandoned != NULL && st->env.abandoned(st->env.abandoned_ctx))
        return TP_ERR_PEER_FAILED; /* the job failed already (fate named it): a peer tearing down is no news */
    if (foreign) return shm_fail(p, r, TP_ERR_PROTOCOL, what); /* else the peer would wait in its call for ever */
    if (saved == EBADF) { /* its fds are gone while it lives: it closed its transports (tp_finalize, or failing) */
        tp_log(TP_LOG_ERROR, "shm", "rank %d (pid %d) closed its shared memory before this rank connected to it", r,
               id.pid);
        return TP_ERR_PEER_FAILED;
    }
    tp_log(TP_LOG_ERROR, "shm",
           "cannot reach rank %d (pid %d) through shared memory: %s failed: %s; set TP_TRANSPORTS=^shm to use TCP "
           "between this host's ranks",
           r, id.pid, what, strerror(saved));
    return TP_ERR_SYSTEM;
}

/* Waits until every peer has mapped this rank's segment, as TCP's mesh is complete on return: a rank that leaves
 * right after tp_init never fails a peer still connecting. A peer that dies first is a peer failure. */
static tp_status_t wait_attached(shm_state_t *st)
{
    int64_t deadline = tp_now_ns() + (int64_t)(st->env.connect_timeout_s * 1e9);
    for (;;) {
        int k = 0;
        for (int r = 0; r < st->size; r++) {
            shm_peer_t *p = &st->peers[r];
            if (p->use && !atomic_load(&p->in->attached)) {
                st->dead[k] = r;
                st->pfds[k++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
            }
        }
        if (k == 0) break;
        int64_t left = deadline - tp_now_ns();
        if (left <= 0) {
            tp_log(TP_LOG_ERROR, "shm", "rank %d did not map this rank's segment within %.0f s (TP_BOOT_TIMEOUT)",
                   st->dead[0], st->env.connect_timeout_s);
            return TP_ERR_BOOTSTRAP;
        }
        struct pollfd all[2] = {{.fd = st->eventfd, .events = POLLIN}};
        uint64_t v;
        if (poll(all, 1, 0) == 0) { /* nothing new: block on the eventfd and the waited peers' pidfds */
            st->pfds[k] = all[0];
            poll(st->pfds, (nfds_t)k + 1, (int)(left / 1000000) + 1);
        }
        if (read(st->eventfd, &v, sizeof(v)) < 0 && errno != EAGAIN) return TP_ERR_SYSTEM;
        for (int i = 0; i < k; i++) {
            shm_peer_t *p = &st->peers[st->dead[i]];
            if (st->pfds[i].revents && !atomic_load(&p->in->attached)) {
                char why[96];
                snprintf(why, sizeof(why), "its process (pid %d) exited before shared memory was connected", p->pid);
                tp_fate_report(st->dead[i], why);
                return TP_ERR_PEER_FAILED;
            }
            st->pfds[i].revents = 0;
        }
    }
    return TP_OK;
}

tp_status_t shm_connect_peer(shm_state_t *st, int r)
{
    shm_peer_t *p = &st->peers[r];
    if (p->address == NULL) return TP_ERR_INVALID; /* not a peer this transport was chosen for */
    tp_status_t s = connect_peer(st, r, p->address);
    if (s == TP_OK) {
        free(p->address);
        p->address = NULL;
    }
    return s;
}

/* On demand, keeps each peer's address for its first post (mapping needs nothing of the peer but its pid). */
static tp_status_t shm_connect(void *state, const tp_transport_peer_t *peers)
{
    shm_state_t *st = state;
    int way = shm_write_setting(getenv("TP_SHM_WRITE")); /* bad values were refused at init */
    int walk = shm_walk_setting(getenv("TP_SHM_RING_WALK"));
    int cma_auto = shm_cma_auto(getenv("TP_SHM_CMA_BYTES"));
    for (int r = 0; r < st->size; r++) {
        if (!peers[r].use) continue;
        shm_peer_t *p = &st->peers[r];
        shm_write_start(&p->write, way);
        if (p->write.setting == SHM_WRITE_STREAMING)
            tp_log(TP_LOG_DEBUG, "shm", "rank %d: ring payloads to it written with streaming stores", r);
        /* Two ranks on CPUs of their own: large frames walk the ring, 0.5-0.7 of the time of going back to its start
         * at 64-512 KiB, and so do the frames of a transfer of several (0.25-0.69 at 32 KiB parts); crowded, going
         * back wins (BENCHMARKS.md, "Seventeenth" and "Eighteenth pass") */
        p->walk = walk == SHM_WALK_ALWAYS || (walk == SHM_WALK_AUTO && !peers[r].crowded);
        /* crowded, CMA lost at every size (BENCHMARKS.md, "CMA: where the single copy wins") */
        p->xchg.on = cma_auto && !peers[r].crowded;
        p->xchg.leads = st->env.rank < r;
        tp_log(TP_LOG_DEBUG, "shm", "rank %d: ring frames of %d KiB and more, and those of transfers of several, %s",
               r, SHM_RING_WINDOW / 1024, p->walk ? "walk the ring" : "go back to its start when they fit there");
    }
    for (int r = 0; st->env.connect_lazy && r < st->size; r++)
        if (peers[r].use && (st->peers[r].address = strdup(peers[r].view->address)) == NULL) return TP_ERR_NO_MEMORY;
    if (st->env.connect_lazy) return TP_OK;
    for (int r = 0; r < st->size; r++) {
        if (!peers[r].use) continue;
        tp_status_t s = connect_peer(st, r, peers[r].view->address);
        if (s != TP_OK) return s;
    }
    return wait_attached(st);
}

const tp_transport_ops_t tp_shm_ops = {
    .abi_version = TP_TRANSPORT_ABI,
    .ops_size = sizeof(tp_transport_ops_t),
    .name = "shm",
    .open = shm_open_segment,
    .caps = shm_caps,
    .reach = shm_reach,
    .pair_info = tp_transport_unsupported_pair_info, /* the published pid and fds are all a peer needs */
    .connect = shm_connect,
    .post = shm_post,
    .progress = shm_progress,
    .event_fds = shm_event_fds,
    .cancel = shm_cancel,
    .mem_register = tp_transport_unsupported_register,
    .mem_deregister = tp_transport_unsupported_deregister,
    .close = shm_close_segment,
};
