/* fused_attention.h: scaled dot-product attention for the fused backend, one block of the
   output per call (spec/backends/fused/fused.yaml maps the op `attention` to these
   functions; generator/c_fused/calls.py writes the calls, one for each (batch, head), on the
   thread pool when the output is large).

   out = softmax(q kt * scale + bias) v for one head: q (rows, depth), kt (depth, keys: the
   keys transposed), v (keys, width), out (rows, width), all contiguous and row-major; bias element (i, j) at
   bias[i * bias_row + j * bias_col] (a stride of 0 repeats it), or no bias when NULL.

   The scores are never written whole. Each block of FUSED_ATTENTION_ROWS query rows walks
   the keys in blocks of FUSED_ATTENTION_KEYS with a streaming softmax: a block's scores
   (a ROWS x KEYS tile, on the stack), the running maximum `top` and sum of exponentials
   `total` of each row, and the output rows themselves as the accumulator of p v. When a
   block raises a row's maximum, what the row summed so far is rescaled by
   exp(old maximum - new one); at the end each output row is divided by its sum. For a
   sequence of GPT-2's 128 keys that is two tiles, and nothing but the output is written
   to memory.

   The products run in register tiles of ROWS rows by LANES columns (across keys for the
   scores, reading kt's contiguous rows; across output columns for p v), so each value of
   kt and v loaded serves ROWS rows. A tile of keys that the bias masks (-inf) for every
   row of the block is skipped before its scores are computed: a causal mask's upper
   triangle costs nothing.

   Values as the chain of ops (matmul, scale, add, softmax, matmul) gives them: a row whose
   scores are all -inf ends as 0 / 0, NaN; a NaN or +inf score makes the row NaN (its
   maximum is NaN, or inf - inf). The float32 sums are in float, the exponentials those of
   fused_math.h (double, rounded once), so a result differs from the float64 reference by a
   float sum's rounding, far inside the default tolerance. float64 computes in double with
   libm's exp. */
#ifndef BYOC_FUSED_ATTENTION_H
#define BYOC_FUSED_ATTENTION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fused_math.h"

#define FUSED_ATTENTION_ROWS 8  /* query rows per block: each k and v value loaded serves 8 */
#define FUSED_ATTENTION_KEYS 64 /* keys per tile */
#define FUSED_ATTENTION_LANES 32 /* columns of a register tile: two AVX-512 vectors of floats */

/* FUSED_ATTENTION(T, NAME, EXP, MADD): the function NAME for element type T, its
   exponentials by EXP and its multiply-adds by MADD(acc, a, b). The register tiles are
   ROWS x LANES accumulators over a loop of fixed count, the form of the dot products'
   tiles (generator/c_fused/tiles.py), which gcc keeps in vector registers. */
#define FUSED_ATTENTION(T, NAME, EXP, MADD)                                                                \
  static inline void NAME(const T* q, const T* kt, const T* v, const T* scale, const T* bias,             \
                          int64_t bias_row, int64_t bias_col, T* out, int64_t rows, int64_t keys,         \
                          int64_t depth, int64_t width) {                                                 \
    enum { R = FUSED_ATTENTION_ROWS, K = FUSED_ATTENTION_KEYS, L = FUSED_ATTENTION_LANES };               \
    const T factor = scale[0];                                                                            \
    for (int64_t i0 = 0; i0 < rows; i0 += R) {                                                            \
      const int64_t nr = rows - i0 < R ? rows - i0 : R;                                                   \
      T top[R], total[R];                                                                                 \
      const T* qr[R]; /* the block's rows; the last repeated past the end (its results unused) */         \
      for (int r = 0; r < R; ++r) {                                                                       \
        top[r] = -INFINITY;                                                                               \
        total[r] = 0;                                                                                     \
        qr[r] = q + (i0 + (r < nr ? r : nr - 1)) * depth;                                                 \
      }                                                                                                   \
      for (int64_t e = 0; e < nr * width; ++e) out[i0 * width + e] = 0;                                  \
      for (int64_t j0 = 0; j0 < keys; j0 += K) {                                                          \
        const int64_t nk = keys - j0 < K ? keys - j0 : K;                                                 \
        if (bias != NULL) { /* a tile the bias masks for every row of the block adds nothing */          \
          int open = 0;                                                                                   \
          for (int64_t r = 0; r < nr && !open; ++r)                                                       \
            for (int64_t c = 0; c < nk; ++c) open |= bias[(i0 + r) * bias_row + (j0 + c) * bias_col] != -INFINITY; \
          if (!open) continue;                                                                            \
        }                                                                                                 \
        /* the tile's scores q kt, in register tiles across keys (kt's rows are contiguous) */     \
        T s[R][K];                                                                                        \
        for (int64_t c0 = 0; c0 < K; c0 += L) {                                                           \
          T tile[R][L];                                                                                   \
          for (int r = 0; r < R; ++r)                                                                     \
            for (int l = 0; l < L; ++l) tile[r][l] = 0;                                                   \
          const int64_t n = nk - c0 < L ? nk - c0 : L; /* keys of this register tile */                   \
          if (n == L) {                                                                                   \
            for (int64_t d = 0; d < depth; ++d) {                                                         \
              const T* kd = kt + d * keys + j0 + c0;                                                      \
              _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {                                       \
                const T a = qr[r][d];                                                                     \
                for (int l = 0; l < L; ++l) tile[r][l] = MADD(tile[r][l], a, kd[l]);                      \
              }                                                                                           \
            }                                                                                             \
          } else if (n > 0) { /* the last keys, fewer than LANES */                                       \
            for (int64_t d = 0; d < depth; ++d)                                                           \
              for (int r = 0; r < R; ++r)                                                                 \
                for (int64_t l = 0; l < n; ++l)                                                           \
                  tile[r][l] = MADD(tile[r][l], qr[r][d], kt[d * keys + j0 + c0 + l]);                    \
          }                                                                                               \
          for (int r = 0; r < R; ++r)                                                                     \
            for (int l = 0; l < L; ++l) s[r][c0 + l] = tile[r][l];                                        \
        }                                                                                                 \
        /* each row: scale, bias, the new maximum, the exponentials, each in vector lanes (the   \
           keys past the last -inf, so that every loop runs over the whole tile); what the row     \
           summed before is rescaled when its maximum grows */                                           \
        for (int64_t r = 0; r < R; ++r) {                                                                 \
          T* sr = s[r];                                                                                   \
          if (r >= nr) { /* past the rows: adds nothing */                                                \
            for (int c = 0; c < K; ++c) sr[c] = 0;                                                        \
            continue;                                                                                     \
          }                                                                                               \
          const T* br = bias != NULL ? bias + (i0 + r) * bias_row + j0 * bias_col : NULL;                 \
          if (br == NULL) {                                                                               \
            for (int64_t c = 0; c < nk; ++c) sr[c] = sr[c] * factor;                                      \
          } else if (bias_col == 1) {                                                                     \
            for (int64_t c = 0; c < nk; ++c) sr[c] = sr[c] * factor + br[c];                              \
          } else { /* one bias value for the row */                                                       \
            for (int64_t c = 0; c < nk; ++c) sr[c] = sr[c] * factor + br[0];                              \
          }                                                                                               \
          for (int64_t c = nk; c < K; ++c) sr[c] = -INFINITY;                                             \
          T lanes[L];                                                                                     \
          for (int l = 0; l < L; ++l) lanes[l] = -INFINITY;                                               \
          for (int c0 = 0; c0 < K; c0 += L)                                                               \
            for (int l = 0; l < L; ++l) {                                                                 \
              const T x = sr[c0 + l];                                                                     \
              lanes[l] = x > lanes[l] || x != x ? x : lanes[l];                                           \
            }                                                                                             \
          T high = top[r];                                                                                \
          for (int l = 0; l < L; ++l) high = lanes[l] > high || lanes[l] != lanes[l] ? lanes[l] : high;   \
          if (high == -INFINITY) { /* every score so far -inf: nothing to add yet */                      \
            for (int c = 0; c < K; ++c) sr[c] = 0;                                                        \
            continue;                                                                                     \
          }                                                                                               \
          const T rescale = EXP(top[r] - high); /* 0 for the row's first finite tile; NaN stays NaN */   \
          for (int c = 0; c < K; ++c) sr[c] = EXP(sr[c] - high); /* 0 for a -inf score */                \
          for (int l = 0; l < L; ++l) lanes[l] = 0;                                                       \
          for (int c0 = 0; c0 < K; c0 += L)                                                               \
            for (int l = 0; l < L; ++l) lanes[l] += sr[c0 + l];                                           \
          T sum = 0;                                                                                      \
          for (int l = 0; l < L; ++l) sum += lanes[l];                                                    \
          total[r] = total[r] * rescale + sum;                                                            \
          top[r] = high;                                                                                  \
          if (rescale != 1) {                                                                             \
            T* o = out + (i0 + r) * width;                                                                \
            for (int64_t e = 0; e < width; ++e) o[e] *= rescale;                                          \
          }                                                                                               \
        }                                                                                                 \
        /* out += p v for the tile, LANES output columns at a time */                                    \
        for (int64_t e0 = 0; e0 < width; e0 += L) {                                                       \
          T tile[R][L];                                                                                   \
          for (int r = 0; r < R; ++r)                                                                     \
            for (int l = 0; l < L; ++l) tile[r][l] = 0;                                                   \
          if (width - e0 >= L) {                                                                          \
            for (int64_t c = 0; c < nk; ++c) {                                                            \
              const T* vc = v + (j0 + c) * width + e0;                                                    \
              _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {                                       \
                const T p = s[r][c];                                                                      \
                for (int l = 0; l < L; ++l) tile[r][l] = MADD(tile[r][l], p, vc[l]);                      \
              }                                                                                           \
            }                                                                                             \
          } else { /* the last columns, fewer than LANES */                                               \
            for (int64_t c = 0; c < nk; ++c)                                                              \
              for (int r = 0; r < R; ++r)                                                                 \
                for (int64_t l = 0; l < width - e0; ++l)                                                  \
                  tile[r][l] = MADD(tile[r][l], s[r][c], v[(j0 + c) * width + e0 + l]);                   \
          }                                                                                               \
          const int64_t ne = width - e0 < L ? width - e0 : L;                                             \
          for (int64_t r = 0; r < nr; ++r)                                                                \
            for (int64_t l = 0; l < ne; ++l) out[(i0 + r) * width + e0 + l] += tile[r][l];                \
        }                                                                                                 \
      }                                                                                                   \
      for (int64_t r = 0; r < nr; ++r) { /* a row of -inf scores only: NaN, as the chain's 0 / 0 */      \
        T* o = out + (i0 + r) * width;                                                                    \
        const T inverse = 1 / total[r];                                                                   \
        for (int64_t e = 0; e < width; ++e) o[e] = top[r] == -INFINITY ? (T)NAN : o[e] * inverse;        \
      }                                                                                                   \
    }                                                                                                     \
  }

/* double's multiply-add: fma where the CPU has the instruction, as fused_maddf */
#if defined(FP_FAST_FMA) || defined(byoc_clones_have_fma)
#define fused_attention_madd64(acc, a, b) fma(a, b, acc)
#else
#define fused_attention_madd64(acc, a, b) ((acc) + (a) * (b))
#endif

FUSED_ATTENTION(float, fused_attention_float32, fused_exp_float32, fused_maddf)
FUSED_ATTENTION(double, fused_attention_float64, exp, fused_attention_madd64)

#endif
