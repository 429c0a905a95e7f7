/*
 * kernels/cpu/conv_avx512.c - AVX-512 im2col, col2im and 2x2 max pooling.
 *
 * The same arithmetic as the portable loops in conv.c, with masked loads and
 * stores instead of per-element bounds checks and short memcpy/memset calls:
 * one row of an output plane (WO <= 32 floats) is one or two vectors. Masked-off
 * lanes are never accessed, which is what makes the edge handling safe.
 * Compiled with -mavx512f/vl/bw: call only after checking the CPU (the CPU
 * context does). No allocation; thread-safe on disjoint outputs.
 * Dimension letters: C channels, H,W input size, HO,WO output size, K kernel.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/avx512.h"

/* Lanes [lo, hi) of a 16-lane chunk (clamped to the chunk). */
static inline __mmask16 s_lanes(int lo, int hi)
{
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    if (hi <= lo) {
        return 0;
    }
    return (__mmask16)(((1u << (hi - lo)) - 1) << lo);
}

/* Up to this many 16-lane chunks per row (W, WO <= 64) and K <= S_MAXK: the
 * masks are precomputed on the stack; other shapes use the portable loops. */
enum { S_MAXCH = 4, S_MAXK = 16 };

int ps_cpu_im2col_avx512(const ps_conv_shape_t *s, const float *x, float *col)
{
    const int C = s->C, H = s->H, W = s->W, K = s->K, pad = s->pad;
    const int HO = H + 2 * pad - K + 1, WO = W + 2 * pad - K + 1;
    const int nch = (WO + 15) / 16;
    if (nch > S_MAXCH || K > S_MAXK) {
        return -1;
    }
    /* out[ch]: lanes of chunk ch inside the row; in[kw][ch]: lanes whose input
     * column ow + kw - pad lies inside the image */
    __mmask16 out[S_MAXCH], in[S_MAXK][S_MAXCH];
    for (int ch = 0; ch < nch; ch++) {
        out[ch] = s_lanes(0, WO - 16 * ch);
        for (int kw = 0; kw < K; kw++) {
            const int shift = kw - pad;
            in[kw][ch] = out[ch] & s_lanes(-shift - 16 * ch, W - shift - 16 * ch);
        }
    }
    const __m512 zero = _mm512_setzero_ps();
    for (int c = 0; c < C; c++) {
        const float *xc = x + (size_t)c * H * W;
        for (int kh = 0; kh < K; kh++) {
            /* output rows whose input row oh + kh - pad lies inside the image */
            int lo = pad - kh, hi = H + pad - kh;
            lo = lo < 0 ? 0 : lo;
            hi = hi > HO ? HO : hi;
            hi = hi < lo ? lo : hi;
            for (int kw = 0; kw < K; kw++) {
                float *row = col + ((size_t)(c * K + kh) * K + kw) * HO * WO;
                const int shift = kw - pad;
                for (int oh = 0; oh < lo; oh++) {
                    for (int ch = 0; ch < nch; ch++) {
                        _mm512_mask_storeu_ps(row + (size_t)oh * WO + 16 * ch, out[ch],
                                              zero);
                    }
                }
                for (int oh = lo; oh < hi; oh++) {
                    float *dst = row + (size_t)oh * WO;
                    const float *src = xc + (ptrdiff_t)(oh + kh - pad) * W + shift;
                    for (int ch = 0; ch < nch; ch++) {
                        const __m512 v = _mm512_maskz_loadu_ps(in[kw][ch], src + 16 * ch);
                        _mm512_mask_storeu_ps(dst + 16 * ch, out[ch], v);
                    }
                }
                for (int oh = hi; oh < HO; oh++) {
                    for (int ch = 0; ch < nch; ch++) {
                        _mm512_mask_storeu_ps(row + (size_t)oh * WO + 16 * ch, out[ch],
                                              zero);
                    }
                }
            }
        }
    }
    return 0;
}

/*
 * Gathers rather than scatters: each input row chunk dx[c, ih, iw0..iw0+16)
 * is loaded once, receives the K kernel columns of every (kh, oh) that reads
 * it from dcol (dx[iw] += dcol[c,kh,kw][oh, iw - kw + pad]), and is stored once.
 */
int ps_cpu_col2im_avx512(const ps_conv_shape_t *s, const float *dcol, float *dx)
{
    const int C = s->C, H = s->H, W = s->W, K = s->K, pad = s->pad;
    const int HO = H + 2 * pad - K + 1, WO = W + 2 * pad - K + 1;
    const int nch = (W + 15) / 16;
    if (nch > S_MAXCH || K > S_MAXK) {
        return -1;
    }
    /* m[kw][ch]: lanes iw of chunk ch (iw < W) whose output column
     * ow = iw - kw + pad lies in [0, WO) */
    __mmask16 m[S_MAXK][S_MAXCH], row_mask[S_MAXCH];
    for (int ch = 0; ch < nch; ch++) {
        row_mask[ch] = s_lanes(0, W - 16 * ch);
        for (int kw = 0; kw < K; kw++) {
            const int shift = pad - kw; /* ow = iw + shift */
            m[kw][ch] = row_mask[ch] & s_lanes(-shift - 16 * ch, WO - shift - 16 * ch);
        }
    }
    const size_t plane = (size_t)HO * WO;
    for (int c = 0; c < C; c++) {
        float *dxc = dx + (size_t)c * H * W;
        for (int ih = 0; ih < H; ih++) {
            for (int ch = 0; ch < nch; ch++) {
                __m512 acc = _mm512_setzero_ps();
                const int iw0 = 16 * ch;
                for (int kh = 0; kh < K; kh++) {
                    const int oh = ih - kh + pad;
                    if (oh < 0 || oh >= HO) {
                        continue;
                    }
                    const float *rows =
                        dcol + (size_t)(c * K + kh) * K * plane + (size_t)oh * WO;
                    for (int kw = 0; kw < K; kw++) {
                        const float *src = rows + kw * plane + (iw0 + pad - kw);
                        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m[kw][ch], src));
                    }
                }
                _mm512_mask_storeu_ps(dxc + (size_t)ih * W + iw0, row_mask[ch], acc);
            }
        }
    }
    return 0;
}

/* Index vectors that split 32 interleaved floats (two vectors) into the 16
 * even and the 16 odd ones, and the inverse interleave. */
static inline __m512i s_even(void)
{
    return _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
}

static inline __m512i s_odd(void)
{
    return _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
}

static inline __m512i s_zip_lo(void)
{
    return _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

static inline __m512i s_zip_hi(void)
{
    return _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
}

/* Loads 2n floats of one input row as even and odd lanes (n <= 16). */
static inline void s_load_pairs(const float *r, int n, __m512 *even, __m512 *odd)
{
    const __m512 lo = _mm512_maskz_loadu_ps(s_lanes(0, 2 * n), r);
    const __m512 hi = _mm512_maskz_loadu_ps(s_lanes(0, 2 * n - 16), r + 16);
    *even = _mm512_permutex2var_ps(lo, s_even(), hi);
    *odd = _mm512_permutex2var_ps(lo, s_odd(), hi);
}

void ps_cpu_maxpool2_fwd_avx512(const float *x, float *y, uint8_t *arg, int NC, int H,
                                int W)
{
    const int HO = H / 2, WO = W / 2;
    for (int i = 0; i < NC; i++) {
        const float *xi = x + (size_t)i * H * W;
        float *yi = y + (size_t)i * HO * WO;
        uint8_t *ai = arg + (size_t)i * HO * WO;
        for (int oh = 0; oh < HO; oh++) {
            const float *r0 = xi + (size_t)(2 * oh) * W;
            for (int ow = 0; ow < WO; ow += 16) {
                const int n = WO - ow < 16 ? WO - ow : 16;
                __m512 a0, a1, a2, a3;
                s_load_pairs(r0 + 2 * ow, n, &a0, &a1);
                s_load_pairs(r0 + W + 2 * ow, n, &a2, &a3);
                /* first maximum wins, in the order a0, a1, a2, a3 (as conv.c) */
                __m512 m = a0;
                __m512i w = _mm512_setzero_si512();
                __mmask16 k = _mm512_cmp_ps_mask(a1, m, _CMP_GT_OQ);
                m = _mm512_mask_mov_ps(m, k, a1);
                w = _mm512_mask_mov_epi32(w, k, _mm512_set1_epi32(1));
                k = _mm512_cmp_ps_mask(a2, m, _CMP_GT_OQ);
                m = _mm512_mask_mov_ps(m, k, a2);
                w = _mm512_mask_mov_epi32(w, k, _mm512_set1_epi32(2));
                k = _mm512_cmp_ps_mask(a3, m, _CMP_GT_OQ);
                m = _mm512_mask_mov_ps(m, k, a3);
                w = _mm512_mask_mov_epi32(w, k, _mm512_set1_epi32(3));
                const __mmask16 out = s_lanes(0, n);
                _mm512_mask_storeu_ps(yi + (size_t)oh * WO + ow, out, m);
                _mm512_mask_cvtepi32_storeu_epi8(ai + (size_t)oh * WO + ow, out, w);
            }
        }
    }
}

void ps_cpu_maxpool2_bwd_avx512(const float *dy, const uint8_t *arg, const float *y,
                                float *dx, int NC, int H, int W)
{
    const int HO = H / 2, WO = W / 2;
    const __m512 zero = _mm512_setzero_ps();
    for (int i = 0; i < NC; i++) {
        const size_t o = (size_t)i * HO * WO;
        float *dxi = dx + (size_t)i * H * W;
        for (int oh = 0; oh < HO; oh++) {
            float *r0 = dxi + (size_t)(2 * oh) * W;
            for (int ow = 0; ow < WO; ow += 16) {
                const int n = WO - ow < 16 ? WO - ow : 16;
                const __mmask16 in = s_lanes(0, n);
                const size_t at = o + (size_t)oh * WO + ow;
                __m512 g = _mm512_maskz_loadu_ps(in, dy + at);
                if (y) {
                    const __m512 yv = _mm512_maskz_loadu_ps(in, y + at);
                    g = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(yv, zero, _CMP_GT_OQ), g);
                }
                const __m512i w = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(in, arg + at));
                const __m512 v0 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(0)), g);
                const __m512 v1 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(1)), g);
                const __m512 v2 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(2)), g);
                const __m512 v3 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(3)), g);
                const __mmask16 lo = s_lanes(0, 2 * n), hi = s_lanes(0, 2 * n - 16);
                float *d0 = r0 + 2 * ow, *d1 = r0 + W + 2 * ow;
                _mm512_mask_storeu_ps(d0, lo, _mm512_permutex2var_ps(v0, s_zip_lo(), v1));
                _mm512_mask_storeu_ps(d0 + 16, hi,
                                      _mm512_permutex2var_ps(v0, s_zip_hi(), v1));
                _mm512_mask_storeu_ps(d1, lo, _mm512_permutex2var_ps(v2, s_zip_lo(), v3));
                _mm512_mask_storeu_ps(d1 + 16, hi,
                                      _mm512_permutex2var_ps(v2, s_zip_hi(), v3));
            }
        }
    }
}
