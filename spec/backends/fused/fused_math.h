/* fused_math.h: the fused backend's math functions for float32, float16 and bfloat16
   values (spec/backends/fused/fused.yaml names them in its ops), written to vectorise.

   libm's exp, tanh and erf are scalar calls: in a loop of a fused nest, gcc can vectorise
   everything but them, and a tanh-form Gelu then spends most of a transformer's
   elementwise time in libm. The functions here have no branch and no call (each range's
   formula is computed and the right one selected), so gcc turns a loop over them into
   vector code, 4 doubles to an AVX2 register. They compute in double and round to float
   once, at the end:

   - fused_exp_near(x): e**x for a double x, x clamped to [-200, 200] (beyond it the
     float result is 0 or infinity either way). x = k ln2 + r, k = round(x / ln2), r
     within ln2/2 (Cody and Waite: ln2 in two parts, so r is exact to double rounding);
     e**r = 1 + r + r^2 P(r), P of degree 8; 2**k built in the exponent bits.
   - tanh: |x| < 0.55: x + x^3 P(x^2), P of degree 8; else 1 - 2 / (e**(2|x|) + 1),
     the sign copied from x.
   - erfc(a), a >= 0: a < 1: 1 - a E(a^2) (E of degree 10, E(x^2) = erf(x)/x);
     a in [1, 2.5): e**(-a^2) M(a - 1.75), M of degree 13; a in [2.5, 10.5]:
     e**(-a^2) T(1/a), T of degree 11 (M and T fit erfc(a) e**(a^2)); beyond 10.5, 0
     (erfc(10.5) < 1.4e-49, far below the smallest float). erf(x) = x E(x^2) for
     |x| < 1, else sign(x) (1 - erfc(|x|)); gelu(x) = x/2 erfc(-x/sqrt 2) from the same
     pieces, so its negative tail keeps its relative precision.

   The polynomials are Chebyshev fits (mpmath.chebyfit; fused_math_fit.py beside this
   file prints them) with relative errors of 8.8e-16 (P of exp), 8.4e-15 (tanh), 4.6e-16
   (E), 8.9e-13 (M) and 2.7e-12 (T). With the roundings of their evaluation, the double
   results are within about 1e-12 of the exact values, so a float result is the correctly
   rounded float except where the exact value lies that close to a midpoint between two
   floats, and then the float beside it (one ulp). tests/test_fused_math.py checks this
   over a sample of every float bit pattern (a million floats): at most one ulp, NaN where
   the reference has NaN, the signs of zeros. Over every 7th float bit pattern (614
   million floats), exp, sigmoid, tanh and power(x, 2 or 3) gave libm's double rounded to
   float in every case, erf in all but 2 and gelu in all but 13 (one ulp each). The default tolerance of a float32 result is 2e-4.

   float64 values keep libm's functions, the numpy reference's, through the
   fused_<function>_float64 macros at the end. */
#ifndef BYOC_FUSED_MATH_H
#define BYOC_FUSED_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* e**x, for x in [-200, 200] (clamped to it); NaN stays NaN. */
static inline double fused_exp_near(double x) {
  x = x < -200.0 ? -200.0 : (x > 200.0 ? 200.0 : x);
  const double shifter = 6755399441055744.0; /* 1.5 * 2**52: adding it rounds to an integer */
  const double t = x * 1.4426950408889634 + shifter;
  const double k = t - shifter;
  const double r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10;
  double p = 2.7613908675784856e-7;
  p = p * r + 2.7625237795740733e-6;
  p = p * r + 2.4801536205055341e-5;
  p = p * r + 0.00019841208512102092;
  p = p * r + 0.0013888888905973544;
  p = p * r + 0.0083333333538398348;
  p = p * r + 0.041666666666651244;
  p = p * r + 0.16666666666648155;
  p = p * r + 0.5;
  const double er = 1.0 + r + r * r * p;
  uint64_t bits;
  memcpy(&bits, &t, sizeof bits); /* the low bits of t hold k */
  bits = (bits - 0x4338000000000000u + 1023u) << 52;
  double scale;
  memcpy(&scale, &bits, sizeof scale);
  return er * scale;
}

/* erf(x) for |x| < 1: x E(x^2). */
static inline double fused_erf_near0(double x) {
  const double z = x * x;
  double e = 9.4285969568341643e-9;
  e = e * z + -1.5188281247335167e-7;
  e = e * z + 1.6310356513871741e-6;
  e = e * z + -1.4913300906316396e-5;
  e = e * z + 0.00012054681918310599;
  e = e * z + -0.00085483048717827406;
  e = e * z + 0.0052239771541053047;
  e = e * z + -0.026866170586496872;
  e = e * z + 0.11283791670580422;
  e = e * z + -0.376126389031744;
  e = e * z + 1.1283791670955122;
  return x * e;
}

/* erfc(a) for a >= 0 (and NaN); 0 beyond a = 10.5. */
static inline double fused_erfc_nonnegative(double a) {
  const double c = a > 10.5 ? 10.5 : (a < 1.0 ? 1.0 : a);
  const double u = c - 1.75;
  double m = -2.6202128191402129e-7;
  m = m * u + 9.5798852909347271e-7;
  m = m * u + -2.9007683654422058e-6;
  m = m * u + 9.9827928633769085e-6;
  m = m * u + -3.3765900910651588e-5;
  m = m * u + 0.0001095456330881697;
  m = m * u + -0.0003435312635187086;
  m = m * u + 0.0010391965246458548;
  m = m * u + -0.0030209748480960348;
  m = m * u + 0.0084043199600667236;
  m = m * u + -0.022259995234461056;
  m = m * u + 0.055763630060571715;
  m = m * u + -0.13097634551452499;
  m = m * u + 0.28497223473758864;
  const double v = 1.0 / c;
  double w = -1.137317856860745;
  w = w * v + 4.3098428082362794;
  w = w * v + -7.2140302130876438;
  w = w * v + 6.7686940282984413;
  w = w * v + -3.533933529771589;
  w = w * v + 0.6152853922688403;
  w = w * v + 0.31478593479541884;
  w = w * v + 0.013591856722510293;
  w = w * v + -0.28328449485294999;
  w = w * v + 6.9066587159393884e-5;
  w = w * v + 0.56418719590562135;
  w = w * v + 3.7152516151460949e-8;
  const double tail = fused_exp_near(-(c * c)) * (c < 2.5 ? m : w);
  return a < 1.0 ? 1.0 - fused_erf_near0(a) : (a > 10.5 ? 0.0 : tail);
}

static inline float fused_exp_float32(float x) {
  return (float)fused_exp_near(x);
}

static inline float fused_sigmoid_float32(float x) {
  return (float)(1.0 / (1.0 + fused_exp_near(-(double)x)));
}

static inline float fused_tanh_float32(float x) {
  const double a = fabs((double)x);
  const double z = a * a;
  double p = -0.00014104427636038095;
  p = p * z + 0.00054000932514808414;
  p = p * z + -0.0014413176599197253;
  p = p * z + 0.0035896171195569046;
  p = p * z + -0.0088629774803267391;
  p = p * z + 0.021869473537572494;
  p = p * z + -0.053968253529560911;
  p = p * z + 0.13333333332837595;
  p = p * z + -0.33333333333332408;
  const double near0 = a + a * z * p;
  const double far = 1.0 - 2.0 / (fused_exp_near(2.0 * a) + 1.0);
  return (float)copysign(a < 0.55 ? near0 : far, (double)x);
}

static inline float fused_erf_float32(float x) {
  const double a = fabs((double)x);
  const double far = copysign(1.0 - fused_erfc_nonnegative(a), (double)x);
  return (float)(a < 1.0 ? fused_erf_near0(x) : far);
}

/* x Phi(x) = x/2 erfc(-x / sqrt 2), the exact (erf) form of Gelu */
static inline float fused_gelu_float32(float x) {
  const double v = x;
  const double e = fused_erfc_nonnegative(fabs(v) / 1.4142135623730951);
  return (float)(0.5 * v * (v < 0 ? e : 2.0 - e));
}

/* Gelu's tanh form, 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), as x / (1 +
   e**(-2u)) (1 + tanh(u) = 2 / (1 + e**(-2u))): no cancellation where x << 0. Beyond
   -2u = 200 the factor is 0 (the product is below the smallest float for any float x),
   so that x = -inf gives NaN as the reference's -inf * 0 does. */
static inline float fused_gelu_tanh_float32(float x) {
  const double v = x;
  const double t = -1.5957691216057308 * (v + 0.044715 * v * v * v);
  return (float)(t > 200.0 ? v * 0.0 : v / (1.0 + fused_exp_near(t)));
}

/* x**y; a constant y of 2 or 3 (after inlining) is multiplications, as exact as pow
   (x*x of a float is exact in double, x*x*x rounded once) and vectorised. */
static inline float fused_power_float32(float x, float y) {
  const double v = x;
  return (float)(y == 2.0f ? v * v : (y == 3.0f ? v * v * v : pow(v, (double)y)));
}

/* The double e**x of a float32 softmax (its sum is a double). */
#define fused_expd_float32(x) fused_exp_near(x)

/* float16 and bfloat16 values are read as float (generator/c/dtypes.py). */
#define fused_exp_float16 fused_exp_float32
#define fused_exp_bfloat16 fused_exp_float32
#define fused_sigmoid_float16 fused_sigmoid_float32
#define fused_sigmoid_bfloat16 fused_sigmoid_float32
#define fused_tanh_float16 fused_tanh_float32
#define fused_tanh_bfloat16 fused_tanh_float32
#define fused_erf_float16 fused_erf_float32
#define fused_erf_bfloat16 fused_erf_float32
#define fused_gelu_float16 fused_gelu_float32
#define fused_gelu_bfloat16 fused_gelu_float32
#define fused_gelu_tanh_float16 fused_gelu_tanh_float32
#define fused_gelu_tanh_bfloat16 fused_gelu_tanh_float32
#define fused_power_float16 fused_power_float32
#define fused_power_bfloat16 fused_power_float32
#define fused_expd_float16 fused_expd_float32
#define fused_expd_bfloat16 fused_expd_float32

/* float64: libm, as the reference computes. */
#define fused_exp_float64(x) exp(x)
#define fused_expd_float64(x) exp(x)
#define fused_sigmoid_float64(x) (1 / (1 + exp(-(x))))
#define fused_tanh_float64(x) tanh(x)
#define fused_erf_float64(x) erf(x)
#define fused_gelu_float64(x) (0.5 * (x) * erfc(-(x) / 1.4142135623730951))
#define fused_gelu_tanh_float64(x) ((x) / (1 + exp(-1.5957691216057308 * ((x) + 0.044715 * (x) * (x) * (x)))))
#define fused_power_float64(x, y) pow(x, y)

/* acc + a * b in float, the update of the float accumulators of the dot products
   (conv, dense, matmul) under the option float32_dots: one rounding, as a float32 BLAS
   computes, where the CPU has a fused multiply-add (a build for an FMA target, or the
   target_clones clones that have one, byoc_clones_have_fma); the multiply and the add
   elsewhere (libm's fmaf is a slow software routine without the instruction). */
#if defined(FP_FAST_FMAF) || defined(byoc_clones_have_fma)
#define fused_maddf(acc, a, b) fmaf(a, b, acc)
#else
#define fused_maddf(acc, a, b) ((acc) + (a) * (b))
#endif

#endif
