/* benchmarks/network_native.py: the machine's peak float32 FLOP rate.
 *
 * Each thread runs twelve independent chains of AVX2 fused multiply-adds on 8 float32
 * lanes (a = a * m + c): twelve chains hide the FMA latency (4 cycles on two pipes
 * needs at least eight in flight), so the loop is bound by FMA throughput alone.
 * One FMA is two FLOPs per lane. Compiled with -O2 -mavx2 -mfma -pthread. */
#include <immintrin.h>
#include <pthread.h>
#include <stddef.h>

#define CHAINS 12
#define LANES 8

static volatile float bench_fma_sink;

typedef struct {
  long iterations;
  float result;
} bench_fma_job;

static void *bench_fma_chains(void *arg) {
  bench_fma_job *job = (bench_fma_job *)arg;
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __m256 a[CHAINS];
  for (int k = 0; k < CHAINS; ++k) a[k] = _mm256_set1_ps(1.0f + 0.01f * (float)k);
  for (long i = 0; i < job->iterations; ++i) {
    a[0] = _mm256_fmadd_ps(a[0], m, c);
    a[1] = _mm256_fmadd_ps(a[1], m, c);
    a[2] = _mm256_fmadd_ps(a[2], m, c);
    a[3] = _mm256_fmadd_ps(a[3], m, c);
    a[4] = _mm256_fmadd_ps(a[4], m, c);
    a[5] = _mm256_fmadd_ps(a[5], m, c);
    a[6] = _mm256_fmadd_ps(a[6], m, c);
    a[7] = _mm256_fmadd_ps(a[7], m, c);
    a[8] = _mm256_fmadd_ps(a[8], m, c);
    a[9] = _mm256_fmadd_ps(a[9], m, c);
    a[10] = _mm256_fmadd_ps(a[10], m, c);
    a[11] = _mm256_fmadd_ps(a[11], m, c);
  }
  __m256 sum = a[0];
  for (int k = 1; k < CHAINS; ++k) sum = _mm256_add_ps(sum, a[k]);
  float lanes[LANES];
  _mm256_storeu_ps(lanes, sum);
  job->result = lanes[0];
  return NULL;
}

/* Run `iterations` loop steps on each of `threads` threads (at most 64; the calling
   thread is one of them); returns the FLOPs done, 0 when a thread cannot start. */
double bench_fma(long iterations, int threads) {
  pthread_t workers[64];
  bench_fma_job jobs[64];
  if (threads < 1 || threads > 64) return 0.0;
  int started = 0;
  for (int t = 0; t < threads; ++t) jobs[t].iterations = iterations;
  for (int t = 1; t < threads; ++t) {
    if (pthread_create(&workers[t], NULL, bench_fma_chains, &jobs[t]) != 0) break;
    ++started;
  }
  bench_fma_chains(&jobs[0]);
  float total = jobs[0].result;
  for (int t = 1; t <= started; ++t) {
    pthread_join(workers[t], NULL);
    total += jobs[t].result;
  }
  bench_fma_sink = total;
  if (started != threads - 1) return 0.0;
  return (double)threads * (double)iterations * CHAINS * LANES * 2.0;
}
