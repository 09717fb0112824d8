/* benchmarks/network_native.py: oneDNN called directly, the floor of the dnnl backend.
 *
 * A handle holds one primitive made once: a convolution (optionally with a bias and a
 * relu post-op; float32, or int8 with its scales and zero points), an inner product
 * (dense) or a matmul. With `any` the convolution picks its own
 * memory formats (blocked, for this CPU): its weights are reordered once, when the
 * handle is made, and every run reorders the plain source in and the destination out,
 * as a framework that keeps plain tensors at its boundary must. Without `any` every
 * tensor is plain (nchw, oihw, nc, oi; row-major for a matmul) and is used in
 * place. A run executes the
 * primitive(s) on the caller's buffers `reps` times, waiting for the stream each time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>

/* The scales of the source, the weights and the result, the zero points of the source
   and the result. */
#define BENCH_QUANT_ARGS 5

typedef struct {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  dnnl_primitive_t main, src_in, dst_out; /* src_in and dst_out are NULL without reorders */
  dnnl_memory_t user_src, user_dst, src, dst, weights, bias;
  /* an int8 convolution's scales and zero points: run-time arguments of the primitive */
  dnnl_exec_arg_t quant[BENCH_QUANT_ARGS];
  int n_quant;
  float quant_f32[2];   /* the source's and the result's scale */
  int32_t quant_s32[2]; /* the source's and the result's zero point */
  float *w_scales;      /* one per output channel */
  char impl[128];
} bench_dnnl;

static dnnl_memory_desc_t bench_md_of(int rank, const int64_t *dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
  dnnl_dims_t d;
  for (int k = 0; k < rank; ++k) d[k] = dims[k];
  dnnl_memory_desc_t md = NULL;
  return dnnl_memory_desc_create_with_tag(&md, rank, d, dt, tag) == dnnl_success ? md : NULL;
}

static dnnl_memory_desc_t bench_md(int rank, const int64_t *dims, dnnl_format_tag_t tag) {
  return bench_md_of(rank, dims, dnnl_f32, tag);
}

static void bench_destroy(dnnl_primitive_t p) {
  if (p != NULL) dnnl_primitive_destroy(p);
}

static void bench_release(dnnl_memory_t m) {
  if (m != NULL) dnnl_memory_destroy(m);
}

void bench_dnnl_free(void *handle) {
  bench_dnnl *h = (bench_dnnl *)handle;
  if (h == NULL) return;
  bench_destroy(h->main);
  bench_destroy(h->src_in);
  bench_destroy(h->dst_out);
  if (h->src != h->user_src) bench_release(h->src);
  if (h->dst != h->user_dst) bench_release(h->dst);
  bench_release(h->user_src);
  bench_release(h->user_dst);
  bench_release(h->weights);
  bench_release(h->bias);
  for (int k = 0; k < h->n_quant; ++k) bench_release(h->quant[k].memory);
  free(h->w_scales);
  if (h->stream != NULL) dnnl_stream_destroy(h->stream);
  if (h->engine != NULL) dnnl_engine_destroy(h->engine);
  free(h);
}

/* A reorder primitive from `from` to `to`; 0 on success. */
static int bench_reorder(dnnl_primitive_t *prim, dnnl_engine_t engine, const_dnnl_memory_desc_t from,
                         const_dnnl_memory_desc_t to) {
  dnnl_primitive_desc_t pd = NULL;
  if (dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, NULL) != dnnl_success) return 1;
  const int ok = dnnl_primitive_create(prim, pd) == dnnl_success;
  dnnl_primitive_desc_destroy(pd);
  return ok ? 0 : 1;
}

static int bench_run_once(dnnl_primitive_t prim, dnnl_stream_t stream, int n, const dnnl_exec_arg_t *args) {
  return dnnl_primitive_execute(prim, stream, n, args) != dnnl_success;
}

/* The memories and primitives of a made primitive descriptor `pd` whose plain
   descriptors are src_md and dst_md; weights `w` (plain, wmd) are reordered once into
   the format pd chose when it differs. 0 on success. */
static int bench_finish(bench_dnnl *h, dnnl_primitive_desc_t pd, dnnl_memory_desc_t src_md,
                        dnnl_memory_desc_t dst_md, dnnl_memory_desc_t wmd, const void *w, dnnl_memory_desc_t bmd,
                        const float *b) {
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl != NULL) {
    strncpy(h->impl, impl, sizeof h->impl - 1);
  }
  const_dnnl_memory_desc_t src_q = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const_dnnl_memory_desc_t dst_q = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  const_dnnl_memory_desc_t w_q = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  if (dnnl_primitive_create(&h->main, pd) != dnnl_success) return 1;
  if (dnnl_memory_create(&h->user_src, src_md, h->engine, DNNL_MEMORY_NONE) != dnnl_success) return 1;
  if (dnnl_memory_create(&h->user_dst, dst_md, h->engine, DNNL_MEMORY_NONE) != dnnl_success) return 1;
  h->src = h->user_src;
  h->dst = h->user_dst;
  if (!dnnl_memory_desc_equal(src_q, src_md)) {
    if (dnnl_memory_create(&h->src, src_q, h->engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) return 1;
    if (bench_reorder(&h->src_in, h->engine, src_md, src_q)) return 1;
  }
  if (!dnnl_memory_desc_equal(dst_q, dst_md)) {
    if (dnnl_memory_create(&h->dst, dst_q, h->engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) return 1;
    if (bench_reorder(&h->dst_out, h->engine, dst_q, dst_md)) return 1;
  }
  if (b != NULL && dnnl_memory_create(&h->bias, bmd, h->engine, (void *)b) != dnnl_success) return 1;
  if (dnnl_memory_desc_equal(w_q, wmd)) {
    return dnnl_memory_create(&h->weights, wmd, h->engine, (void *)w) != dnnl_success;
  }
  dnnl_memory_t user_w = NULL;
  dnnl_primitive_t w_in = NULL;
  int failed = dnnl_memory_create(&user_w, wmd, h->engine, (void *)w) != dnnl_success
      || dnnl_memory_create(&h->weights, w_q, h->engine, DNNL_MEMORY_ALLOCATE) != dnnl_success
      || bench_reorder(&w_in, h->engine, wmd, w_q);
  if (!failed) {
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, user_w}, {DNNL_ARG_TO, h->weights}};
    failed = bench_run_once(w_in, h->stream, 2, args) || dnnl_stream_wait(h->stream) != dnnl_success;
  }
  bench_destroy(w_in);
  bench_release(user_w);
  return failed;
}

static bench_dnnl *bench_start(void) {
  bench_dnnl *h = (bench_dnnl *)calloc(1, sizeof(bench_dnnl));
  if (h == NULL) return NULL;
  if (dnnl_engine_create(&h->engine, dnnl_cpu, 0) != dnnl_success
      || dnnl_stream_create(&h->stream, h->engine, dnnl_stream_default_flags) != dnnl_success) {
    bench_dnnl_free(h);
    return NULL;
  }
  return h;
}

/* The end of making a handle: pd, the post-ops, the attributes and the n
   descriptors mds are released (any may be NULL); h, or NULL (h freed) when `failed`. */
static void *bench_made(bench_dnnl *h, int failed, dnnl_primitive_desc_t pd, dnnl_post_ops_t ops,
                        dnnl_primitive_attr_t attr, dnnl_memory_desc_t *mds, size_t n) {
  if (pd != NULL) dnnl_primitive_desc_destroy(pd);
  if (ops != NULL) dnnl_post_ops_destroy(ops);
  if (attr != NULL) dnnl_primitive_attr_destroy(attr);
  for (size_t k = 0; k < n; ++k) {
    if (mds[k] != NULL) dnnl_memory_desc_destroy(mds[k]);
  }
  if (failed) {
    bench_dnnl_free(h);
    return NULL;
  }
  return h;
}

/* conv2d of x (N, C, H, W) by w (M, C, KH, KW) plus b (M,) when not NULL, then relu when
   `relu`; g = {N, C, H, W, M, KH, KW, OH, OW, SH, SW, PT, PL, PB, PR}. NULL on a failure. */
void *bench_dnnl_conv(const int64_t *g, int any, const float *w, const float *b, int relu) {
  bench_dnnl *h = bench_start();
  if (h == NULL) return NULL;
  const int64_t xd[] = {g[0], g[1], g[2], g[3]}, wd[] = {g[4], g[1], g[5], g[6]};
  const int64_t yd[] = {g[0], g[4], g[7], g[8]}, bd[] = {g[4]};
  const dnnl_dims_t strides = {g[9], g[10]}, dilates = {0, 0}, left = {g[11], g[12]}, right = {g[13], g[14]};
  dnnl_memory_desc_t src_md = bench_md(4, xd, dnnl_nchw), dst_md = bench_md(4, yd, dnnl_nchw);
  dnnl_memory_desc_t wmd = bench_md(4, wd, dnnl_oihw), bmd = bench_md(1, bd, dnnl_a);
  const dnnl_format_tag_t chosen = any ? dnnl_format_tag_any : dnnl_nchw;
  dnnl_memory_desc_t src_any = bench_md(4, xd, chosen), dst_any = bench_md(4, yd, chosen);
  dnnl_memory_desc_t w_any = bench_md(4, wd, any ? dnnl_format_tag_any : dnnl_oihw);
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  int failed = dnnl_primitive_attr_create(&attr) != dnnl_success || dnnl_post_ops_create(&ops) != dnnl_success
      || (relu && dnnl_post_ops_append_eltwise(ops, dnnl_eltwise_relu, 0.0f, 0.0f) != dnnl_success)
      || dnnl_primitive_attr_set_post_ops(attr, ops) != dnnl_success
      || dnnl_convolution_forward_primitive_desc_create(&pd, h->engine, dnnl_forward_inference,
             dnnl_convolution_auto, src_any, w_any, b != NULL ? bmd : NULL, dst_any, strides, dilates, left,
             right, attr) != dnnl_success;
  failed = failed || bench_finish(h, pd, src_md, dst_md, wmd, w, bmd, b);
  dnnl_memory_desc_t mds[] = {src_md, dst_md, wmd, bmd, src_any, dst_any, w_any};
  return bench_made(h, failed, pd, ops, attr, mds, sizeof mds / sizeof mds[0]);
}

/* The run-time argument `arg` of h: n values of data type dt at p. 0 on success. */
static int bench_quant_arg(bench_dnnl *h, int arg, int64_t n, dnnl_data_type_t dt, void *p) {
  dnnl_memory_desc_t md = bench_md_of(1, &n, dt, dnnl_a);
  dnnl_exec_arg_t *a = &h->quant[h->n_quant];
  const int failed = md == NULL || dnnl_memory_create(&a->memory, md, h->engine, p) != dnnl_success;
  if (md != NULL) dnnl_memory_desc_destroy(md);
  if (failed) return 1;
  a->arg = arg;
  h->n_quant += 1;
  return 0;
}

/* The int8 conv2d of x (N, C, H, W; uint8 when `src_u8`, else int8) by the int8
   weights w (M, C, KH, KW; their zero point 0) into (N, M, OH, OW) of the same data
   type, as ONNX's QDQ Conv with its bias and an optional relu: the sums of (x - xz) *
   w in int32, times xs * ws[m], plus the float32 bias b (dequantized), relu, divided
   by ys, rounded, plus yz, saturated. The primitive picks its formats (`any`): the
   weights are reordered once here, the source and the result by every run, as the
   dnnl backend does. g as bench_dnnl_conv reads it. NULL on a failure. */
void *bench_dnnl_conv_q8(const int64_t *g, int src_u8, const int8_t *w, const float *ws, const float *b, int relu,
                         float xs, int32_t xz, float ys, int32_t yz) {
  bench_dnnl *h = bench_start();
  if (h == NULL) return NULL;
  const dnnl_data_type_t dt = src_u8 ? dnnl_u8 : dnnl_s8;
  const int64_t xd[] = {g[0], g[1], g[2], g[3]}, wd[] = {g[4], g[1], g[5], g[6]};
  const int64_t yd[] = {g[0], g[4], g[7], g[8]}, bd[] = {g[4]};
  const dnnl_dims_t strides = {g[9], g[10]}, dilates = {0, 0}, left = {g[11], g[12]}, right = {g[13], g[14]};
  dnnl_memory_desc_t src_md = bench_md_of(4, xd, dt, dnnl_nchw), dst_md = bench_md_of(4, yd, dt, dnnl_nchw);
  dnnl_memory_desc_t wmd = bench_md_of(4, wd, dnnl_s8, dnnl_oihw), bmd = bench_md(1, bd, dnnl_a);
  dnnl_memory_desc_t src_any = bench_md_of(4, xd, dt, dnnl_format_tag_any);
  dnnl_memory_desc_t dst_any = bench_md_of(4, yd, dt, dnnl_format_tag_any);
  dnnl_memory_desc_t w_any = bench_md_of(4, wd, dnnl_s8, dnnl_format_tag_any);
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  h->w_scales = (float *)malloc(sizeof(float) * (size_t)g[4]);
  int failed = h->w_scales == NULL || dnnl_primitive_attr_create(&attr) != dnnl_success
      || dnnl_post_ops_create(&ops) != dnnl_success
      || (relu && dnnl_post_ops_append_eltwise(ops, dnnl_eltwise_relu, 0.0f, 0.0f) != dnnl_success)
      || dnnl_primitive_attr_set_post_ops(attr, ops) != dnnl_success
      || dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_SRC, 0) != dnnl_success
      || dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_WEIGHTS, 1) != dnnl_success
      || dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_DST, 0) != dnnl_success
      || dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_SRC, 0) != dnnl_success
      || dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_DST, 0) != dnnl_success
      || dnnl_convolution_forward_primitive_desc_create(&pd, h->engine, dnnl_forward_inference,
             dnnl_convolution_direct, src_any, w_any, bmd, dst_any, strides, dilates, left, right,
             attr) != dnnl_success;
  if (!failed) {
    memcpy(h->w_scales, ws, sizeof(float) * (size_t)g[4]);
    h->quant_f32[0] = xs;
    h->quant_f32[1] = ys;
    h->quant_s32[0] = xz;
    h->quant_s32[1] = yz;
  }
  failed = failed || bench_finish(h, pd, src_md, dst_md, wmd, w, bmd, b)
      || bench_quant_arg(h, DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, 1, dnnl_f32, &h->quant_f32[0])
      || bench_quant_arg(h, DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, g[4], dnnl_f32, h->w_scales)
      || bench_quant_arg(h, DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, 1, dnnl_f32, &h->quant_f32[1])
      || bench_quant_arg(h, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, 1, dnnl_s32, &h->quant_s32[0])
      || bench_quant_arg(h, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, 1, dnnl_s32, &h->quant_s32[1]);
  dnnl_memory_desc_t mds[] = {src_md, dst_md, wmd, bmd, src_any, dst_any, w_any};
  return bench_made(h, failed, pd, ops, attr, mds, sizeof mds / sizeof mds[0]);
}

/* h made from pd over the plain descriptors src_md, dst_md and wmd (weights w, no
   bias), unless `failed` says pd was not made; pd and the descriptors are released.
   h, or NULL (h freed) on a failure. */
static void *bench_plain(bench_dnnl *h, int failed, dnnl_primitive_desc_t pd, dnnl_memory_desc_t src_md,
                         dnnl_memory_desc_t dst_md, dnnl_memory_desc_t wmd, const void *w) {
  failed = failed || bench_finish(h, pd, src_md, dst_md, wmd, w, NULL, NULL);
  dnnl_memory_desc_t mds[] = {src_md, dst_md, wmd};
  return bench_made(h, failed, pd, NULL, NULL, mds, sizeof mds / sizeof mds[0]);
}

/* dense: y (B, U) = x (B, K) times w (U, K) transposed, an inner product on plain
   tensors (nc, oi). NULL on a failure. */
void *bench_dnnl_dense(int64_t batch, int64_t k, int64_t units, const float *w) {
  bench_dnnl *h = bench_start();
  if (h == NULL) return NULL;
  const int64_t xd[] = {batch, k}, wd[] = {units, k}, yd[] = {batch, units};
  dnnl_memory_desc_t src_md = bench_md(2, xd, dnnl_nc), dst_md = bench_md(2, yd, dnnl_nc);
  dnnl_memory_desc_t wmd = bench_md(2, wd, dnnl_oi);
  dnnl_primitive_desc_t pd = NULL;
  const int failed = dnnl_inner_product_forward_primitive_desc_create(&pd, h->engine, dnnl_forward_inference,
                                                                      src_md, wmd, NULL, dst_md, NULL) != dnnl_success;
  return bench_plain(h, failed, pd, src_md, dst_md, wmd, w);
}

/* matmul: y (..., M, N) = x (..., M, K) times w (..., K, N), all row-major with `rank`
   (2 to 6) dims: xd and wd give the operands' dims, their batch dims as given (the
   caller pads the lower-rank one with leading 1s; oneDNN broadcasts a dim of 1).
   NULL on a failure. */
void *bench_dnnl_matmul(int rank, const int64_t *xd, const int64_t *wd, const float *w) {
  static const dnnl_format_tag_t row_major[] = {dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  if (rank < 2 || rank > 6) return NULL;
  bench_dnnl *h = bench_start();
  if (h == NULL) return NULL;
  int64_t yd[6];
  for (int k = 0; k < rank - 2; ++k) yd[k] = xd[k] == 1 ? wd[k] : xd[k];
  yd[rank - 2] = xd[rank - 2];
  yd[rank - 1] = wd[rank - 1];
  const dnnl_format_tag_t tag = row_major[rank - 2];
  dnnl_memory_desc_t src_md = bench_md(rank, xd, tag), dst_md = bench_md(rank, yd, tag);
  dnnl_memory_desc_t wmd = bench_md(rank, wd, tag);
  dnnl_primitive_desc_t pd = NULL;
  const int failed = src_md == NULL || dst_md == NULL || wmd == NULL
      || dnnl_matmul_primitive_desc_create(&pd, h->engine, src_md, wmd, NULL, dst_md, NULL) != dnnl_success;
  return bench_plain(h, failed, pd, src_md, dst_md, wmd, w);
}

/* The implementation oneDNN chose (e.g. "brg:avx512_core"). */
const char *bench_dnnl_impl(void *handle) { return ((bench_dnnl *)handle)->impl; }

/* Run the handle on x, writing y, `reps` times; 0 on success. */
int bench_dnnl_run(void *handle, const void *x, void *y, long reps) {
  bench_dnnl *h = (bench_dnnl *)handle;
  if (dnnl_memory_set_data_handle(h->user_src, (void *)x) != dnnl_success
      || dnnl_memory_set_data_handle(h->user_dst, y) != dnnl_success) {
    return 1;
  }
  const dnnl_exec_arg_t src_in[] = {{DNNL_ARG_FROM, h->user_src}, {DNNL_ARG_TO, h->src}};
  const dnnl_exec_arg_t dst_out[] = {{DNNL_ARG_FROM, h->dst}, {DNNL_ARG_TO, h->user_dst}};
  dnnl_exec_arg_t args[4 + BENCH_QUANT_ARGS] = {
      {DNNL_ARG_SRC, h->src}, {DNNL_ARG_WEIGHTS, h->weights}, {DNNL_ARG_DST, h->dst}, {DNNL_ARG_BIAS, h->bias}};
  int nargs = h->bias != NULL ? 4 : 3;
  for (int k = 0; k < h->n_quant; ++k) args[nargs++] = h->quant[k];
  for (long r = 0; r < reps; ++r) {
    if (h->src_in != NULL && bench_run_once(h->src_in, h->stream, 2, src_in)) return 1;
    if (bench_run_once(h->main, h->stream, nargs, args)) return 1;
    if (h->dst_out != NULL && bench_run_once(h->dst_out, h->stream, 2, dst_out)) return 1;
    if (dnnl_stream_wait(h->stream) != dnnl_success) return 1;
  }
  return 0;
}
