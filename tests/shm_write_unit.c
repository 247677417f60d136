/*
 * shm_write_unit: the streaming copy the shm sender writes ring payloads with under TP_SHM_WRITE=streaming
 * (transports/shm/shm_write.c) equals memcpy at every alignment of its destination and touches nothing beside its
 * bytes.
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

int main(void)
{
    copy_cases();
    printf("%s\n", failures ? "shm_write_unit: FAILED" : "shm_write_unit: all passed");
    return failures ? 1 : 0;
}
