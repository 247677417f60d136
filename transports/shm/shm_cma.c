/* shm_cma.c: large payloads read straight from the sender's buffer (process_vm_readv), where the kernel allows it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "shm.h"

/* Reads a word the peer named in its control line; success means this rank may read the peer's memory. Refusal
 * (ptrace rules, seccomp, an old kernel) is normal: the ring carries everything, as a debug note says. */
void shm_cma_probe(shm_state_t *st, shm_peer_t *p, int r)
{
    uint64_t got = 0;
    struct iovec local = {.iov_base = &got, .iov_len = sizeof(got)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)p->ctl->probe_addr, .iov_len = sizeof(got)};
    ssize_t n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
    int ok = n == (ssize_t)sizeof(got) && got == p->ctl->probe_value;
    if (!ok)
        tp_log(TP_LOG_DEBUG, "shm",
               "rank %d: process_vm_readv of its memory refused (%s): large frames from it "
               "go through the ring",
               r, n < 0 ? strerror(errno) : "another value");
    atomic_store(&p->in->cma, (uint32_t)ok); /* in this rank's segment: the peer's sends read it */
    p->cma_min = shm_min_frame("TP_SHM_CMA_BYTES", SHM_CMA_BYTES_TEXT);
    (void)st;
}

static uint32_t median(const uint32_t *v, uint32_t n)
{
    uint32_t s[SHM_XCHG_WINDOW];
    memcpy(s, v, n * sizeof(*v));
    for (uint32_t i = 1; i < n; i++) /* insertion sort of at most SHM_XCHG_WINDOW */
        for (uint32_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
            uint32_t t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    return s[n / 2];
}

int shm_xchg_way(shm_xchg_class_t *c, int *sample)
{
    uint64_t n = c->count++;
    int settled = n >= c->from ? c->best : c->before, way;
    if (n < SHM_XCHG_EXPLORE) way = (int)((n / 2 + 1) % 2); /* CMA, CMA, ring, ring, ...: both ranks in step */
    else way = n % SHM_XCHG_PROBE_EVERY < 2 ? !settled : settled;
    *sample = n > 0 && way == c->last; /* the count starts at 0: a zeroed class has no last way */
    c->last = way;
    return way;
}

int shm_xchg_timed(shm_xchg_class_t *c, int way, uint32_t ns_per_kib)
{
    c->ns_kib[way][c->next[way]] = ns_per_kib;
    c->next[way] = (c->next[way] + 1) % SHM_XCHG_WINDOW;
    if (c->have[way] < SHM_XCHG_WINDOW) c->have[way]++;
    if (c->have[0] < SHM_XCHG_WINDOW || c->have[1] < SHM_XCHG_WINDOW) return 0;
    uint64_t best = median(c->ns_kib[c->best], SHM_XCHG_WINDOW), other = median(c->ns_kib[!c->best], SHM_XCHG_WINDOW);
    if (other * 100 >= best * (100 - SHM_XCHG_MARGIN_PCT)) return 0;
    c->before = c->best;
    c->best = !c->best;
    /* the exchange after the next: the follower may have counted the next already, never that one (it needs this
     * rank's send of the next). A word the follower reads names the way before it rightly too: it reads it for an
     * exchange after the one timed here, where any earlier change had taken effect. */
    c->from = c->count + 1;
    c->changes++;
    return 1;
}

uint64_t shm_xchg_word(const shm_xchg_class_t *c)
{
    return c->from << 2 | (uint64_t)c->before << 1 | (uint64_t)c->best;
}

void shm_xchg_follow(shm_xchg_class_t *c, uint64_t word)
{
    c->best = (int)(word & 1);
    c->before = (int)(word >> 1 & 1);
    c->from = word >> 2;
}

/* A receive from the peer at least SHM_XCHG_MIN long that has not completed, or NULL. */
static tp_xfer_t *waiting_recv(const shm_peer_t *p)
{
    for (tp_xfer_t *r = p->recv_head; r != NULL; r = r->next)
        if (r->len >= SHM_XCHG_MIN && !r->complete) return r;
    return NULL;
}

void shm_xchg_post(shm_state_t *st, shm_peer_t *p, tp_xfer_t *x)
{
    shm_xchg_t *e = &p->xchg;
    /* Not asked: whether the peer allows CMA yet. Its probe may come after this rank's first exchange, and both
     * ranks must count that one for their schedules to stay in step; a CMA exchange refused goes through the ring
     * and does not count. */
    if (!e->on || e->send != NULL || x->len < SHM_XCHG_MIN || x->streamed || x->lend || x->ready < x->len ||
        x->mem != TP_MEM_HOST)
        return;
    tp_xfer_t *r = waiting_recv(p);
    if (r == NULL) return;
    if (e->classes == NULL && (e->classes = calloc(SHM_XCHG_KINDS * SHM_XCHG_CLASSES, sizeof(*e->classes))) == NULL)
        return; /* untimed: the ring */
    int cls = 0;
    while (cls < SHM_XCHG_CLASSES - 1 && x->len >= ((size_t)SHM_XCHG_MIN << (cls + 1))) cls++;
    e->send = x;
    e->recv = r;
    unsigned k = tp_frame_kind(x->header) % SHM_XCHG_KINDS * SHM_XCHG_CLASSES + (unsigned)cls;
    e->cls = &e->classes[k];
    if (!e->leads) shm_xchg_follow(e->cls, atomic_load_explicit(&p->in_ways->word[k], memory_order_acquire));
    e->way = shm_xchg_way(e->cls, &e->sample);
    e->went = 0;
    e->warm = p->ring_reached == p->ring && p->in_tail >= p->ring; /* both rings past their first lap */
    e->start_ns = tp_now_ns();
    st->xchg_open++;
}

void shm_xchg_check(shm_state_t *st)
{
    for (int r = 0; st->xchg_open > 0 && r < st->size; r++) {
        shm_xchg_t *e = &st->peers[r].xchg;
        if (e->send == NULL || !e->send->complete || !e->recv->complete) continue;
        uint64_t bytes = e->send->len + e->recv->len, ns = (uint64_t)(tp_now_ns() - e->start_ns);
        uint64_t per_kib = ns * 1024 / bytes;
        shm_xchg_class_t *c = e->cls;
        /* Counted: an exchange whose frames all went the way it was to go, by CMA, or through the ring once both
         * rings of the pair were past their first lap (warm: that lap faults pages in). Not: one whose CMA the peer
         * did not allow yet (its probe came late), or whose frames lay in tp_mem_alloc memory (mapped). */
        int ring = e->went == 1u << SHM_VIA_RING, cma = e->went == 1u << SHM_VIA_CMA;
        if ((e->way == SHM_XCHG_RING && ring && e->warm) || (e->way == SHM_XCHG_CMA && cma)) {
            e->timed++;
            e->by_cma += cma;
            if (e->leads && e->sample &&
                shm_xchg_timed(c, e->way, per_kib > UINT32_MAX ? UINT32_MAX : (uint32_t)per_kib)) {
                atomic_store_explicit(&st->peers[r].out_ways->word[c - e->classes], shm_xchg_word(c),
                                      memory_order_release);
                tp_log(TP_LOG_DEBUG, "shm",
                       "rank %d: exchanges of kind %u, %zu KiB and more, now go %s (median %u ns per KiB moved, "
                       "against %u)",
                       r, (unsigned)((c - e->classes) / SHM_XCHG_CLASSES),
                       ((size_t)SHM_XCHG_MIN << ((c - e->classes) % SHM_XCHG_CLASSES)) / 1024,
                       c->best == SHM_XCHG_CMA ? "by CMA" : "through the ring", median(c->ns_kib[c->best], SHM_XCHG_WINDOW),
                       median(c->ns_kib[!c->best], SHM_XCHG_WINDOW));
            }
        }
        e->send = e->recv = NULL;
        st->xchg_open--;
    }
}

tp_status_t shm_cma_read(shm_peer_t *p, void *dst, size_t n, uint64_t addr, char *why, size_t why_len)
{
    size_t done = 0;
    while (done < n) {
        struct iovec local = {.iov_base = (uint8_t *)dst + done, .iov_len = n - done};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)(addr + done), .iov_len = n - done};
        ssize_t got = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
        if (got > 0) {
            done += (size_t)got;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == ESRCH) return shm_peer_exited_why(p, why, why_len);
        snprintf(why, why_len, "its frame names %zu bytes at 0x%llx in its memory, of which %zu can be read (%s)", n,
                 (unsigned long long)addr, done, got < 0 ? strerror(errno) : "end of its mapping");
        return TP_ERR_PROTOCOL;
    }
    return TP_OK;
}
