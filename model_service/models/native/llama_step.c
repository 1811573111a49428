/* One decode step of a Llama-family model for one row, on a CPU: what transformers' LlamaForCausalLM computes for
 * one new token with a KV cache, written as one C function so that the step costs the weights it reads and not
 * ~700 operators launched from Python (model_service/models/native_step.py builds and calls it).
 *
 * Portable C with GCC/Clang vector extensions: compiled on the host's own machine with -O3 -march=native, the
 * products use whatever vector unit the CPU has (AVX-512, AVX2, NEON). Its products share their weight rows among
 * ntp_threads' threads (pool.h), with the same numbers at any count.
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

/* The sum of a vector's lanes as a tree: lane i plus lane i + 8, then i + 4, i + 2, i + 1 (the same pairs in
 * either branch, so the same sum). */
static inline float hsum(vf v) {
#if defined(__AVX512F__)
    __m512 z = (__m512)v;
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(z), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
#else
    float a[W];
    memcpy(a, &v, sizeof a);
    for (int n = W / 2; n > 0; n /= 2)
        for (int i = 0; i < n; i++) a[i] += a[i + n];
    return a[0];
#endif
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

#include "products.h"
#include "pool.h"
#include "rank.h"

/* One product on its own (tests, and the benchmark's kernel timing). */
void ntp_product(const Matrix *m, const float *x, float *y) { product_rows(m, &x, &y, 1); }

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

/* e^x for W lanes (Cephes' expf: x = k ln 2 + r, a degree-6 polynomial in r, times 2^k; within 2 ulp of expf). */
static inline vf vexp(vf x) {
    for (int i = 0; i < W; i++) x[i] = x[i] < -87.3f ? -87.3f : x[i] > 88.376f ? 88.376f : x[i];  /* 2^k stays a normal float */
    vf k = x * 1.44269504088896341f;
    for (int i = 0; i < W; i++) k[i] = __builtin_floorf(k[i] + 0.5f);
    vf r = x - k * 0.693359375f + k * 2.12194440e-4f;
    vf p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    vi bits = (__builtin_convertvector(k, vi) + 127) << 23;
    return p * (vf)bits;
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
        int t = 0;
        for (; t + W <= length; t += W) {  /* e^(s - top), W at a time */
            vf e = vexp(*(vf *)(scores + t) - top);
            *(vf *)(scores + t) = e;
        }
        for (; t < length; t++) scores[t] = expf(scores[t] - top);
        for (t = 0; t < length; t++) total += scores[t];
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

/* A row's scratch: the residual row, a normalised row, q, k, v, a layer's output, gate, up, scores, cos, sin. */
typedef struct {
    float *h, *x, *q, *k, *v, *out, *gate, *up, *scores, *cos_, *sin_;
} Scratch;

static Scratch carve(const Model *m) {
    int wide = widest(m), qn = m->n_heads * m->head_dim, kvn = m->n_kv * m->head_dim;
    Scratch s;
    s.h = m->scratch;
    s.x = s.h + m->hidden;
    s.q = s.x + wide;
    s.k = s.q + qn;
    s.v = s.k + kvn;
    s.out = s.v + kvn;
    s.gate = s.out + wide;
    s.up = s.gate + m->inter;
    s.scores = s.up + m->inter;
    s.cos_ = s.scores + m->capacity;
    s.sin_ = s.cos_ + m->head_dim / 2;
    return s;
}

/* The rotary angles of one position, transformers' way: float32 position times inv_freq, cos and sin (bfloat16). */
static void angles(const Model *m, int position, Scratch *s) {
    for (int i = 0; i < m->head_dim / 2; i++) {
        float angle = (float)position * m->inv_freq[i];
        s->cos_[i] = cosf(angle) * m->rope_scaling;
        s->sin_[i] = sinf(angle) * m->rope_scaling;
        if (m->round_bf16) { s->cos_[i] = round_bf16(s->cos_[i]); s->sin_[i] = round_bf16(s->sin_[i]); }
    }
}

/* SwiGLU: silu(gate) * up, transformers' rounding in the bf16 modes (gate and up are bfloat16 there). */
static void swiglu(const float *gate, const float *up, float *out, int n, int bf) {
    int j = 0;
    if (!bf)
        for (; j + W <= n; j += W) {
            vf g = *(const vf *)(gate + j);
            *(vf *)(out + j) = g / (1.0f + vexp(-g)) * *(const vf *)(up + j);
        }
    for (; j < n; j++) {
        float g = bf ? round_bf16(gate[j]) : gate[j], u = bf ? round_bf16(up[j]) : up[j];
        float act = g / (1.0f + expf(-g));
        out[j] = bf ? round_bf16(round_bf16(act) * u) : act * u;
    }
}

/* One decoder layer for the n rows: each row's norms, rotary, cache and attention its own; the products shared. */
static void layer(const Model *const *ms, int n, int l, const int32_t *positions, Scratch *s, const float **xs,
                  float **ys) {
    const Model *m = ms[0];
    const Matrix *w = m->mats + 7 * l;
    int H = m->hidden, d = m->head_dim, bf = m->round_bf16, qn = m->n_heads * d, kvn = m->n_kv * d;
    float *qs[n], *ks[n], *vs[n];
    for (int i = 0; i < n; i++) {
        rms_norm(s[i].h, m->norms[2 * l], s[i].x, H, m->eps, bf);
        xs[i] = s[i].x, qs[i] = s[i].q, ks[i] = s[i].k, vs[i] = s[i].v;
    }
    product_rows(&w[0], xs, qs, n);
    product_rows(&w[1], xs, ks, n);
    product_rows(&w[2], xs, vs, n);
    for (int i = 0; i < n; i++) {
        const Model *r = ms[i];
        round_all(s[i].q, qn, bf); round_all(s[i].k, kvn, bf); round_all(s[i].v, kvn, bf);
        rope(s[i].q, m->n_heads, d, s[i].cos_, s[i].sin_, bf);
        rope(s[i].k, m->n_kv, d, s[i].cos_, s[i].sin_, bf);
        for (int g = 0; g < m->n_kv; g++) {
            memcpy(r->kcache[l] + ((size_t)g * r->capacity + positions[i]) * d, s[i].k + g * d, sizeof(float) * d);
            memcpy(r->vcache[l] + ((size_t)g * r->capacity + positions[i]) * d, s[i].v + g * d, sizeof(float) * d);
        }
        attend(r, l, s[i].q, s[i].x, s[i].scores, positions[i] + 1);
        ys[i] = s[i].out;
    }
    product_rows(&w[3], xs, ys, n);
    for (int i = 0; i < n; i++) {
        round_all(s[i].out, H, bf);
        add(s[i].h, s[i].out, H, bf);
        rms_norm(s[i].h, m->norms[2 * l + 1], s[i].x, H, m->eps, bf);
        qs[i] = s[i].gate, ks[i] = s[i].up;
    }
    product_rows(&w[4], xs, qs, n);
    product_rows(&w[5], xs, ks, n);
    for (int i = 0; i < n; i++) swiglu(s[i].gate, s[i].up, s[i].x, m->inter, bf);
    product_rows(&w[6], xs, ys, n);
    for (int i = 0; i < n; i++) {
        round_all(s[i].out, H, bf);
        add(s[i].h, s[i].out, H, bf);
    }
}

/* One decode step of n rows, each with its own Model record (its own KV cache and scratch; the weights are the
 * first's): row i feeds tokens[i] at positions[i] (= its cache's length: a row has no pads), writes its keys and
 * values into that column of its cache and its logits into logits[i * vocab ...]. A row's numbers do not depend on
 * the others (products.h). Returns 0, or -1 - i when row i's position is outside its cache or its token outside
 * the vocabulary. */
int ntp_step_rows(const Model *const *ms, int32_t n, const int32_t *tokens, const int32_t *positions, float *logits) {
    const Model *m = ms[0];
    Scratch s[n];
    const float *xs[n];
    float *ys[n];
    for (int i = 0; i < n; i++)
        if (positions[i] < 0 || positions[i] >= ms[i]->capacity || tokens[i] < 0 || tokens[i] >= m->embed.rows)
            return -1 - i;
    pool_begin();
    for (int i = 0; i < n; i++) {
        s[i] = carve(ms[i]);
        angles(m, positions[i], &s[i]);
        embed_row(&m->embed, tokens[i], s[i].h);
    }
    for (int l = 0; l < m->n_layers; l++) layer(ms, n, l, positions, s, xs, ys);
    for (int i = 0; i < n; i++) {
        rms_norm(s[i].h, m->final_norm, s[i].x, m->hidden, m->eps, m->round_bf16);
        xs[i] = s[i].x;
        ys[i] = logits + (size_t)i * m->lm_head.rows;
    }
    product_rows(&m->lm_head, xs, ys, n);
    pool_end();
    round_all(logits, n * m->lm_head.rows, m->round_bf16);
    return 0;
}

/* One row's step (ntp_step_rows of one). */
int ntp_step(const Model *m, int32_t token, int32_t position, float *logits) {
    return ntp_step_rows(&m, 1, &token, &position, logits) == 0 ? 0 : -1;
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
