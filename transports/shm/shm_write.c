/* shm_write.c: ring payloads written with streaming stores (TP_SHM_WRITE=streaming). */
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
