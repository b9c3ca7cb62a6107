/* Paged decode attention for CPU: each sequence's K and V pages are read once, in place.
 *
 * The torch path (attention/paged.py) copies every page of a layer into a contiguous block and
 * then runs matmuls over that block: each byte of the cache crosses the memory bus twice. Here,
 * for every (sequence, KV head), the kernel walks the page table itself: it widens one page of
 * keys to float32 (16 x D floats, in L1), scores all the query heads of the KV head's group
 * against it, then, after an exact softmax over the whole context, does the same for the values.
 *
 * Element types (codes shared with paged_decode.py): 0 float32, 1 bfloat16, 2 float8 e4m3fn,
 * 3 float8 e5m2. FP8 is widened by moving bits (as kv/fp8.py's dequantize_fp8_bits, into
 * float32): an e4m3 byte, sign-extended, shifted left 20 and masked, is the float32 number 2^120
 * times too small, one exact multiply finishes it; the two NaN patterns read as +-480, as there.
 * An e5m2 byte (the top byte of a half: exponent bias 15) goes the same way shifted left 21,
 * times 2^112; its inf and NaN patterns (never stored: quantizing saturates) read as finite.
 *
 * Integrity: when asked (sample_step > 0), it also adds the wrap-around sum of the 64-bit words of
 * the sampled page columns (first, first + step, ... < num_pages, padding pages included, every
 * KV head) to sums[b, column], the same figure PageSample.add takes from a torch gather, and
 * adds the time those sums took to *sum_seconds (CLOCK_MONOTONIC around each sum loop: the
 * checker's share counts it, as it counts PageSample.add's process time on the torch path).
 *
 * Built with -fassociative-math so that the dot-product reductions vectorise; nothing here
 * depends on the order of float additions beyond rounding.
 */
#define _POSIX_C_SOURCE 199309L  /* clock_gettime under -std=c11 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

enum { F32 = 0, BF16 = 1, FP8 = 2, FP8_E5M2 = 3 };

static inline float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Widen n FP8 bytes to float32: sign-extend, shift the exponent and mantissa into float32's
 * low exponent and top mantissa bits, mask off the sign's copies, scale by 2^(127 - bias). */
static inline void widen_fp8(const int8_t *restrict s, int64_t n, float *restrict dst, int shift,
                             uint32_t mask_bits, float factor) {
    int64_t i = 0;
#if defined(__AVX512F__)
    const __m512i mask = _mm512_set1_epi32((int32_t)mask_bits);
    const __m512 scale = _mm512_set1_ps(factor);
    const __m128i count = _mm_cvtsi32_si128(shift);
    for (; i + 16 <= n; i += 16) {
        const __m512i w = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        const __m512i bits = _mm512_and_si512(_mm512_sll_epi32(w, count), mask);
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_castsi512_ps(bits), scale));
    }
#endif
    for (; i < n; i++) {
        uint32_t w = ((uint32_t)(int32_t)s[i] << shift) & mask_bits;
        dst[i] = bits_to_float(w) * factor;
    }
}

/* Widen n contiguous elements of type `dtype` at src to float32. */
static void widen(const void *src, int dtype, int64_t n, float *restrict dst) {
    if (dtype == F32) {
        memcpy(dst, src, (size_t)n * 4);
    } else if (dtype == BF16) {
        const uint16_t *s = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++) dst[i] = bits_to_float((uint32_t)s[i] << 16);
    } else if (dtype == FP8) {
        widen_fp8((const int8_t *)src, n, dst, 20, 0x87F00000u, 0x1p120f);
    } else { /* FP8_E5M2 */
        widen_fp8((const int8_t *)src, n, dst, 21, 0x8FE00000u, 0x1p112f);
    }
}

/* Round float32 to bfloat16, to nearest even (NaN stays NaN). */
static inline uint16_t to_bf16(float f) {
    uint32_t u = float_to_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* exp(x) for x <= 0 to ~2 ulp, branch-free so that the loop over a row vectorises: x = n ln2 + r,
 * a degree-6 polynomial for e^r on |r| <= ln2/2, 2^n put into the exponent bits. */
static inline float exp_nonpositive(float x) {
    x = x < -87.0f ? -87.0f : x;
    float n = __builtin_roundf(x * 1.44269504088896341f);
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t e = (int32_t)n + 127;
    return p * bits_to_float((uint32_t)e << 23);
}

static inline int64_t dtype_size(int dtype) { return dtype == F32 ? 4 : dtype == BF16 ? 2 : 1; }

/* Ask for a page's cache lines ahead of use: pages sit at random places in the pool, so the
 * hardware prefetcher only picks a page up after its first misses; at glm4-tiny's sizes the
 * kernel was otherwise stalled on those loads (perf: ~30% of its samples on them). Into L2
 * (locality 1, prefetcht2), not L1: a sequence's worth of pages is requested at once, more lines
 * than L1 can track in flight, and with a pool larger than L3 the L1 form was 1.5-1.7x slower
 * for BF16 (isolated, interleaved; locality 2 the same as 1, 0 slower). */
static inline void prefetch(const char *page, int64_t bytes) {
    for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(page + i, 0, 1);
}

static inline double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t word_sum(const void *page, int64_t bytes) {
    const uint64_t *w = (const uint64_t *)page;
    uint64_t total = 0;
    for (int64_t i = 0; i < bytes / 8; i++) total += w[i];
    return total;
}

/* out[t] = q . rows[t] for t < n, rows of `width` floats. Four rows per pass share each load of
 * q and give the core four independent sums to interleave. */
static inline void dots(const float *restrict q, const float *restrict rows, int64_t n,
                        int64_t width, float *restrict out) {
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) {
        const float *r0 = rows + t * width, *r1 = r0 + width, *r2 = r1 + width, *r3 = r2 + width;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int64_t d = 0; d < width; d++) {
            const float qd = q[d];
            s0 += qd * r0[d];
            s1 += qd * r1[d];
            s2 += qd * r2[d];
            s3 += qd * r3[d];
        }
        out[t] = s0, out[t + 1] = s1, out[t + 2] = s2, out[t + 3] = s3;
    }
    for (; t < n; t++) {
        const float *r = rows + t * width;
        float s0 = 0.0f;
        for (int64_t d = 0; d < width; d++) s0 += q[d] * r[d];
        out[t] = s0;
    }
}

/* acc[0..width) += sum over t < n of p[t] * rows[t][0..width), rows of `width` floats.
 * In blocks of 64 (then 16) columns held in a fixed-size local array across the loop over t: the
 * compiler keeps such a block in vector registers, where a loop over a run-time width reloads and
 * stores the accumulator for every row (that form took ~19% of the kernel's samples). */
static inline void accumulate(const float *restrict p, const float *restrict rows, int64_t n,
                              int64_t width, float *restrict acc) {
    int64_t d0 = 0;
    for (; d0 + 64 <= width; d0 += 64) {
        float a[64];
        for (int i = 0; i < 64; i++) a[i] = acc[d0 + i];
        for (int64_t t = 0; t < n; t++) {
            const float pt = p[t];
            const float *row = rows + t * width + d0;
            for (int i = 0; i < 64; i++) a[i] += pt * row[i];
        }
        for (int i = 0; i < 64; i++) acc[d0 + i] = a[i];
    }
    for (; d0 + 16 <= width; d0 += 16) {
        float a[16];
        for (int i = 0; i < 16; i++) a[i] = acc[d0 + i];
        for (int64_t t = 0; t < n; t++) {
            const float pt = p[t];
            const float *row = rows + t * width + d0;
            for (int i = 0; i < 16; i++) a[i] += pt * row[i];
        }
        for (int i = 0; i < 16; i++) acc[d0 + i] = a[i];
    }
    for (; d0 < width; d0++) {
        float a = acc[d0];
        for (int64_t t = 0; t < n; t++) a += p[t] * rows[t * width + d0];
        acc[d0] = a;
    }
}

/* One layer, every sequence of a decode group.
 *
 * q        (B, H, D) in q_dtype (F32 or BF16), rows b at q + b * q_stride elements; already
 *          multiplied by the softmax scale and K's FP8 scale.
 * k_cache  (Hkv, pool_pages, S, D) and v_cache (Hkv, pool_pages, S, v_row), kv_dtype; the values
 *          are the first Dv <= v_row elements of each row. MLA passes v_cache == k_cache and
 *          v_row == D: its values are the latent part of the cached rows, read from cache while
 *          the page is still there, and summed once for the integrity sample.
 * pages    (B, P) pool page of each page column; seq_lens (B,) tokens to attend (>= 1).
 * out      (B, H, Dv) contiguous in out_dtype (F32 or BF16): softmax(q k^T) v * out_scale.
 * sums     (B, n_sampled) uint64 or NULL; sample_step 0 = no integrity sample.
 * sum_seconds  where the sums' time is added (may be NULL).
 * Returns 0, or -1 when scratch memory could not be allocated.
 */
int ember_gqa_decode(const void *q, int q_dtype, int64_t q_stride, const void *k_cache,
                     const void *v_cache, int kv_dtype, int64_t pool_pages, const int64_t *pages,
                     int64_t num_pages, const int64_t *seq_lens, int64_t num_seqs,
                     int64_t num_kv_heads, int64_t group, int64_t head_dim, int64_t v_dim,
                     int64_t v_row, int64_t page_size, float out_scale, void *out, int out_dtype,
                     uint64_t *sums, int64_t sample_first, int64_t sample_step,
                     double *sum_seconds) {
    const int64_t S = page_size, D = head_dim, G = group;
    const int64_t H = num_kv_heads * G;
    const int64_t esize = dtype_size(kv_dtype);
    const int64_t k_page = S * D, v_page = S * v_row;  // elements per page of one head
    const int shared = v_cache == k_cache;  // MLA: one cache, values a prefix of each row
    int64_t max_len = 0;
    for (int64_t b = 0; b < num_seqs; b++) max_len = seq_lens[b] > max_len ? seq_lens[b] : max_len;
    float *qf = malloc(sizeof(float) * (size_t)(G * D));
    float *tile = malloc(sizeof(float) * (size_t)(S * (D > v_dim ? D : v_dim)));
    float *scores = malloc(sizeof(float) * (size_t)(G * (max_len > 0 ? max_len : 1)));
    float *acc = malloc(sizeof(float) * (size_t)(G * v_dim));
    if (!qf || !tile || !scores || !acc) {
        free(qf), free(tile), free(scores), free(acc);
        return -1;
    }
    const int64_t n_sampled =
        sample_step > 0 && sample_first < num_pages
            ? (num_pages - sample_first + sample_step - 1) / sample_step
            : 0;
    for (int64_t b = 0; b < num_seqs; b++) {
        const int64_t len = seq_lens[b];
        const int64_t used = (len + S - 1) / S;
        const int64_t *table = pages + b * num_pages;
        for (int64_t kvh = 0; kvh < num_kv_heads; kvh++) {
            const char *kh = (const char *)k_cache + kvh * pool_pages * k_page * esize;
            const char *vh = (const char *)v_cache + kvh * pool_pages * v_page * esize;
            const int64_t q_row = b * q_stride + kvh * G * D;
            if (q_dtype == F32) {
                memcpy(qf, (const float *)q + q_row, sizeof(float) * (size_t)(G * D));
            } else {
                widen((const uint16_t *)q + q_row, BF16, G * D, qf);
            }
            // Keys: scores[g, t] for every position, one page at a time.
            const int64_t k_bytes = k_page * esize, v_bytes = v_page * esize;
            if (b == 0 && kvh == 0) {
                for (int64_t j = 0; j < used; j++) prefetch(kh + table[j] * k_bytes, k_bytes);
            }
            for (int64_t j = 0; j < used; j++) {
                const int64_t n = len - j * S < S ? len - j * S : S;
                if (!shared) prefetch(vh + table[j] * v_bytes, v_bytes);  // read after softmax
                widen(kh + table[j] * k_page * esize, kv_dtype, n * D, tile);
                for (int64_t g = 0; g < G; g++)
                    dots(qf + g * D, tile, n, D, scores + g * len + j * S);
            }
            // Exact softmax over the whole context (float32), unnormalised until the end.
            float inv[G > 0 ? G : 1];
            for (int64_t g = 0; g < G; g++) {
                float *row = scores + g * len;
                float top = len > 0 ? row[0] : 0.0f;  // len 0 (out of contract): zeros out
                int64_t t = 1;
#if defined(__AVX512F__)
                // The scalar form does not vectorise (its NaN rule is not associative): ~7% of
                // the kernel's samples. max_ps(x, m) also keeps m when x is NaN.
                if (len >= 17) {
                    __m512 m = _mm512_set1_ps(top);
                    for (; t + 16 <= len; t += 16) m = _mm512_max_ps(_mm512_loadu_ps(row + t), m);
                    top = _mm512_reduce_max_ps(m);
                }
#endif
                for (; t < len; t++) top = row[t] > top ? row[t] : top;
                float total = 0.0f;
                for (int64_t t = 0; t < len; t++) {
                    row[t] = exp_nonpositive(row[t] - top);
                    total += row[t];
                }
                inv[g] = len > 0 ? out_scale / total : 0.0f;
            }
            // Values: acc[g] += p[g, t] * v[t], one page at a time, while the key pages of the
            // next (sequence, head) are fetched.
            const char *next_k = kh + pool_pages * k_bytes;
            const int64_t *next_table = table;
            int64_t next_used = used;
            if (kvh + 1 == num_kv_heads) {
                next_k = (const char *)k_cache;
                next_table = table + num_pages;
                next_used = b + 1 < num_seqs ? (seq_lens[b + 1] + S - 1) / S : 0;
            }
            memset(acc, 0, sizeof(float) * (size_t)(G * v_dim));
            for (int64_t j = 0; j < used; j++) {
                const int64_t n = len - j * S < S ? len - j * S : S;
                if (j < next_used) prefetch(next_k + next_table[j] * k_bytes, k_bytes);
                const char *vp = vh + table[j] * v_bytes;
                if (v_row == v_dim) {
                    widen(vp, kv_dtype, n * v_dim, tile);
                } else {
                    for (int64_t t = 0; t < n; t++)
                        widen(vp + t * v_row * esize, kv_dtype, v_dim, tile + t * v_dim);
                }
                for (int64_t g = 0; g < G; g++)
                    accumulate(scores + g * len + j * S, tile, n, v_dim, acc + g * v_dim);
            }
            // The integrity sample, after the attention has read this (sequence, head)'s pages:
            // the sums re-read them from cache. Summed first (as before), they took the misses
            // the attention then did not (glm4-tiny: ~440 us of a sample step's sums, timed).
            if (n_sampled > 0) {
                const double started = now_seconds();
                for (int64_t s = 0; s < n_sampled; s++) {
                    const int64_t page = table[sample_first + s * sample_step];
                    uint64_t total = word_sum(kh + page * k_page * esize, k_page * esize);
                    if (!shared) total += word_sum(vh + page * v_page * esize, v_page * esize);
                    sums[b * n_sampled + s] += total;
                }
                if (sum_seconds) *sum_seconds += now_seconds() - started;
            }
            const int64_t o_row = (b * H + kvh * G) * v_dim;
            for (int64_t g = 0; g < G; g++) {
                const float *ag = acc + g * v_dim;
                if (out_dtype == F32) {
                    float *o = (float *)out + o_row + g * v_dim;
                    for (int64_t d = 0; d < v_dim; d++) o[d] = ag[d] * inv[g];
                } else {
                    uint16_t *o = (uint16_t *)out + o_row + g * v_dim;
                    for (int64_t d = 0; d < v_dim; d++) o[d] = to_bf16(ag[d] * inv[g]);
                }
            }
        }
    }
    free(qf), free(tile), free(scores), free(acc);
    return 0;
}
