/* The sampler's ranking window in C (model_service/sampling/window.py: ranked_window): each row's `width` best
 * token ids, most probable first, ties ranked by the lower id. The ids need no arithmetic, only comparisons.
 *
 * Per row: (1) the maxima of blocks of the row, at least `width` blocks (about 4 x width): `width` of them are at
 * least their width-th largest, t, so at least `width` logits are >= t; (2) the logits >= t, read only in the blocks
 * whose maximum is: a few more than `width` (all of them where most are equal, as a row of bans' -inf); (3) those
 * sorted, value down, id up, and the first `width` kept. ~15 us a row of 49k logits; torch's topk and its stable
 * sorts took 70-140 us, which a room of 16 paid every step. */
#include <stdlib.h>
#include <string.h>

typedef struct {
    float value;
    int32_t id;
} Ranked;

static inline int before(Ranked a, Ranked b) { return a.value > b.value || (a.value == b.value && a.id < b.id); }

/* v[0..n) sorted value down, id up (a quicksort with the comparison inlined; insertion below 16). */
static void sort_ranked(Ranked *v, int n) {
    while (n > 16) {
        Ranked pivot = v[n / 2];
        int i = 0, j = n - 1;
        while (i <= j) {
            while (before(v[i], pivot)) i++;
            while (before(pivot, v[j])) j--;
            if (i <= j) {
                Ranked t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (j + 1 < n - i) { /* the smaller side by recursion, the larger in this loop */
            sort_ranked(v, j + 1);
            v += i;
            n -= i;
        } else {
            sort_ranked(v + i, n - i);
            n = j + 1;
        }
    }
    for (int i = 1; i < n; i++) {
        Ranked t = v[i];
        int j = i - 1;
        for (; j >= 0 && before(t, v[j]); j--) v[j + 1] = v[j];
        v[j + 1] = t;
    }
}

/* The k-th largest (k >= 1) of v[0..n), v reordered (Hoare's selection). */
static float kth_largest(float *v, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return v[want];
    }
    return v[want];
}

/* One row: x (vocab) float32 -> out (width) int64 ids. `maxima`, `picked`: room for vocab floats each, `found`: for
 * vocab Ranked.
 * Returns 0, or -1 where a logit is NaN (the caller ranks the row its own way). */
static int rank_row(const float *x, int32_t vocab, int32_t width, float *maxima, float *picked, Ranked *found,
                    int64_t *out) {
    /* (1) blocks of g logits: block (group, lane) holds x[W * (group * g + j) + lane] for j < g, so one group's
     * maxima are one vector (no sum across lanes); the logits past the last whole group are blocks of one */
    int32_t g = vocab / (4 * width) < 1 ? 1 : vocab / (4 * width), groups = vocab / (W * g), blocks = 0;
    vi nan = {0};
    for (int32_t group = 0; group < groups; group++) {
        const float *p = x + (size_t)group * g * W;
        vf most, v;
        memcpy(&most, p, sizeof most);
        nan |= most != most;
        for (int32_t j = 1; j < g; j++) {
            memcpy(&v, p + j * W, sizeof v);
            nan |= v != v;
            vi more = v > most;
            most = (vf)(((vi)v & more) | ((vi)most & ~more));
        }
        memcpy(maxima + blocks, &most, sizeof most);
        blocks += W;
    }
    for (int k = 0; k < W; k++)
        if (nan[k]) return -1;
    for (int32_t i = groups * g * W; i < vocab; i++) {
        if (x[i] != x[i]) return -1;
        maxima[blocks++] = x[i];
    }
    memcpy(picked, maxima, sizeof(float) * (size_t)blocks);
    float t = kth_largest(picked, blocks, width);
    /* (2) the logits >= t: only in blocks whose maximum is */
    int32_t n = 0;
    for (int32_t b = 0; b < groups * W; b++) {
        if (maxima[b] < t) continue;
        const float *p = x + (size_t)(b / W) * g * W + b % W;
        for (int32_t j = 0; j < g; j++)
            if (p[j * W] >= t) found[n++] = (Ranked){p[j * W], (int32_t)(p + j * W - x)};
    }
    for (int32_t i = groups * g * W; i < vocab; i++)
        if (x[i] >= t) found[n++] = (Ranked){x[i], i};
    /* n >= width: blocks >= width (g = 1: a block per logit; else vocab >= 4 * width * g and blocks >= vocab / g) */
    if (n < width) return -1; /* (never: then the caller ranks the row its own way) */
    sort_ranked(found, n); /* (3) */
    for (int32_t k = 0; k < width; k++) out[k] = found[k].id;
    return 0;
}

/* Row by row: x (rows, vocab) float32, out (rows, width) int64 ids. Returns 0, or -1 where a logit is NaN, the
 * width is not 1..vocab, or memory ran out. */
int ntp_rank(const float *x, int32_t rows, int32_t vocab, int32_t width, int64_t *out) {
    if (width < 1 || width > vocab) return -1;
    float *maxima = (float *)malloc(sizeof(float) * 2 * (size_t)vocab);
    Ranked *found = (Ranked *)malloc(sizeof(Ranked) * (size_t)vocab);
    int failed = maxima == NULL || found == NULL;
    for (int32_t r = 0; r < rows && !failed; r++)
        failed = rank_row(x + (size_t)r * vocab, vocab, width, maxima, maxima + vocab, found, out + (size_t)r * width);
    free(maxima);
    free(found);
    return failed ? -1 : 0;
}
