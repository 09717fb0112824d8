/* benchmarks/network_native.py: OpenBLAS's sgemm called directly, the floor of the
 * cblas backend's dense and matmul. BENCH_SGEMM is the library's prefixed symbol
 * (scipy_cblas_sgemm in the scipy-openblas32 wheel), set with -D from the spec's
 * cblas_prefix option. */
#include <cblas.h>

/* `batch` products in a row, `reps` times: y_i (m, n) = x_i (m, k) times w_i, where
 * x_i = x + i * x_step, y_i = y + i * m * n and w_i = w + i * w_step is (k, n), or
 * (n, k) transposed when `trans_w` (a dense's weights). A step of 0 broadcasts that
 * operand; a matmul whose w has no batch dims is one product over all of x's rows. */
void bench_sgemm(int batch, int m, int k, int n, int trans_w, long x_step, long w_step, const float *x,
                 const float *w, float *y, long reps) {
  const int ldw = trans_w ? k : n;
  for (long r = 0; r < reps; ++r) {
    for (long i = 0; i < batch; ++i) {
      BENCH_SGEMM(CblasRowMajor, CblasNoTrans, trans_w ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, x + i * x_step,
                  k, w + i * w_step, ldw, 0.0f, y + i * (long)m * n, n);
    }
  }
}
