/* The matrix products of the native step (llama_step.c includes this): y_i = W x_i for n rows x_0..x_{n-1}, each
 * weight row read from memory once for all n (a lone learner: n = 1; a room: its rows).
 *
 * Every dot product sums in one order whatever n is (two sums over alternate 16-wide chunks, then the tail), so a
 * row's numbers are the same alone and beside others: the native room is batch-invariant by construction
 * (tests/model/test_native_step.py checks it bit for bit).
 *
 * One weight row after another: the matrix is read as one sequential stream, which the hardware prefetcher follows
 * at the memory's bandwidth (measured on this project's EPYC: 39-41 GB/s on one core, where eight rows side by side
 * read at 32). Up to GROUP rows of x share each weight vector loaded (independent sums: the FMAs do not wait on each
 * other). */

#define GROUP 4
#define BLOCK_ROWS 8  /* weight rows a block of a room's products holds in L2 (8 x 6 KB for down_proj) */
/* How far ahead of the products the weights are prefetched (3 KB: +7% read rate in 4 KB pages on this project's
 * EPYC; 512 bytes was 40% slower). */
#define PREFETCH_BYTES 3072

#define LOAD_F32(p) (*(const vf *)(p))
#define LOAD_BF16(p) load_bf16(p)
#define LOAD_I8(p) load_i8(p)
#define NO_SCALE(t, row) (t)
#define ROW_SCALE(t, row) ((t) * bf16_to_f32(scale[row]))

/* name##_dots: the G dots of one weight row `a` with xs[0..G-1] into t[0..G-1] (G a constant once inlined). */
#define DOTS(name, type, LOAD, SCALAR)                                                                         \
    static inline __attribute__((always_inline)) void name##_dots(const type *a, const float *const *xs,      \
                                                                  float *t, int cols, const int G) {          \
        int body = cols - cols % W, j = 0;                                                                     \
        vf s[GROUP];                                                                                           \
        for (int i = 0; i < G; i++) s[i] = (vf){0};                                                            \
        for (; j < body; j += W) {                                                                             \
            __builtin_prefetch((const char *)(a + j) + PREFETCH_BYTES, 0, 0);                                  \
            vf w0 = LOAD(a + j);                                                                               \
            for (int i = 0; i < G; i++) s[i] += w0 * *(const vf *)(xs[i] + j);                                 \
        }                                                                                                      \
        for (int i = 0; i < G; i++) {                                                                          \
            float sum = hsum(s[i]);                                                                            \
            for (int k = j; k < cols; k++) sum += SCALAR(a[k]) * xs[i][k];                                     \
            t[i] = sum;                                                                                        \
        }                                                                                                      \
    }

#if defined(__AVX512F__)
/* float32, four weight rows against four rows of x, each of the 16 sums in a register of its own: each weight vector
 * and each x vector loaded once for four FMAs. The same sums in the same order as gemm_f32_dots. */
static void f32_dots_4x4(const float *w, int cols, const float *const *xs, float t[4][4]) {
    const float *x0 = xs[0], *x1 = xs[1], *x2 = xs[2], *x3 = xs[3];
    __m512 s[4][4];
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 4; i++) s[r][i] = _mm512_setzero_ps();
    int body = cols - cols % W, j = 0;
    for (; j < body; j += W) {
        __m512 v0 = _mm512_loadu_ps(x0 + j), v1 = _mm512_loadu_ps(x1 + j);
        __m512 v2 = _mm512_loadu_ps(x2 + j), v3 = _mm512_loadu_ps(x3 + j);
        __asm__("" : "+v"(v0), "+v"(v1), "+v"(v2), "+v"(v3));  /* in registers (GCC would fold each load 4 times) */
        for (int r = 0; r < 4; r++) {
            const float *a = w + (size_t)r * cols + j;
            __builtin_prefetch((const char *)a + PREFETCH_BYTES, 0, 0);
            __m512 wr = _mm512_loadu_ps(a);
            s[r][0] = _mm512_fmadd_ps(wr, v0, s[r][0]);
            s[r][1] = _mm512_fmadd_ps(wr, v1, s[r][1]);
            s[r][2] = _mm512_fmadd_ps(wr, v2, s[r][2]);
            s[r][3] = _mm512_fmadd_ps(wr, v3, s[r][3]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 4; i++) {
            float sum = hsum((vf)s[r][i]);
            for (int k = j; k < cols; k++) sum += w[(size_t)r * cols + k] * xs[i][k];
            t[r][i] = sum;
        }
}
#endif

/* name: every weight row against the n rows, in groups of GROUP (then 3, 2 or 1). */
#define GEMM(name, type, SCALE)                                                                                \
    static void name(const type *w, const uint16_t *scale, const float *const *xs, float *const *ys, int n,   \
                     int rows, int cols) {                                                                     \
        float t[GROUP];                                                                                        \
        for (int r = 0; r < rows; r++) {                                                                       \
            const type *a = w + (size_t)r * cols;                                                              \
            int i = 0;                                                                                         \
            for (; i + GROUP <= n; i += GROUP) {                                                               \
                name##_dots(a, xs + i, t, cols, GROUP);                                                        \
                for (int g = 0; g < GROUP; g++) ys[i + g][r] = SCALE(t[g], r);                                 \
            }                                                                                                  \
            int left = n - i;                                                                                  \
            if (left == 3) name##_dots(a, xs + i, t, cols, 3);                                                 \
            if (left == 2) name##_dots(a, xs + i, t, cols, 2);                                                 \
            if (left == 1) name##_dots(a, xs + i, t, cols, 1);                                                 \
            for (int g = 0; g < left; g++) ys[i + g][r] = SCALE(t[g], r);                                      \
        }                                                                                                      \
    }

#define AS_IS(v) (v)
DOTS(gemm_f32, float, LOAD_F32, AS_IS)
GEMM(gemm_f32, float, NO_SCALE)
DOTS(gemm_i8, int8_t, LOAD_I8, AS_IS)
GEMM(gemm_i8, int8_t, ROW_SCALE)
DOTS(gemm_bf16, uint16_t, LOAD_BF16, bf16_to_f32)
GEMM(gemm_bf16, uint16_t, NO_SCALE)

/* 4-bit groups of 32 (W = 16: a group's low nibbles are its first 16 elements, its high nibbles the next 16). A
 * group's weights as floats are q * scale + (zero - 8 * scale), made once and used by every row. */
static inline __attribute__((always_inline)) void gemm_i4_dots(const uint8_t *row, const uint16_t *sc,
                                                                const uint16_t *ze, const float *const *xs,
                                                                float *t, int groups, const int G) {
    vf s0[GROUP], s1[GROUP];
    for (int i = 0; i < G; i++) s0[i] = s1[i] = (vf){0};
    for (int g = 0; g < groups; g++) {
        __builtin_prefetch(row + g * 16 + PREFETCH_BYTES, 0, 0);
        float a = bf16_to_f32(sc[g]), b = bf16_to_f32(ze[g]) - 8.0f * a;
        vf low, high;
        load_nibbles(row + g * 16, &low, &high);
        vf w0 = low * a + b, w1 = high * a + b;
        for (int i = 0; i < G; i++) {
            s0[i] += w0 * *(const vf *)(xs[i] + g * 32);
            s1[i] += w1 * *(const vf *)(xs[i] + g * 32 + 16);
        }
    }
    for (int i = 0; i < G; i++) t[i] = hsum(s0[i] + s1[i]);
}

static void gemm_i4(const uint8_t *w, const uint16_t *scale, const uint16_t *zero, const float *const *xs,
                    float *const *ys, int n, int rows, int cols) {
    int groups = cols / 32;
    float t[GROUP];
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = w + (size_t)r * groups * 16;
        const uint16_t *sc = scale + (size_t)r * groups, *ze = zero + (size_t)r * groups;
        int i = 0;
        for (; i + GROUP <= n; i += GROUP) {
            gemm_i4_dots(row, sc, ze, xs + i, t, groups, GROUP);
            for (int g = 0; g < GROUP; g++) ys[i + g][r] = t[g];
        }
        int left = n - i;
        if (left == 3) gemm_i4_dots(row, sc, ze, xs + i, t, groups, 3);
        if (left == 2) gemm_i4_dots(row, sc, ze, xs + i, t, groups, 2);
        if (left == 1) gemm_i4_dots(row, sc, ze, xs + i, t, groups, 1);
        for (int g = 0; g < left; g++) ys[i + g][r] = t[g];
    }
}

#if defined(__AVX512BF16__)
/* bfloat16 weights on a CPU with bfloat16 dot products (vdpbf16ps: 32 products a vector, summed in float32 pairs):
 * x is taken as bfloat16, which is exact in the modes that have bfloat16 weights (their activations are bfloat16
 * already: round_bf16). */
static inline __attribute__((always_inline)) void gemm_bf16_dot_dots(const uint16_t *a, const __m512bh *xb,
                                                                      int blocks, float *t, const int G) {
    __m512 s0[GROUP], s1[GROUP];
    for (int i = 0; i < G; i++) s0[i] = s1[i] = _mm512_setzero_ps();
    int b = 0;
    for (; b + 2 <= blocks; b += 2) {
        __builtin_prefetch((const char *)(a + 32 * b) + PREFETCH_BYTES, 0, 0);
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(a + 32 * b), w1 = (__m512bh)_mm512_loadu_si512(a + 32 * b + 32);
        for (int i = 0; i < G; i++) {
            s0[i] = _mm512_dpbf16_ps(s0[i], w0, xb[i * blocks + b]);
            s1[i] = _mm512_dpbf16_ps(s1[i], w1, xb[i * blocks + b + 1]);
        }
    }
    for (int i = 0; i < G; i++) {
        if (b < blocks) s0[i] = _mm512_dpbf16_ps(s0[i], (__m512bh)_mm512_loadu_si512(a + 32 * b), xb[i * blocks + b]);
        t[i] = hsum((vf)_mm512_add_ps(s0[i], s1[i]));
    }
}

static int gemm_bf16_dot(const uint16_t *w, const float *const *xs, float *const *ys, int n, int rows, int cols) {
    if (cols % 32) return 0;
    int blocks = cols / 32;
    float t[GROUP];
    __m512bh xb[n * blocks];  /* every row's x as bfloat16, on the stack (16 rows of 1536: 48 KB) */
    for (int i = 0; i < n; i++)
        for (int b = 0; b < blocks; b++)
            xb[i * blocks + b] = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xs[i] + 32 * b + 16), _mm512_loadu_ps(xs[i] + 32 * b));
    for (int r = 0; r < rows; r++) {
        const uint16_t *a = w + (size_t)r * cols;
        int i = 0;
        for (; i + GROUP <= n; i += GROUP) {
            gemm_bf16_dot_dots(a, xb + i * blocks, blocks, t, GROUP);
            for (int g = 0; g < GROUP; g++) ys[i + g][r] = t[g];
        }
        int left = n - i;
        if (left == 3) gemm_bf16_dot_dots(a, xb + i * blocks, blocks, t, 3);
        if (left == 2) gemm_bf16_dot_dots(a, xb + i * blocks, blocks, t, 2);
        if (left == 1) gemm_bf16_dot_dots(a, xb + i * blocks, blocks, t, 1);
        for (int g = 0; g < left; g++) ys[i + g][r] = t[g];
    }
    return 1;
}
#else
static int gemm_bf16_dot(const uint16_t *w, const float *const *xs, float *const *ys, int n, int rows, int cols) {
    (void)w; (void)xs; (void)ys; (void)n; (void)rows; (void)cols;
    return 0;
}
#endif

/* One row of x (a lone learner): the same sums in the same order as GEMM's for a group of one, in loops of their
 * own (GEMM's indirections cost 2-5% on one row). */
#define GEMV(name, type, LOAD, SCALE)                                                                          \
    static void name(const type *w, const uint16_t *scale, const float *x, float *y, int rows, int cols) {    \
        int body = cols - cols % W;                                                                            \
        for (int r = 0; r < rows; r++) {                                                                       \
            const type *a = w + (size_t)r * cols;                                                              \
            vf s0 = {0};                                                                                       \
            int j = 0;                                                                                         \
            for (; j < body; j += W) {                                                                         \
                __builtin_prefetch((const char *)(a + j) + PREFETCH_BYTES, 0, 0);                              \
                s0 += LOAD(a + j) * *(const vf *)(x + j);                                                      \
            }                                                                                                  \
            float t = hsum(s0);                                                                                \
            for (; j < cols; j++) t += SCALAR(a[j]) * x[j];                                                    \
            y[r] = SCALE(t, r);                                                                                \
        }                                                                                                      \
    }

#define SCALAR(v) (v)
GEMV(gemv_f32, float, LOAD_F32, NO_SCALE)
GEMV(gemv_i8, int8_t, LOAD_I8, ROW_SCALE)
#undef SCALAR
#define SCALAR(v) bf16_to_f32(v)
GEMV(gemv_bf16, uint16_t, LOAD_BF16, NO_SCALE)
#undef SCALAR

#if defined(__AVX512BF16__)
/* bfloat16 weights on a CPU with bfloat16 dot products (vdpbf16ps: 32 products a vector, summed in float32 pairs):
 * x is taken as bfloat16, which is exact in the modes that have bfloat16 weights (their activations are bfloat16
 * already: round_bf16). */
static void gemv_bf16_dot(const uint16_t *w, const float *x, float *y, int rows, int cols) {
    int blocks = cols / 32;
    __m512bh xb[blocks];
    for (int b = 0; b < blocks; b++) xb[b] = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 32 * b + 16), _mm512_loadu_ps(x + 32 * b));
    for (int r = 0; r < rows; r++) {
        const uint16_t *a = w + (size_t)r * cols;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        int b = 0;
        for (; b + 2 <= blocks; b += 2) {
            __builtin_prefetch((const char *)(a + 32 * b) + PREFETCH_BYTES, 0, 0);
            s0 = _mm512_dpbf16_ps(s0, (__m512bh)_mm512_loadu_si512(a + 32 * b), xb[b]);
            s1 = _mm512_dpbf16_ps(s1, (__m512bh)_mm512_loadu_si512(a + 32 * b + 32), xb[b + 1]);
        }
        if (b < blocks) s0 = _mm512_dpbf16_ps(s0, (__m512bh)_mm512_loadu_si512(a + 32 * b), xb[b]);
        y[r] = hsum((vf)_mm512_add_ps(s0, s1));
    }
}
#define BF16_DOT(w, x, y, rows, cols) ((cols) % 32 == 0 ? (gemv_bf16_dot(w, x, y, rows, cols), 1) : 0)
#else
#define BF16_DOT(w, x, y, rows, cols) 0
#endif

/* 4-bit groups of 32 (W = 16: a group's low nibbles are its first 16 elements, its high nibbles the next 16). Each
 * group's weights as floats are q * scale + (zero - 8 * scale): two FMAs a half-group, one sum per row. */
static void gemv_i4(const uint8_t *w, const uint16_t *scale, const uint16_t *zero, const float *x, float *y, int rows,
                    int cols) {
    int groups = cols / 32;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = w + (size_t)r * groups * 16;
        const uint16_t *sc = scale + (size_t)r * groups, *ze = zero + (size_t)r * groups;
        vf s0 = {0}, s1 = {0};
        for (int g = 0; g < groups; g++) {
            __builtin_prefetch(row + g * 16 + PREFETCH_BYTES, 0, 0);
            float a = bf16_to_f32(sc[g]), b = bf16_to_f32(ze[g]) - 8.0f * a;
            vf low, high;
            load_nibbles(row + g * 16, &low, &high);
            s0 += (low * a + b) * *(const vf *)(x + g * 32);
            s1 += (high * a + b) * *(const vf *)(x + g * 32 + 16);
        }
        y[r] = hsum(s0 + s1);
    }
}

/* float32 for n > 1 rows: two weight rows against each group of four x rows where the CPU has AVX-512, else (and
 * for the rows left over) gemm_f32. */
static void gemm_f32_rows(const float *w, const float *const *xs, float *const *ys, int n, int rows, int cols) {
#if defined(__AVX512F__)
    int full = n < 8 ? 0 : n - n % GROUP, quads = rows - rows % 4;  /* up to 8 rows: gemm_f32 streams better */
    float t[4][4];
    /* while the later groups of x read a block from L2, the next block is fetched from memory, a slice a call */
    size_t block_bytes = (size_t)BLOCK_ROWS * cols * sizeof(float);
    size_t slice = full > GROUP ? block_bytes / ((size_t)(full / GROUP - 1) * (BLOCK_ROWS / 4)) + 64 : 0;
    for (int r0 = 0; r0 < quads; r0 += BLOCK_ROWS) {  /* a block of weight rows: from memory once, then from L2 */
        int end = r0 + BLOCK_ROWS < quads ? r0 + BLOCK_ROWS : quads;
        const char *next = (const char *)(w + (size_t)end * cols), *stop = (const char *)(w + (size_t)rows * cols);
        for (int i = 0; i < full; i += GROUP)  /* a group of x rows: in L1 for the whole block */
            for (int r = r0; r < end; r += 4) {
                for (size_t k = 0; i > 0 && k < slice && next < stop; k += 64, next += 64) __builtin_prefetch(next, 0, 2);
                f32_dots_4x4(w + (size_t)r * cols, cols, xs + i, t);
                for (int q = 0; q < 4; q++)
                    for (int g = 0; g < GROUP; g++) ys[i + g][r + q] = t[q][g];
            }
    }
    if (full && quads < rows) {  /* the last weight rows (fewer than four), for the full groups */
        float *last[full];
        for (int i = 0; i < full; i++) last[i] = ys[i] + quads;
        gemm_f32(w + (size_t)quads * cols, NULL, xs, last, full, rows - quads, cols);
    }
    if (full < n)  /* the rows of x left over, every weight row */
        gemm_f32(w, NULL, xs + full, ys + full, n - full, rows, cols);
#else
    gemm_f32(w, NULL, xs, ys, n, rows, cols);
#endif
}

/* ys[i][r] = (m xs[i])[r] for the n rows and the weight rows r0 <= r < r1 (a chunk of them: pool.h). A row's sums
 * do not depend on the rows beside it, so any split gives the numbers of the whole. */
static void product_range(const Matrix *m, const float *const *xs, float *const *ys, int n, int r0, int r1) {
    int rows = r1 - r0, cols = m->cols, groups = cols / 32;
    const uint16_t *scale = m->scale, *zero = m->zero;
    size_t at = (size_t)r0 * cols;
    if (n == 1) {
        const float *x = xs[0];
        float *y = ys[0] + r0;
        switch (m->kind) {
        case K_F32: gemv_f32((const float *)m->data + at, NULL, x, y, rows, cols); break;
        case K_BF16:
            if (!BF16_DOT((const uint16_t *)m->data + at, x, y, rows, cols))
                gemv_bf16((const uint16_t *)m->data + at, NULL, x, y, rows, cols);
            break;
        case K_I8: gemv_i8((const int8_t *)m->data + at, scale + r0, x, y, rows, cols); break;
        case K_I4:
            gemv_i4((const uint8_t *)m->data + at / 2, scale + (size_t)r0 * groups, zero + (size_t)r0 * groups, x, y,
                    rows, cols);
            break;
        }
        return;
    }
    float *out[n];
    for (int i = 0; i < n; i++) out[i] = ys[i] + r0;
    float *const *o = out;
    switch (m->kind) {
    case K_F32: gemm_f32_rows((const float *)m->data + at, xs, o, n, rows, cols); break;
    case K_BF16:
        if (!gemm_bf16_dot((const uint16_t *)m->data + at, xs, o, n, rows, cols))
            gemm_bf16((const uint16_t *)m->data + at, NULL, xs, o, n, rows, cols);
        break;
    case K_I8: gemm_i8((const int8_t *)m->data + at, scale + r0, xs, o, n, rows, cols); break;
    case K_I4:
        gemm_i4((const uint8_t *)m->data + at / 2, scale + (size_t)r0 * groups, zero + (size_t)r0 * groups, xs, o, n,
                rows, cols);
        break;
    }
}
