/* The KV store of new cache entries, with each token's content digest summed while its rows are
 * hot.
 *
 * The integrity checker stamps each new cache slot with the wrap-around sum of its stored 64-bit
 * words over every layer (kv/integrity.py). On the torch path the stores keep the tensors they
 * wrote and a flush digests them every few steps (paged_batch.stored_digests, the reference):
 * by then the rows are cold (a glm4-tiny flush of 16 steps read its 2 MB at ~3 GB/s, ~47 us a
 * step, with the copies or without). Here the store (torch's index_put, the reference) copies
 * each (token, head) row to its slot and then sums the rows it just read, from L1.
 *
 * src: tokens x heads rows of row_bytes, at token_stride and head_stride bytes (views into a
 * projection: any start, any stride). cache: one layer, (heads, pages, page_size, width)
 * contiguous, head_stride bytes between heads; slot s of head h starts at h * cache_head_stride
 * + s * row_bytes. sums (optional, row_bytes a multiple of 8): sums[t] gets (add: += , else =:
 * a step's first store needs no zeroed array) the wrap-around sum of token t's words; the time
 * the sums took (CLOCK_MONOTONIC) is added to *seconds: the checker's share counts it. Words are read with memcpy: the rows need not be 8-byte aligned.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ember_store_rows(const unsigned char *src, int64_t tokens, int64_t heads,
                     int64_t token_stride, int64_t head_stride, int64_t row_bytes,
                     unsigned char *cache, int64_t cache_head_stride, const int64_t *slots,
                     int64_t *sums, int add, double *seconds) {
    for (int64_t t = 0; t < tokens; t++) {
        unsigned char *slot = cache + slots[t] * row_bytes;
        const unsigned char *rows = src + t * token_stride;
        for (int64_t h = 0; h < heads; h++)
            memcpy(slot + h * cache_head_stride, rows + h * head_stride, (size_t)row_bytes);
    }
    if (sums == NULL) return 0;
    if (row_bytes % 8) return 1;
    double started = now();
    int64_t words = row_bytes / 8;
    for (int64_t t = 0; t < tokens; t++) {
        uint64_t total = 0;
        const unsigned char *rows = src + t * token_stride;
        for (int64_t h = 0; h < heads; h++) {
            const unsigned char *row = rows + h * head_stride;
            for (int64_t w = 0; w < words; w++) {
                uint64_t word;
                memcpy(&word, row + 8 * w, 8);
                total += word;
            }
        }
        sums[t] = add ? (int64_t)((uint64_t)sums[t] + total) : (int64_t)total;
    }
    *seconds += now() - started;
    return 0;
}
