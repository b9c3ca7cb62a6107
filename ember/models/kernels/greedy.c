/* Greedy pick: the index of the first maximum of each row of logits, as torch's
 * max(dim=-1).indices picks it (a NaN counts as the maximum: the first NaN wins).
 *
 * Torch's indexed reduction over a BF16 row of 8192 costs ~6 us a row at one thread, and the
 * two-level torch path (engine/sampling.py: block maxima, then the first block holding the
 * maximum) still runs five ops per step; here each row is two passes over 16 KB in L1: the
 * maximum (and whether any NaN occurs), then the first element equal to it.
 *
 * Element types (as paged_decode.c): 0 float32, 1 bfloat16. Rows may be strided (row_stride in
 * elements); elements within a row are contiguous.
 */
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

enum { F32 = 0, BF16 = 1 };

static inline float load_float(const void *row, int dtype, int64_t i) {
    float f;
    if (dtype == F32) {
        memcpy(&f, (const char *)row + 4 * i, 4);
    } else {
        uint32_t u = (uint32_t)((const uint16_t *)row)[i] << 16;
        memcpy(&f, &u, 4);
    }
    return f;
}

#if defined(__AVX512F__)
static inline __m512 load16(const void *row, int dtype, int64_t i) {
    if (dtype == F32) return _mm512_loadu_ps((const float *)row + i);
    const __m256i half = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}
#endif

static int64_t first_max(const void *row, int dtype, int64_t n) {
    float top = load_float(row, dtype, 0);
    int nan = top != top;
    int64_t i = 1;
#if defined(__AVX512F__)
    __m512 m = _mm512_set1_ps(nan ? 0.0f : top);
    __mmask16 unordered = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = load16(row, dtype, i);
        unordered |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        m = _mm512_max_ps(x, m);  // keeps m where x is NaN
    }
    nan |= unordered != 0;
    if (!nan) {
        const float vtop = _mm512_reduce_max_ps(m);
        top = vtop > top ? vtop : top;
    }
#endif
    for (; i < n; i++) {
        const float f = load_float(row, dtype, i);
        nan |= f != f;
        top = f > top ? f : top;
    }
    if (nan) {  // the first NaN, as torch's max
        for (int64_t j = 0; j < n; j++) {
            const float f = load_float(row, dtype, j);
            if (f != f) return j;
        }
    }
    int64_t j = 0;
#if defined(__AVX512F__)
    const __m512 want = _mm512_set1_ps(top);
    for (; j + 16 <= n; j += 16) {
        const __mmask16 hit = _mm512_cmp_ps_mask(load16(row, dtype, j), want, _CMP_EQ_OQ);
        if (hit) return j + __builtin_ctz((unsigned)hit);
    }
#endif
    for (; j < n; j++)
        if (load_float(row, dtype, j) == top) return j;
    return 0;  // unreachable: top is one of the row's values
}

/* out[r] = the first maximum of row r, for r < rows; rows of n >= 1 elements. */
void ember_greedy(const void *logits, int dtype, int64_t rows, int64_t n, int64_t row_stride,
                  int64_t *out) {
    const int64_t size = dtype == F32 ? 4 : 2;
    for (int64_t r = 0; r < rows; r++)
        out[r] = first_max((const char *)logits + r * row_stride * size, dtype, n);
}
