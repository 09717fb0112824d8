/* benchmarks/network_native.py: OpenBLAS's sgemm called directly, the floor of the
 * cblas backend's dense. BENCH_SGEMM is the library's prefixed symbol
 * (scipy_cblas_sgemm in the scipy-openblas32 wheel), set with -D from the spec's
 * cblas_prefix option. */
#include <cblas.h>

/* y (b, u) = x (b, k) times w (u, k) transposed, `reps` times in a row. */
void bench_sgemm(int b, int k, int u, const float *x, const float *w, float *y, long reps) {
  for (long r = 0; r < reps; ++r) {
    BENCH_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, b, u, k, 1.0f, x, k, w, k, 0.0f, y, u);
  }
}
