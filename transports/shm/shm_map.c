/* shm_map.c: large payloads from a sender's tp_mem_alloc memory, read in place through a mapping of its memfd (one
 * copy, or none for a lent receive, instead of two through the ring). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

/* The descriptor's first word: the kind, the sender's fd number and its memfd's inode (low 32 bits, so a reused fd
 * number is not taken for the allocation it named before). */
#define MAP_FD_BITS 24

int shm_map_describe(const shm_peer_t *p, const tp_xfer_t *x, size_t base, size_t fl, uint64_t via[2])
{
    tp_mem_ref_t ref;
    if (p->map_min == 0 || fl < p->map_min || !tp_mem_find((const uint8_t *)x->buf + base, fl, &ref) ||
        ref.fd >= (1 << MAP_FD_BITS))
        return 0;
    via[0] = SHM_VIA_MAP | (uint64_t)ref.fd << 8 | (uint64_t)(uint32_t)ref.ino << 32;
    via[1] = ref.offset;
    return 1;
}

void shm_map_close(shm_peer_t *p)
{
    for (int i = 0; i < SHM_MAPS; i++)
        if (p->maps[i].base != NULL) munmap(p->maps[i].base, p->maps[i].bytes);
    memset(p->maps, 0, sizeof(p->maps));
}

/* The peer's allocation the descriptor names, mapped here (taken and checked at its first use): NULL, with why. */
static const shm_map_t *map_of(shm_peer_t *p, int rank, int fd, uint32_t ino, tp_status_t *st, char *why,
                               size_t why_len)
{
    shm_map_t *m = NULL, *old = &p->maps[0];
    for (int i = 0; i < SHM_MAPS && m == NULL; i++) {
        shm_map_t *e = &p->maps[i];
        if (e->base != NULL && e->fd == fd && e->ino == ino) m = e;
        else if (e->base == NULL || (old->base != NULL && e->used < old->used)) old = e;
    }
    if (m != NULL) {
        m->used = ++p->map_clock;
        return m;
    }
    int got = shm_take_fd(p->pidfd, fd);
    *st = TP_ERR_PROTOCOL;
    if (got < 0 && shm_peer_exited(p)) { /* a zombie has no fds left */
        *st = shm_peer_exited_why(p, why, why_len);
        return NULL;
    }
    if (got < 0) {
        snprintf(why, why_len, "its frame names its fd %d as memory to read: it cannot be taken (%s)", fd,
                 strerror(errno));
        return NULL;
    }
    struct stat s;
    int seals = fcntl(got, F_GET_SEALS);
    void *base = MAP_FAILED;
    if (fstat(got, &s) != 0 || seals < 0 || !(seals & F_SEAL_SHRINK) || (uint32_t)s.st_ino != ino || s.st_size <= 0) {
        snprintf(why, why_len, "its frame names its fd %d as memory to read: not a sealed memfd of inode %u", fd, ino);
    } else if ((base = mmap(NULL, (size_t)s.st_size, PROT_READ, MAP_SHARED, got, 0)) == MAP_FAILED) {
        *st = TP_ERR_SYSTEM;
        snprintf(why, why_len, "mmap of %lld bytes of its memory (fd %d): %s", (long long)s.st_size, fd,
                 strerror(errno));
    }
    close(got); /* the mapping keeps the pages: sealed against shrinking, they stay readable whatever the peer does */
    if (base == MAP_FAILED) return NULL;
    if (old->base != NULL) munmap(old->base, old->bytes);
    tp_log(TP_LOG_DEBUG, "shm", "rank %d: mapped its allocation (its fd %d, %lld bytes)%s", rank, fd,
           (long long)s.st_size, old->base != NULL ? ", in place of its least recently read one" : "");
    *old = (shm_map_t){.base = base, .bytes = (size_t)s.st_size, .fd = fd, .ino = ino, .used = ++p->map_clock};
    return old;
}

tp_status_t shm_map_read(shm_peer_t *p, int rank, tp_xfer_t *x, size_t fl, const uint64_t via[2], char *why,
                         size_t why_len)
{
    int fd = (int)(via[0] >> 8 & ((1u << MAP_FD_BITS) - 1));
    tp_status_t s = TP_OK;
    const shm_map_t *m = map_of(p, rank, fd, (uint32_t)(via[0] >> 32), &s, why, why_len);
    if (m == NULL) return s;
    if (via[1] > m->bytes || fl > m->bytes - via[1]) {
        snprintf(why, why_len, "its frame names %zu bytes at offset %llu of its memory (fd %d), which holds %zu", fl,
                 (unsigned long long)via[1], fd, m->bytes);
        return TP_ERR_PROTOCOL;
    }
    const uint8_t *src = m->base + via[1];
    if (x->deliver != NULL) { /* its failure is the engine's, not the peer's: no why */
        why[0] = '\0';
        return x->deliver(x->deliver_arg, x->done, src, fl);
    }
    memcpy((uint8_t *)x->buf + x->done, src, fl);
    return TP_OK;
}
