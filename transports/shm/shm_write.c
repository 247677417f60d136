/* shm_write.c: ring payloads written with streaming stores, and the choice of way for each chunk (TP_SHM_WRITE). */
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "shm.h"

#if defined(__x86_64__)
const int shm_can_stream = 1;

/* Streaming stores from the first 64-byte boundary on: full lines go to memory without being read first, and out of
 * the reader's cache. shm_write_fence orders them before the release store that publishes them. */
void shm_copy_streaming(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t lead = (size_t)(-(uintptr_t)dst & (SHM_LINE - 1));
    if (lead >= n) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, lead);
    dst += lead, src += lead, n -= lead;
    for (; n >= SHM_LINE; dst += SHM_LINE, src += SHM_LINE, n -= SHM_LINE) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32)), d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
}

void shm_write_fence(void) { _mm_sfence(); }
#else
const int shm_can_stream = 0; /* no streaming stores here: every payload is written through the cache */

void shm_copy_streaming(uint8_t *dst, const uint8_t *src, size_t n) { memcpy(dst, src, n); }

void shm_write_fence(void) {}
#endif

void shm_write_start(shm_write_pick_t *w, int setting)
{
    *w = (shm_write_pick_t){.setting = shm_can_stream ? setting : SHM_WRITE_CACHED, .way = SHM_WRITE_CACHED};
}

int shm_write_way(shm_write_pick_t *w, size_t n, int warm, int *timed)
{
    *timed = 0;
    int way = w->setting;
    if (way == SHM_WRITE_AUTO) {
        way = SHM_WRITE_CACHED;
        if (n >= SHM_WRITE_TIMED_MIN) {
            way = w->way;
            if (warm && way == SHM_WRITE_STREAMING && ++w->since_probe >= SHM_WRITE_PROBE_EVERY) { /* near again? */
                w->since_probe = 0;
                way = SHM_WRITE_CACHED;
            }
            *timed = warm && way == SHM_WRITE_CACHED;
        }
    }
    w->streamed += way == SHM_WRITE_STREAMING;
    return way;
}

int shm_write_timed(shm_write_pick_t *w, size_t n, uint64_t ns)
{
    uint64_t per_kib = n == 0 ? 0 : ns * 1024 / n;
    int slow = per_kib > SHM_WRITE_SLOW_NS_PER_KIB;
    w->last_ns_kib = per_kib > UINT32_MAX ? UINT32_MAX : (unsigned)per_kib;
    if (w->way == SHM_WRITE_CACHED) { /* a run of slow ones, not one: a rank descheduled mid-copy is not a far cache */
        w->slow = slow ? w->slow + 1 : 0;
        if (w->slow < SHM_WRITE_SLOW_RUN) return 0;
        w->slow = 0;
        w->since_probe = 0;
        w->way = SHM_WRITE_STREAMING;
    } else { /* a probe: one fast cached chunk is enough, since nothing but a near cache makes it fast */
        if (slow) return 0;
        w->way = SHM_WRITE_CACHED;
    }
    w->switches++;
    return 1;
}
