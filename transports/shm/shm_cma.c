/* shm_cma.c: large payloads read straight from the sender's buffer (process_vm_readv), where the kernel allows it. */
#include <errno.h>
#include <stdio.h>
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
