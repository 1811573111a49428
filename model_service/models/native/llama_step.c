/* One decode step of a Llama-family model for one row, on a CPU: what transformers' LlamaForCausalLM computes for
 * one new token with a KV cache, written as one C function so that the step costs the weights it reads and not
 * ~700 operators launched from Python (model_service/models/native_step.py builds and calls it).
 *
 * Portable C with GCC/Clang vector extensions: compiled on the host's own machine with -O3 -march=native, the
 * products use whatever vector unit the CPU has (AVX-512, AVX2, NEON). One thread.
 *
 * Weights come as Matrix records of four kinds:
 *   K_F32   float32 (rows, cols)
 *   K_BF16  bfloat16 (rows, cols)
 *   K_I8    int8 (rows, cols) and one bfloat16 scale per row: y = (x . q) * scale   (torch's _weight_int8pack_mm)
 *   K_I4    4-bit in groups of 32 along a row, 16 bytes a group: byte j holds element j in its low nibble and
 *           element j + 16 in its high one (llama.cpp's Q4 layout); per group a bfloat16 scale and zero:
 *           w = (q - 8) * scale + zero   (precision.Int4Linear's numbers)
 * round_bf16 = 1 rounds the activations to bfloat16 (round to nearest even) where transformers' bfloat16 model
 * produces a bfloat16 tensor; 0 keeps them float32 (the float32 model). Every sum is float32.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

enum { K_F32 = 0, K_BF16 = 1, K_I8 = 2, K_I4 = 3 };

typedef struct {
    const void *data;
    const void *scale;  /* K_I8: bfloat16 per row; K_I4: bfloat16 (rows, cols/32) */
    const void *zero;   /* K_I4: bfloat16 (rows, cols/32) */
    int32_t kind, rows, cols, group;
} Matrix;

typedef struct {
    int32_t n_layers, hidden, inter, n_heads, n_kv, head_dim, vocab, capacity, round_bf16;
    float eps, scaling, rope_scaling;
    const float *inv_freq;    /* head_dim / 2 */
    Matrix embed, lm_head;
    const float *final_norm;  /* hidden */
    const float *const *norms;  /* per layer: input, post-attention (hidden each) */
    const Matrix *mats;       /* per layer: q, k, v, o, gate, up, down */
    float *const *kcache;     /* per layer (n_kv, capacity, head_dim) */
    float *const *vcache;
    float *scratch;           /* ntp_scratch_floats() floats */
} Model;

#define W 16
typedef float vf __attribute__((vector_size(W * 4), aligned(4)));
typedef int32_t vi __attribute__((vector_size(W * 4), aligned(4)));
typedef uint32_t vu __attribute__((vector_size(W * 4), aligned(4)));
typedef uint16_t vh __attribute__((vector_size(W * 2), aligned(2)));

/* The sum of a vector's lanes as a tree (halves, then quarters...): a few adds, not 16 in a chain. */
static inline float hsum(vf v) {
    float a[W];
    memcpy(a, &v, sizeof a);
    for (int n = W / 2; n > 0; n /= 2)
        for (int i = 0; i < n; i++) a[i] += a[i + n];
    return a[0];
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float round_bf16(float f) { /* c10::BFloat16's round to nearest even */
    uint32_t u;
    memcpy(&u, &f, 4);
    if (f != f) return f;
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

static inline void round_all(float *x, int n, int on) {
    if (on)
        for (int i = 0; i < n; i++) x[i] = round_bf16(x[i]);
}

static inline vf load_bf16(const uint16_t *p) {
    vu u = __builtin_convertvector(*(const vh *)p, vu) << 16;
    return (vf)u;
}

/* 16 int8 as floats; 16 bytes of 4-bit pairs as their low and high nibbles in floats. With the vector unit's own
 * instructions where there is one (GCC 12 turns a generic char-to-float conversion into 16 scalar ones). */
static inline vf load_i8(const int8_t *p) {
#if defined(__AVX512F__)
    return (vf)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
#else
    vi v;
    for (int i = 0; i < W; i++) v[i] = p[i];
    return __builtin_convertvector(v, vf);
#endif
}

static inline void load_nibbles(const uint8_t *p, vf *low, vf *high) {
#if defined(__AVX512F__)
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    *low = (vf)_mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(15)));
    *high = (vf)_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
#else
    vi l, h;
    for (int i = 0; i < W; i++) { l[i] = p[i] & 15; h[i] = p[i] >> 4; }
    *low = __builtin_convertvector(l, vf);
    *high = __builtin_convertvector(h, vf);
#endif
}

/* How far ahead of the products the weights are prefetched (2-3 KB: +7% read rate on this project's EPYC). */
#define PREFETCH_BYTES 3072

/* One row after another, two sums per row: the matrix is read as one sequential stream, which the hardware
 * prefetcher follows at the memory's bandwidth (measured on this project's EPYC: 39 GB/s on one core, where eight
 * rows side by side read at 32). LOAD(p) reads W weights as floats; SCALAR(v) one. */
#define GEMV(name, type, LOAD, SCALE)                                                                          \
    static void name(const type *w, const uint16_t *scale, const float *x, float *y, int rows, int cols) {    \
        int pairs = cols - cols % (2 * W), body = cols - cols % W;                                             \
        for (int r = 0; r < rows; r++) {                                                                       \
            const type *a = w + (size_t)r * cols;                                                              \
            vf s0 = {0}, s1 = {0};                                                                             \
            int j = 0;                                                                                         \
            for (; j < pairs; j += 2 * W) {                                                                    \
                __builtin_prefetch((const char *)(a + j) + PREFETCH_BYTES, 0, 0);                              \
                s0 += LOAD(a + j) * *(const vf *)(x + j);                                                      \
                s1 += LOAD(a + j + W) * *(const vf *)(x + j + W);                                              \
            }                                                                                                  \
            for (; j < body; j += W) s0 += LOAD(a + j) * *(const vf *)(x + j);                                \
            float t = hsum(s0 + s1);                                                                           \
            for (; j < cols; j++) t += SCALAR(a[j]) * x[j];                                                    \
            y[r] = SCALE(t, r);                                                                                \
        }                                                                                                      \
    }

#define LOAD_F32(p) (*(const vf *)(p))
#define LOAD_BF16(p) load_bf16(p)
#define LOAD_I8(p) load_i8(p)
#define NO_SCALE(t, row) (t)
#define ROW_SCALE(t, row) ((t) * bf16_to_f32(scale[row]))

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

static void product(const Matrix *m, const float *x, float *y) {
    switch (m->kind) {
    case K_F32: gemv_f32(m->data, NULL, x, y, m->rows, m->cols); break;
    case K_BF16:
        if (!BF16_DOT(m->data, x, y, m->rows, m->cols)) gemv_bf16(m->data, NULL, x, y, m->rows, m->cols);
        break;
    case K_I8: gemv_i8(m->data, m->scale, x, y, m->rows, m->cols); break;
    case K_I4: gemv_i4(m->data, m->scale, m->zero, x, y, m->rows, m->cols); break;
    }
}

/* One product on its own (tests, and the benchmark's kernel timing). */
void ntp_product(const Matrix *m, const float *x, float *y) { product(m, x, y); }

/* transformers' LlamaRMSNorm: float32 statistics, the weight times the normalised row (rounded first in bf16). */
static void rms_norm(const float *x, const float *weight, float *out, int n, float eps, int bf16) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / n + eps);
    for (int i = 0; i < n; i++) {
        float v = x[i] * inv;
        out[i] = bf16 ? round_bf16(weight[i] * round_bf16(v)) : weight[i] * v;
    }
}

/* Rotary embedding, transformers' rotate_half layout: pairs (i, i + d/2). */
static void rope(float *v, int heads, int d, const float *cos_, const float *sin_, int bf16) {
    int half = d / 2;
    for (int h = 0; h < heads; h++) {
        float *p = v + h * d;
        for (int i = 0; i < half; i++) {
            float a = p[i], b = p[i + half];
            if (bf16) {
                float c = cos_[i], s = sin_[i];
                p[i] = round_bf16(round_bf16(a * c) + round_bf16(-b * s));
                p[i + half] = round_bf16(round_bf16(b * c) + round_bf16(a * s));
            } else {
                p[i] = a * cos_[i] - b * sin_[i];
                p[i + half] = b * cos_[i] + a * sin_[i];
            }
        }
    }
}

/* scores[t] = q . k[t] * scale for `length` keys of d floats: four keys at a time (four independent sums: the
 * adds do not wait on each other), in vectors where d is a multiple of W (64 in SmolLM2). */
static inline void key_scores(const float *q, const float *k, float *scores, int length, int d, float scale) {
    int t = 0;
    if (d % W == 0)
        for (; t + 4 <= length; t += 4) {
            const float *k0 = k + (size_t)t * d;
            vf a = {0}, b = {0}, c = {0}, e = {0};
            for (int i = 0; i < d; i += W) {
                vf qv = *(const vf *)(q + i);
                a += qv * *(const vf *)(k0 + i);
                b += qv * *(const vf *)(k0 + d + i);
                c += qv * *(const vf *)(k0 + 2 * d + i);
                e += qv * *(const vf *)(k0 + 3 * d + i);
            }
            scores[t] = hsum(a) * scale;
            scores[t + 1] = hsum(b) * scale;
            scores[t + 2] = hsum(c) * scale;
            scores[t + 3] = hsum(e) * scale;
        }
    for (; t < length; t++) {
        float sum = 0.0f;
        for (int i = 0; i < d; i++) sum += q[i] * k[(size_t)t * d + i];
        scores[t] = sum * scale;
    }
}

/* o = sum over t of p[t] * v[t] (v: `length` rows of d): a vector of o at a time, in four sums kept in registers. */
static inline void weighted_sum(float *o, const float *p, const float *v, int length, int d) {
    if (d % W == 0) {
        for (int i = 0; i < d; i += W) {
            vf a = {0}, b = {0}, c = {0}, e = {0};
            int t = 0;
            for (; t + 4 <= length; t += 4) {
                const float *v0 = v + (size_t)t * d + i;
                a += p[t] * *(const vf *)v0;
                b += p[t + 1] * *(const vf *)(v0 + d);
                c += p[t + 2] * *(const vf *)(v0 + 2 * d);
                e += p[t + 3] * *(const vf *)(v0 + 3 * d);
            }
            for (; t < length; t++) a += p[t] * *(const vf *)(v + (size_t)t * d + i);
            *(vf *)(o + i) = (a + b) + (c + e);
        }
        return;
    }
    memset(o, 0, sizeof(float) * d);
    for (int t = 0; t < length; t++)
        for (int i = 0; i < d; i++) o[i] += p[t] * v[(size_t)t * d + i];
}

static void attend(const Model *m, int layer, const float *q, float *out, float *scores, int length) {
    int d = m->head_dim, group = m->n_heads / m->n_kv;
    const float *kc = m->kcache[layer], *vc = m->vcache[layer];
    for (int h = 0; h < m->n_heads; h++) {
        const float *qh = q + h * d, *k = kc + (size_t)(h / group) * m->capacity * d;
        const float *v = vc + (size_t)(h / group) * m->capacity * d;
        key_scores(qh, k, scores, length, d, m->scaling);
        float top = -INFINITY;
        for (int t = 0; t < length; t++) top = scores[t] > top ? scores[t] : top;
        float total = 0.0f;
        for (int t = 0; t < length; t++) total += (scores[t] = expf(scores[t] - top));
        float *o = out + h * d, inv = 1.0f / total;
        for (int t = 0; t < length; t++) scores[t] *= inv;
        weighted_sum(o, scores, v, length, d);
    }
    round_all(out, m->n_heads * d, m->round_bf16);
}

static int widest(const Model *m) {
    int n = m->hidden > m->inter ? m->hidden : m->inter;
    int qn = m->n_heads * m->head_dim;
    return n > qn ? n : qn;
}

/* The floats of scratch a step needs at this capacity. */
int64_t ntp_scratch_floats(const Model *m) {
    int64_t wide = widest(m);
    return (int64_t)m->hidden + 2 * wide + (int64_t)m->n_heads * m->head_dim + 2 * (int64_t)m->n_kv * m->head_dim
           + 2 * (int64_t)m->inter + m->capacity + m->head_dim;
}

static void embed_row(const Matrix *e, int token, float *h) {
    if (e->kind == K_F32)
        memcpy(h, (const float *)e->data + (size_t)token * e->cols, sizeof(float) * e->cols);
    else
        for (int i = 0; i < e->cols; i++) h[i] = bf16_to_f32(((const uint16_t *)e->data)[(size_t)token * e->cols + i]);
}

static void add(float *h, const float *x, int n, int bf16) {
    for (int i = 0; i < n; i++) h[i] = bf16 ? round_bf16(h[i] + x[i]) : h[i] + x[i];
}

/* One decode step: the token at `position` (= the cache's length: one row, no pads). Writes its keys and values
 * into column `position` of every layer's cache and the vocabulary's logits into `logits`. Returns 0, or -1 when
 * the position is outside the cache or the token outside the vocabulary. */
int ntp_step(const Model *m, int32_t token, int32_t position, float *logits) {
    if (position < 0 || position >= m->capacity || token < 0 || token >= m->embed.rows) return -1;
    int H = m->hidden, d = m->head_dim, wide = widest(m), bf = m->round_bf16;
    int qn = m->n_heads * d, kvn = m->n_kv * d, half = d / 2;
    /* the scratch: the residual row, a normalised row, q, k, v, a layer's output, gate, up, scores, cos, sin */
    float *h = m->scratch, *x = h + H, *q = x + wide, *k = q + qn, *v = k + kvn, *tmp = v + kvn;
    float *gate = tmp + wide, *up = gate + m->inter, *scores = up + m->inter;
    float *cos_ = scores + m->capacity, *sin_ = cos_ + half;
    for (int i = 0; i < half; i++) {
        float angle = (float)position * m->inv_freq[i];
        cos_[i] = cosf(angle) * m->rope_scaling;
        sin_[i] = sinf(angle) * m->rope_scaling;
        if (bf) { cos_[i] = round_bf16(cos_[i]); sin_[i] = round_bf16(sin_[i]); }
    }
    embed_row(&m->embed, token, h);
    for (int l = 0; l < m->n_layers; l++) {
        const Matrix *w = m->mats + 7 * l;
        rms_norm(h, m->norms[2 * l], x, H, m->eps, bf);
        product(&w[0], x, q);
        product(&w[1], x, k);
        product(&w[2], x, v);
        round_all(q, qn, bf); round_all(k, kvn, bf); round_all(v, kvn, bf);
        rope(q, m->n_heads, d, cos_, sin_, bf);
        rope(k, m->n_kv, d, cos_, sin_, bf);
        for (int g = 0; g < m->n_kv; g++) {
            memcpy(m->kcache[l] + ((size_t)g * m->capacity + position) * d, k + g * d, sizeof(float) * d);
            memcpy(m->vcache[l] + ((size_t)g * m->capacity + position) * d, v + g * d, sizeof(float) * d);
        }
        attend(m, l, q, x, scores, position + 1);
        product(&w[3], x, tmp);
        round_all(tmp, H, bf);
        add(h, tmp, H, bf);
        rms_norm(h, m->norms[2 * l + 1], x, H, m->eps, bf);
        product(&w[4], x, gate);
        product(&w[5], x, up);
        for (int i = 0; i < m->inter; i++) {
            float g = bf ? round_bf16(gate[i]) : gate[i], u = bf ? round_bf16(up[i]) : up[i];
            float act = g / (1.0f + expf(-g));
            x[i] = bf ? round_bf16(round_bf16(act) * u) : act * u;
        }
        product(&w[6], x, tmp);
        round_all(tmp, H, bf);
        add(h, tmp, H, bf);
    }
    rms_norm(h, m->final_norm, x, H, m->eps, bf);
    product(&m->lm_head, x, logits);
    round_all(logits, m->lm_head.rows, bf);
    return 0;
}

/* The layout of Model as this build sees it, for the caller to check against its own (sizeof, then the offsets
 * of the last fields). */
int64_t ntp_layout(int which) {
    switch (which) {
    case 0: return sizeof(Model);
    case 1: return sizeof(Matrix);
    case 2: return (int64_t)__builtin_offsetof(Model, scratch);
    case 3: return (int64_t)__builtin_offsetof(Model, lm_head);
    default: return -1;
    }
}
