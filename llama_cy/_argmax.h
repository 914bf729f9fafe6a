/* The greedy pick over a row of logits, as llama.cpp's greedy sampler makes it: the
 * first index of the largest value, NaN never chosen unless it is at index 0 (a strict
 * `>` scan starting from 0).
 *
 * A scalar scan of 262144 logits (Gemma 3) costs about 200 us a token, near 2 % of a
 * token's decode on 2 CPU cores; a vector max followed by a search for its first index
 * gives the same answer several times faster. MAXPS(v, m) is `v > m ? v : m` exactly
 * (NaN in v keeps m), and so is NEON's maxNum for a NaN v, so no NaN enters a lane.
 */
#ifndef LLAMA_CY_ARGMAX_H
#define LLAMA_CY_ARGMAX_H

#include <stdint.h>

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define LLAMA_CY_ARGMAX_SSE2 1
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define LLAMA_CY_ARGMAX_NEON 1
#endif

static inline int32_t llama_cy_argmax(const float *x, int32_t n) {
    if (n <= 1 || x[0] != x[0]) {
        return 0;
    }
    float best = x[0];
    int32_t i = 0;
#if defined(LLAMA_CY_ARGMAX_SSE2)
    __m128 m0 = _mm_set1_ps(best), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm_max_ps(_mm_loadu_ps(x + i), m0);
        m1 = _mm_max_ps(_mm_loadu_ps(x + i + 4), m1);
        m2 = _mm_max_ps(_mm_loadu_ps(x + i + 8), m2);
        m3 = _mm_max_ps(_mm_loadu_ps(x + i + 12), m3);
    }
    float lanes[4];
    _mm_storeu_ps(lanes, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
    for (int j = 0; j < 4; ++j) {
        best = lanes[j] > best ? lanes[j] : best;
    }
#elif defined(LLAMA_CY_ARGMAX_NEON)
    float32x4_t m0 = vdupq_n_f32(best), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 16 <= n; i += 16) {
        m0 = vmaxnmq_f32(vld1q_f32(x + i), m0);
        m1 = vmaxnmq_f32(vld1q_f32(x + i + 4), m1);
        m2 = vmaxnmq_f32(vld1q_f32(x + i + 8), m2);
        m3 = vmaxnmq_f32(vld1q_f32(x + i + 12), m3);
    }
    float v = vmaxvq_f32(vmaxnmq_f32(vmaxnmq_f32(m0, m1), vmaxnmq_f32(m2, m3)));
    best = v > best ? v : best;
#endif
    for (; i < n; ++i) {
        best = x[i] > best ? x[i] : best;
    }
    /* The first index holding the maximum (-0.0 == 0.0, as the strict scan ties them). */
    i = 0;
#if defined(LLAMA_CY_ARGMAX_SSE2)
    const __m128 b = _mm_set1_ps(best);
    for (; i + 16 <= n; i += 16) {
        const __m128 e0 = _mm_cmpeq_ps(_mm_loadu_ps(x + i), b);
        const __m128 e1 = _mm_cmpeq_ps(_mm_loadu_ps(x + i + 4), b);
        const __m128 e2 = _mm_cmpeq_ps(_mm_loadu_ps(x + i + 8), b);
        const __m128 e3 = _mm_cmpeq_ps(_mm_loadu_ps(x + i + 12), b);
        if (_mm_movemask_ps(_mm_or_ps(_mm_or_ps(e0, e1), _mm_or_ps(e2, e3)))) {
            break;
        }
    }
#endif
    for (; i < n; ++i) {
        if (x[i] == best) {
            return i;
        }
    }
    return 0; /* not reached: best is one of x's values */
}

#endif
