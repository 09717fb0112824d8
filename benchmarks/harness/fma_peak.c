/* benchmarks/network_native.py: the machine's peak float32 FLOP rate.
 *
 * Each thread runs twelve independent chains of fused multiply-adds (a = a * m + c) on
 * the widest vectors the CPU has: AVX-512 (16 float32 lanes) where it reports avx512f,
 * else AVX2 (8 lanes). Twelve chains hide the FMA latency (4 cycles on two pipes needs
 * at least eight in flight), so the loop is bound by FMA throughput alone. One FMA is
 * two FLOPs per lane. A CPU that runs 512-bit FMAs at half the rate of 256-bit ones
 * (two 256-bit halves) reaches the same FLOP rate either way; one with full-width
 * 512-bit pipes reaches twice the AVX2 rate, and that is its peak. Compiled with
 * -O2 -mavx2 -mfma -pthread; the AVX-512 loop is compiled for avx512f by a target
 * attribute and runs only where __builtin_cpu_supports says the CPU has it. */
#include <immintrin.h>
#include <pthread.h>
#include <stddef.h>

#define CHAINS 12

/* One step of every chain: twelve independent FMAs, written out so that each stays in
   a register (a loop over an array of vectors may not). */
#define BENCH_FMA_CHAINS(fmadd)                                                      \
  do {                                                                               \
    a[0] = fmadd(a[0], m, c), a[1] = fmadd(a[1], m, c), a[2] = fmadd(a[2], m, c);    \
    a[3] = fmadd(a[3], m, c), a[4] = fmadd(a[4], m, c), a[5] = fmadd(a[5], m, c);    \
    a[6] = fmadd(a[6], m, c), a[7] = fmadd(a[7], m, c), a[8] = fmadd(a[8], m, c);    \
    a[9] = fmadd(a[9], m, c), a[10] = fmadd(a[10], m, c), a[11] = fmadd(a[11], m, c); \
  } while (0)

static volatile float bench_fma_sink;

typedef struct {
  long iterations;
  float result;
} bench_fma_job;

static void *bench_fma_chains_avx2(void *arg) {
  bench_fma_job *job = (bench_fma_job *)arg;
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __m256 a[CHAINS];
  for (int k = 0; k < CHAINS; ++k) a[k] = _mm256_set1_ps(1.0f + 0.01f * (float)k);
  for (long i = 0; i < job->iterations; ++i) {
    BENCH_FMA_CHAINS(_mm256_fmadd_ps);
  }
  __m256 sum = a[0];
  for (int k = 1; k < CHAINS; ++k) sum = _mm256_add_ps(sum, a[k]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  job->result = lanes[0];
  return NULL;
}

__attribute__((target("avx512f"))) static void *bench_fma_chains_avx512(void *arg) {
  bench_fma_job *job = (bench_fma_job *)arg;
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  __m512 a[CHAINS];
  for (int k = 0; k < CHAINS; ++k) a[k] = _mm512_set1_ps(1.0f + 0.01f * (float)k);
  for (long i = 0; i < job->iterations; ++i) {
    BENCH_FMA_CHAINS(_mm512_fmadd_ps);
  }
  __m512 sum = a[0];
  for (int k = 1; k < CHAINS; ++k) sum = _mm512_add_ps(sum, a[k]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  job->result = lanes[0];
  return NULL;
}

/* The float32 lanes of the vectors the probe runs on this CPU: 16 (AVX-512) or 8 (AVX2). */
int bench_fma_lanes(void) { return __builtin_cpu_supports("avx512f") ? 16 : 8; }

/* Run `iterations` loop steps on each of `threads` threads (at most 64; the calling
   thread is one of them); returns the FLOPs done, 0 when a thread cannot start. */
double bench_fma(long iterations, int threads) {
  pthread_t workers[64];
  bench_fma_job jobs[64];
  if (threads < 1 || threads > 64) return 0.0;
  const int lanes = bench_fma_lanes();
  void *(*chains)(void *) = lanes == 16 ? bench_fma_chains_avx512 : bench_fma_chains_avx2;
  int started = 0;
  for (int t = 0; t < threads; ++t) jobs[t].iterations = iterations;
  for (int t = 1; t < threads; ++t) {
    if (pthread_create(&workers[t], NULL, chains, &jobs[t]) != 0) break;
    ++started;
  }
  chains(&jobs[0]);
  float total = jobs[0].result;
  for (int t = 1; t <= started; ++t) {
    pthread_join(workers[t], NULL);
    total += jobs[t].result;
  }
  bench_fma_sink = total;
  if (started != threads - 1) return 0.0;
  return (double)threads * (double)iterations * CHAINS * lanes * 2.0;
}
