/* The integrity checker's per-step and per-flush loops over a decode batch, in one call each.
 *
 * In the engine every numpy op the checker makes costs ~5-10 us (the caches are cold from the
 * model's forward), and a decode step of 64 sequences made dozens: the ownership count, the
 * flush's joins, slices and fancy-index writes, the sampled check's gathers. These loops touch a
 * few thousand words each; one ctypes call (~1-2 us) replaces each group of ops. The numpy code
 * in engine/integrity.py stays the reference and the general path (prefill chunks, mixed steps,
 * any failure's report); tests compare the two on fresh random input.
 *
 * Layouts (all little-endian host arrays, from kv/integrity.py's KVSidecar): chain, digest:
 * uint64 per slot; position: int32 per slot; page_epoch, cleared_epoch: int64 per page. A page
 * table is int64, row-major. A sequence's chain buffer is uint64, indexed by position.
 */
#include <stdint.h>

/* How many entries of pages[0..n) name a page whose page_epoch equals epoch (restamped in it).
 * -1 if an entry is outside [0, num_pages). */
int64_t ember_count_epoch(const int64_t *page_epoch, int64_t num_pages, const int64_t *pages,
                          int64_t n, int64_t epoch) {
    int64_t hits = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t page = pages[i];
        if (page < 0 || page >= num_pages) return -1;
        hits += page_epoch[page] == epoch;
    }
    return hits;
}

/* The stamps of a run of `steps` decode steps of the same `rows` writers (step-major write
 * order): at step s, row r wrote slot ((const int64_t *)slot_arrays[s])[r] at position
 * first[r] + s, with the chain ((const uint64_t *)chain_arrays[r])[first[r] + s] and the
 * content digest digests[s * rows + r], at epoch epochs[s]. A stamp whose page was cleared after
 * its write (cleared_epoch[page] > epochs[s]) is dropped: the slot belongs to the page's next
 * owner. Returns how many were dropped; -2 (nothing written: not a run, the caller takes its
 * general path) unless last[r] == first[r] + steps - 1 for every row (the last step's
 * positions: one token a step); -1 (nothing written) if a slot is outside [0, num_slots) or a
 * position outside [0, chain_lens[r]). */
int64_t ember_apply_decode_run(int64_t steps, int64_t rows, const int64_t *slot_arrays,
                               const int64_t *first, const int64_t *last,
                               const int64_t *chain_arrays, const int64_t *chain_lens,
                               const uint64_t *digests, const int64_t *epochs, uint64_t *chain,
                               int32_t *position, uint64_t *digest, const int64_t *cleared_epoch,
                               int64_t num_slots, int64_t page_size) {
    for (int64_t r = 0; r < rows; r++) {
        if (last[r] != first[r] + steps - 1) return -2;
    }
    for (int64_t s = 0; s < steps; s++) {
        const int64_t *slots = (const int64_t *)(intptr_t)slot_arrays[s];
        for (int64_t r = 0; r < rows; r++) {
            if (slots[r] < 0 || slots[r] >= num_slots) return -1;
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        if (first[r] < 0 || first[r] + steps > chain_lens[r]) return -1;
    }
    int64_t dropped = 0;
    for (int64_t s = 0; s < steps; s++) {
        const int64_t *slots = (const int64_t *)(intptr_t)slot_arrays[s];
        const int64_t epoch = epochs[s];
        for (int64_t r = 0; r < rows; r++) {
            const int64_t slot = slots[r];
            if (cleared_epoch[slot / page_size] > epoch) {
                dropped++;
                continue;
            }
            const int64_t pos = first[r] + s;
            digest[slot] = digests[s * rows + r];
            position[slot] = (int32_t)pos;
            chain[slot] = ((const uint64_t *)(intptr_t)chain_arrays[r])[pos];
        }
    }
    return dropped;
}

/* Sampled mode's content check of one group (IntegrityChecker._check_pages with a gathered
 * digest): for every row r and sampled page column c = first, first + step, ... < cols, the
 * page p = pages[r * cols + c] passes when every slot p * page_size + o holds the chain the
 * reader expects there (its chain at position c * page_size + o while that is < seq_lens[r],
 * else 0: padding) and the sum of the page's stamped digests equals sample[r * n + k] (k the
 * column's index among the sampled ones, n their count): the digest of its bytes. Returns how
 * many pages failed (0: all passed; the caller then reports them with the reference code), or
 * -1 (nothing read) if a page is outside [0, num_pages) or a length outside [0, chain_lens[r]]
 * (the chain buffer's). */
int64_t ember_check_columns(int64_t num_rows, int64_t cols, const int64_t *pages, int64_t first,
                            int64_t step, const int64_t *seq_lens, const int64_t *chain_arrays,
                            const int64_t *chain_lens, const uint64_t *sample,
                            const uint64_t *chain, const uint64_t *digest, int64_t num_pages,
                            int64_t page_size) {
    int64_t n = first < cols ? (cols - first + step - 1) / step : 0;
    for (int64_t r = 0; r < num_rows; r++) {
        if (seq_lens[r] < 0 || seq_lens[r] > chain_lens[r]) return -1;
    }
    int64_t bad = 0;
    for (int64_t r = 0; r < num_rows; r++) {
        const uint64_t *expected = (const uint64_t *)(intptr_t)chain_arrays[r];
        const int64_t len = seq_lens[r];
        for (int64_t k = 0; k < n; k++) {
            const int64_t c = first + k * step;
            const int64_t page = pages[r * cols + c];
            if (page < 0 || page >= num_pages) return -1;
            const uint64_t *stamped = chain + page * page_size;
            const uint64_t *sums = digest + page * page_size;
            uint64_t total = 0;
            int failed = 0;
            for (int64_t o = 0; o < page_size; o++) {
                const int64_t pos = c * page_size + o;
                const uint64_t want = pos < len ? expected[pos] : 0;
                failed |= stamped[o] != want;
                total += sums[o];
            }
            bad += failed || total != sample[r * n + k];
        }
    }
    return bad;
}

/* Add to out[i] the wrap-around sum of the words of page pages[i] in each of `parts` cache layers
 * (KVSidecar.page_digest with parts: the layers no attention gather summed). Part j starts at
 * bases[j], holds heads[j] heads head_strides[j] bytes apart, each a run of page_bytes[j] bytes
 * per page (page_size rows, contiguous), read as words of widths[j] bytes (8, 4, 2 or 1: the
 * widest dividing a row). Returns -1 (nothing added) if a page is outside [0, num_pages) or a
 * width is none of those. */
int64_t ember_page_sums(int64_t parts, const int64_t *bases, const int64_t *heads,
                        const int64_t *head_strides, const int64_t *page_bytes,
                        const int64_t *widths, const int64_t *pages, int64_t n,
                        int64_t num_pages, uint64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        if (pages[i] < 0 || pages[i] >= num_pages) return -1;
    }
    for (int64_t j = 0; j < parts; j++) {
        if (widths[j] != 8 && widths[j] != 4 && widths[j] != 2 && widths[j] != 1) return -1;
    }
    for (int64_t j = 0; j < parts; j++) {
        const unsigned char *base = (const unsigned char *)(intptr_t)bases[j];
        const int64_t bytes = page_bytes[j], width = widths[j], count = bytes / width;
        for (int64_t i = 0; i < n; i++) {
            uint64_t total = 0;
            for (int64_t h = 0; h < heads[j]; h++) {
                const unsigned char *run = base + h * head_strides[j] + pages[i] * bytes;
                if (width == 8) {
                    const uint64_t *w = (const uint64_t *)run;
                    for (int64_t k = 0; k < count; k++) total += w[k];
                } else if (width == 4) {
                    const uint32_t *w = (const uint32_t *)run;
                    for (int64_t k = 0; k < count; k++) total += w[k];
                } else if (width == 2) {
                    const uint16_t *w = (const uint16_t *)run;
                    for (int64_t k = 0; k < count; k++) total += w[k];
                } else {
                    for (int64_t k = 0; k < count; k++) total += run[k];
                }
            }
            out[i] += total;
        }
    }
    return 0;
}

#ifdef EMBER_PYTHON_MODULE
/* The same loops as the CPython extension module ember_integrity_ops (kernels/build.py's
 * load_module): each function takes the C function's arguments as Python ints and returns its
 * result. A vectorcall touches far less code than ctypes (libffi, a conversion object per
 * argument): ~4 against ~16 us for the first call in an engine step, when the caches are cold. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int ints(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, int64_t *out) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "expected %zd arguments, got %zd", want, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        out[i] = PyLong_AsLongLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

#define P(i) ((void *)(intptr_t)a[i])

static PyObject *py_count_epoch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t a[5];
    (void)self;
    if (ints(args, nargs, 5, a)) return NULL;
    return PyLong_FromLongLong(ember_count_epoch(P(0), a[1], P(2), a[3], a[4]));
}

static PyObject *py_apply_decode_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t a[15];
    (void)self;
    if (ints(args, nargs, 15, a)) return NULL;
    return PyLong_FromLongLong(ember_apply_decode_run(a[0], a[1], P(2), P(3), P(4), P(5), P(6),
                                                      P(7), P(8), P(9), P(10), P(11), P(12),
                                                      a[13], a[14]));
}

static PyObject *py_check_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t a[13];
    (void)self;
    if (ints(args, nargs, 13, a)) return NULL;
    return PyLong_FromLongLong(ember_check_columns(a[0], a[1], P(2), a[3], a[4], P(5), P(6),
                                                   P(7), P(8), P(9), P(10), a[11], a[12]));
}

static PyObject *py_page_sums(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t a[10];
    (void)self;
    if (ints(args, nargs, 10, a)) return NULL;
    return PyLong_FromLongLong(
        ember_page_sums(a[0], P(1), P(2), P(3), P(4), P(5), P(6), a[7], a[8], P(9)));
}

#define FAST(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {
    FAST(count_epoch), FAST(apply_decode_run), FAST(check_columns), FAST(page_sums),
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ember_integrity_ops", NULL, -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_ember_integrity_ops(void) { return PyModule_Create(&module); }
#endif
