/* A sampler chain's candidate array filled from a row of logits: {id, logit, p} for each
 * token, as llama.cpp's common sampler fills it (set_logits) before the chain runs.
 *
 * The fill runs once per sampled row, over the whole vocabulary. Written as one loop
 * with the optional inputs tested per element (and the array reached through an object
 * the compiler cannot prove apart from it), it cost about 45 us for 32k tokens on a
 * 2-core x86 machine: about as much as the chain's own top-k. The common case (ids in
 * order, no probabilities) is a separate loop, four tokens a step with SSE2 where there
 * is SSE2 (about 9-14 us there), and plain C elsewhere.
 */
#ifndef LLAMA_CY_CANDIDATES_H
#define LLAMA_CY_CANDIDATES_H

#include <stdint.h>

#include "llama.h"

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define LLAMA_CY_CANDIDATES_SSE2 1
#endif

/* {i, logits[i], 0} for i in [0, n): the layout llama_token_data has (int32, float, float). */
static inline void llama_cy_fill_in_order(llama_token_data *__restrict cur,
                                          const float *__restrict logits, int32_t n) {
    int32_t i = 0;
#if defined(LLAMA_CY_CANDIDATES_SSE2)
    float *out = (float *) cur;
    __m128i ids = _mm_setr_epi32(0, 1, 2, 3);
    const __m128i four = _mm_set1_epi32(4);
    const __m128 zero = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) {
        const __m128 id = _mm_castsi128_ps(ids);
        const __m128 lg = _mm_loadu_ps(logits + i);
        const __m128 a = _mm_unpacklo_ps(id, lg);  // id0 l0 id1 l1
        const __m128 b = _mm_unpackhi_ps(id, lg);  // id2 l2 id3 l3
        // id0 l0 0 id1 | l1 0 id2 l2 | 0 id3 l3 0
        const __m128 o0 = _mm_shuffle_ps(a, _mm_shuffle_ps(zero, a, _MM_SHUFFLE(2, 2, 0, 0)),
                                         _MM_SHUFFLE(2, 0, 1, 0));
        const __m128 o1 = _mm_shuffle_ps(_mm_shuffle_ps(a, zero, _MM_SHUFFLE(0, 0, 3, 3)), b,
                                         _MM_SHUFFLE(1, 0, 2, 0));
        const __m128 o2 = _mm_shuffle_ps(_mm_shuffle_ps(zero, b, _MM_SHUFFLE(2, 2, 0, 0)),
                                         _mm_shuffle_ps(b, zero, _MM_SHUFFLE(0, 0, 3, 3)),
                                         _MM_SHUFFLE(2, 0, 2, 0));
        _mm_storeu_ps(out + 3 * i, o0);
        _mm_storeu_ps(out + 3 * i + 4, o1);
        _mm_storeu_ps(out + 3 * i + 8, o2);
        ids = _mm_add_epi32(ids, four);
    }
#endif
    for (; i < n; ++i) {
        cur[i].id = i;
        cur[i].logit = logits[i];
        cur[i].p = 0.0f;
    }
}

/* {ids[i] (i where ids is NULL), logits[i], probs[i] (0 where probs is NULL)} for i in
 * [0, n): a backend sampler's candidates, or the whole vocabulary in order. */
static inline void llama_cy_fill_candidates(llama_token_data *__restrict cur,
                                            const float *__restrict logits,
                                            const llama_token *__restrict ids,
                                            const float *__restrict probs, int32_t n) {
    if (ids == NULL && probs == NULL) {
        llama_cy_fill_in_order(cur, logits, n);
        return;
    }
    for (int32_t i = 0; i < n; ++i) {
        cur[i].id = ids != NULL ? ids[i] : i;
        cur[i].logit = logits[i];
        cur[i].p = probs != NULL ? probs[i] : 0.0f;
    }
}

#endif
