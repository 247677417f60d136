/*
 * shm_ring: frames of a few KiB through the shm rings touch only the rings' first pages, however many go through.
 * Rank 1 sends rank 0 frames of 4 KiB, each answered before the next, then every rank all_reduces 4 KiB many times
 * (several MiB through each ring); the payloads and sums must be exact, and each segment this rank maps (its own,
 * which peers write, and the peers', which it writes) may have at most RING_KIB_MAX KiB resident per channel. A
 * ring walked end to end instead makes its whole MiB resident (and, in a virtual machine, costs a first-touch fault
 * per page per mapping). Prints "shm_ring: rank R: ok" per rank; exits 77 where shared memory uses huge pages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tp.h>

#define FRAME_FLOATS 1024 /* 4 KiB: past the cells' inline payload, so every frame goes through the ring */
#define CALLS        400  /* 1.6 MiB per ring at least: more than a ring */
#define RING_KIB_MAX 128  /* resident KiB per channel: cells, positions and the ring's first pages, with room */

/* Resident KiB of this process's mapping of rank r's segment (-1: none), and whether it uses huge pages. */
static long segment_rss_kib(int r, int *huge)
{
    char line[512], want[64];
    snprintf(want, sizeof(want), "/memfd:tp-shm rank %d ", r);
    FILE *f = fopen("/proc/self/smaps", "r");
    long rss = -1, kib;
    unsigned long lo, hi;
    int in = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) in = strstr(line, want) != NULL; /* a mapping's first line */
        if (in && sscanf(line, "Rss: %ld kB", &kib) == 1) rss = kib;
        if (in &&
            (sscanf(line, "ShmemPmdMapped: %ld kB", &kib) == 1 || sscanf(line, "FilePmdMapped: %ld kB", &kib) == 1))
            *huge |= kib > 0;
    }
    if (f != NULL) fclose(f);
    return rss;
}

int main(void)
{
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) {
        fprintf(stderr, "shm_ring: tp_init: %s\n", tp_last_error());
        return 1;
    }
    int me = tp_comm_rank(w), n = tp_comm_size(w), bad = 0, huge = 0;
    float *frame = malloc(FRAME_FLOATS * sizeof(float)), *sum = malloc(FRAME_FLOATS * sizeof(float)), ack = 0;
    if (frame == NULL || sum == NULL) return 1;
    tp_status_t s = TP_OK;
    for (int k = 0; k < CALLS && s == TP_OK && n > 1 && me < 2 && !bad; k++) { /* ping-pong: the ring drains */
        for (int i = 0; i < FRAME_FLOATS; i++) frame[i] = (float)(me == 1 ? k * FRAME_FLOATS + i : -1);
        if (me == 1 && (s = tp_send(w, frame, FRAME_FLOATS, TP_F32, 0, NULL)) == TP_OK)
            s = tp_recv(w, &ack, 1, TP_F32, 0, NULL);
        if (me == 0 && (s = tp_recv(w, frame, FRAME_FLOATS, TP_F32, 1, NULL)) == TP_OK) {
            for (int i = 0; i < FRAME_FLOATS && !bad; i++)
                if (frame[i] != (float)(k * FRAME_FLOATS + i)) {
                    fprintf(stderr, "shm_ring: frame %d: element %d is %g, not %d\n", k, i, frame[i],
                            k * FRAME_FLOATS + i);
                    bad = 1;
                }
            s = tp_send(w, &ack, 1, TP_F32, 1, NULL);
        }
    }
    for (int k = 0; k < CALLS && s == TP_OK && !bad; k++) { /* back to back: small integers sum exactly */
        for (int i = 0; i < FRAME_FLOATS; i++) frame[i] = (float)(me * 4096 + (i + k) % 997);
        if ((s = tp_all_reduce(w, frame, sum, FRAME_FLOATS, TP_F32, TP_SUM, NULL)) != TP_OK) break;
        for (int i = 0; i < FRAME_FLOATS && !bad; i++) {
            float want = (float)(4096 * n * (n - 1) / 2 + n * ((i + k) % 997));
            if (sum[i] != want) {
                fprintf(stderr, "shm_ring: all_reduce %d: element %d is %g, not %g\n", k, i, sum[i], want);
                bad = 1;
            }
        }
    }
    free(frame);
    free(sum);
    if (s == TP_OK) s = tp_barrier(w);
    if (s != TP_OK) {
        fprintf(stderr, "shm_ring: rank %d: %s\n", me, tp_last_error());
        return 1;
    }
    for (int r = 0; r < n && !bad; r++) {
        long rss = segment_rss_kib(r, &huge), most = RING_KIB_MAX * (r == me ? n - 1 : 1) + 4;
        if (huge) {
            printf("shm_ring: rank %d: shared memory is mapped with huge pages here: resident sizes say nothing\n", me);
            tp_finalize(w);
            return 77;
        }
        if (rss < 0 || rss > most) {
            fprintf(stderr, "shm_ring: rank %d: %ld KiB of rank %d's segment resident here, more than %ld\n", me, rss,
                    r, most);
            bad = 1;
        }
    }
    if (!bad) printf("shm_ring: rank %d: ok\n", me);
    tp_finalize(w);
    return bad;
}
