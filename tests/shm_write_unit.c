/*
 * shm_write_unit: the streaming copy the shm sender writes ring payloads with (transports/shm/shm_write.c) equals
 * memcpy at every alignment of its destination and touches nothing beside its bytes; TP_SHM_WRITE's choice of way
 * for each chunk: fixed under cached and streaming, and under auto cached until a run of slow timed chunks, then
 * streaming with a timed cached probe every SHM_WRITE_PROBE_EVERY chunks until one is fast.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm.h"

#include "unit_check.h"

static void copy_cases(void)
{
    enum { GUARD = 64, MAX = 9000 };
    static uint8_t src[MAX + 64], dst[MAX + 2 * GUARD + 64], want[sizeof(dst)];
    const size_t lens[] = {0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 1000, 4096, 4103, 8999};
    for (size_t i = 0; i < sizeof(src); i++) src[i] = (uint8_t)(i * 131 + 7);
    int bad = 0;
    for (size_t a = 0; a < 64; a++)
        for (size_t s = 0; s < 3; s++)
            for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
                memset(dst, 0xA5, sizeof(dst));
                memcpy(want, dst, sizeof(dst));
                memcpy(want + GUARD + a, src + s, lens[l]);
                shm_copy_streaming(dst + GUARD + a, src + s, lens[l]);
                shm_write_fence();
                if (memcmp(dst, want, sizeof(dst)) != 0 && bad++ == 0)
                    CHECK(0, "streaming copy of %zu bytes to offset %zu from offset %zu differs from memcpy", lens[l],
                          a, s);
            }
    CHECK(bad == 0, "%d streaming copies differ", bad);
    if (bad == 0) printf("ok: the streaming copy equals memcpy at 64 alignments x 3 source offsets x 14 lengths\n");
}

/* Chunks of n bytes under w: how many went each way, how many were timed (each timed one given ns_per_kib). */
static void chunks(shm_write_pick_t *w, int count, size_t n, unsigned ns_per_kib, int *streamed, int *timed)
{
    *streamed = *timed = 0;
    for (int i = 0; i < count; i++) {
        int t = 0, way = shm_write_way(w, n, 1, &t);
        *streamed += way == SHM_WRITE_STREAMING;
        if (t) {
            (*timed)++;
            shm_write_timed(w, n, (uint64_t)ns_per_kib * n / 1024);
        }
    }
}

static void pick_cases(void)
{
    enum { BIG = SHM_WRITE_TIMED_MIN, SMALL = SHM_WRITE_TIMED_MIN - 1 };
    const unsigned slow = SHM_WRITE_SLOW_NS_PER_KIB + 1, fast = 40;
    shm_write_pick_t w;
    int s, t;

    shm_write_start(&w, SHM_WRITE_CACHED);
    chunks(&w, 10, BIG, slow, &s, &t);
    CHECK(s == 0 && t == 0, "cached: %d of 10 chunks streamed, %d timed, not 0 and 0", s, t);
    shm_write_start(&w, SHM_WRITE_STREAMING);
    chunks(&w, 10, 64, fast, &s, &t);
    CHECK(s == 10 * shm_can_stream && t == 0, "streaming: %d of 10 small chunks streamed, %d timed", s, t);

    shm_write_start(&w, SHM_WRITE_AUTO);
    chunks(&w, 10, SMALL, slow, &s, &t);
    CHECK(s == 0 && t == 0, "auto: %d of 10 chunks under %d bytes streamed, %d timed, not 0 and 0", s, t, BIG);
    chunks(&w, SHM_WRITE_SLOW_RUN - 1, BIG, slow, &s, &t);
    chunks(&w, 1, BIG, SHM_WRITE_SLOW_NS_PER_KIB, &s, &t); /* at the bound: not slow, and the run starts over */
    chunks(&w, SHM_WRITE_SLOW_RUN - 1, BIG, slow, &s, &t);
    CHECK(w.way == SHM_WRITE_CACHED && w.switches == 0 && t == SHM_WRITE_SLOW_RUN - 1,
          "auto: slow runs broken by one chunk at the bound changed the way (%llu changes)",
          (unsigned long long)w.switches);
    chunks(&w, 1, BIG, slow, &s, &t);
    if (!shm_can_stream) {
        CHECK(w.setting == SHM_WRITE_CACHED && s == 0, "auto without streaming stores streamed");
        return;
    }
    CHECK(w.way == SHM_WRITE_STREAMING && w.switches == 1, "auto: %d slow chunks in a row left the way at %d",
          SHM_WRITE_SLOW_RUN, w.way);
    int cold = 0;
    for (int i = 0; i < SHM_WRITE_PROBE_EVERY; i++) cold += shm_write_way(&w, BIG, 0, &t) == SHM_WRITE_STREAMING && !t;
    CHECK(cold == SHM_WRITE_PROBE_EVERY, "auto, streaming: %d of %d chunks into unwritten ring bytes streamed untimed",
          cold, SHM_WRITE_PROBE_EVERY); /* and none of them counts towards the probe */
    chunks(&w, SHM_WRITE_PROBE_EVERY - 1, BIG, slow, &s, &t);
    CHECK(s == SHM_WRITE_PROBE_EVERY - 1 && t == 0, "auto, streaming: %d of %d chunks streamed and %d timed", s,
          SHM_WRITE_PROBE_EVERY - 1, t);
    chunks(&w, 5, SMALL, slow, &s, &t); /* small ones go cached and do not count towards the probe */
    CHECK(s == 0 && t == 0, "auto, streaming: %d small chunks streamed, %d timed", s, t);
    chunks(&w, 1, BIG, slow, &s, &t);
    CHECK(s == 0 && t == 1 && w.way == SHM_WRITE_STREAMING, "auto: the probe went %s (%d timed); a slow one left %d",
          s ? "streaming" : "cached", t, w.way);
    chunks(&w, SHM_WRITE_PROBE_EVERY, BIG, fast, &s, &t);
    CHECK(s == SHM_WRITE_PROBE_EVERY - 1 && t == 1 && w.way == SHM_WRITE_CACHED && w.switches == 2,
          "auto: a fast probe after %d chunks: %d streamed, %d timed, way %d, %llu changes", SHM_WRITE_PROBE_EVERY, s,
          t, w.way, (unsigned long long)w.switches);
    int way = shm_write_way(&w, BIG, 0, &t); /* a first write into the ring is not timed */
    CHECK(way == SHM_WRITE_CACHED && t == 0, "auto, cached: a chunk into unwritten ring bytes went %d, timed %d", way,
          t);
    chunks(&w, 10, BIG, fast, &s, &t);
    CHECK(s == 0 && t == 10 && w.last_ns_kib == fast, "auto, cached again: %d streamed, %d timed, last %u ns per KiB",
          s, t, w.last_ns_kib);
    CHECK(w.streamed == 3 * SHM_WRITE_PROBE_EVERY - 2, "auto: %llu chunks counted streamed, not %d",
          (unsigned long long)w.streamed, 3 * SHM_WRITE_PROBE_EVERY - 2);
    if (failures == 0)
        printf("ok: the write way: cached and streaming fixed; auto switches on %d slow chunks in a row, "
               "probes every %d, returns on a fast probe\n",
               SHM_WRITE_SLOW_RUN, SHM_WRITE_PROBE_EVERY);
}

int main(void)
{
    copy_cases();
    pick_cases();
    printf("%s\n", failures ? "shm_write_unit: FAILED" : "shm_write_unit: all passed");
    return failures ? 1 : 0;
}
