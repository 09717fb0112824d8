/* The dnnl backend's support code: what dnnl_support.h declares, and the helpers
   behind it. Compiled on its own, once per spec version, compiler and flags (the
   spec's `compile:` flags, -DDNNL_BYOC_WINOGRAD with the option `winograd`). */
#if defined(__linux__)
#define _DEFAULT_SOURCE 1 /* madvise under -std=c11: the huge pages of packed weights */
#include <sys/mman.h>
#endif
#include "dnnl_support.h"

/* The plain row-major strides of `rank` extents (an empty axis counted as one). */
static inline void dnnl_byoc_plain_strides(int rank, const int64_t* extents, int64_t* strides) {
  int64_t step = 1;
  for (int k = rank - 1; k >= 0; --k) {
    strides[k] = step;
    step *= extents[k] > 0 ? extents[k] : 1;
  }
}

/* A memory descriptor of `rank` extents of data type `dt` stored with `strides` (0
   where the data repeats along an axis); NULL when oneDNN cannot make it. */
static inline dnnl_memory_desc_t dnnl_byoc_md_strided(int rank, const int64_t* extents, const int64_t* strides,
                                                      dnnl_data_type_t dt) {
  dnnl_dims_t dims, steps;
  for (int k = 0; k < rank; ++k) {
    dims[k] = extents[k];
    steps[k] = strides[k];
  }
  dnnl_memory_desc_t md = NULL;
  if (dnnl_memory_desc_create_with_strides(&md, rank, dims, dt, steps) != dnnl_success) return NULL;
  return md;
}

/* A memory descriptor of `rank` extents of data type `dt`, plain row-major (nchw,
   oihw, nc, oi, ...); NULL when oneDNN cannot make it. */
static inline dnnl_memory_desc_t dnnl_byoc_md_of(int rank, const int64_t* extents, dnnl_data_type_t dt) {
  int64_t strides[DNNL_MAX_NDIMS];
  dnnl_byoc_plain_strides(rank, extents, strides);
  return dnnl_byoc_md_strided(rank, extents, strides, dt);
}

/* A float32 memory descriptor of `rank` extents, plain row-major; NULL when oneDNN
   cannot make it. */
static inline dnnl_memory_desc_t dnnl_byoc_md(int rank, const int64_t* extents) {
  return dnnl_byoc_md_of(rank, extents, dnnl_f32);
}

/* A float32 memory descriptor of `rank` extents in whatever layout the primitive
   that takes it picks (format_tag_any: blocked, nChw16c or OIhw16i16o, where that
   pays); NULL when oneDNN cannot make it. */
static inline dnnl_memory_desc_t dnnl_byoc_md_any(int rank, const int64_t* extents) {
  dnnl_dims_t dims;
  for (int k = 0; k < rank; ++k) dims[k] = extents[k];
  dnnl_memory_desc_t md = NULL;
  if (dnnl_memory_desc_create_with_tag(&md, rank, dims, dnnl_f32, dnnl_format_tag_any) != dnnl_success) return NULL;
  return md;
}

/* A memory descriptor of data type dt of the 4 extents (N, C, H, W) stored in
   `layout`, one of DNNL_BYOC_LAYOUT_*; NULL when oneDNN cannot make it. */
static inline dnnl_memory_desc_t dnnl_byoc_md_4d_of(const int64_t* extents, int layout, dnnl_data_type_t dt) {
  const dnnl_dims_t dims = {extents[0], extents[1], extents[2], extents[3]};
  dnnl_memory_desc_t md = NULL;
  const dnnl_format_tag_t tag = layout == DNNL_BYOC_LAYOUT_plain ? dnnl_nchw : dnnl_nhwc;
  if (dnnl_memory_desc_create_with_tag(&md, 4, dims, dt, tag) != dnnl_success) return NULL;
  return md;
}

/* The float32 one. */
static inline dnnl_memory_desc_t dnnl_byoc_md_4d(const int64_t* extents, int layout) {
  return dnnl_byoc_md_4d_of(extents, layout, dnnl_f32);
}

/* Primitive attributes: a user-managed scratchpad (a kernel's reusable one, or a
   call's own, so calls from several threads share no scratch memory), then the
   post-ops: with `sum` the result is added to what the output holds, with an
   `operand` (not NULL) the result and a tensor of that descriptor
   (DNNL_BYOC_ARG_OPERAND) are combined by `binary` (dnnl_binary_add, _mul), and an
   `eltwise` algorithm (dnnl_alg_kind_undef: none; relu, gelu, ...) follows, with alpha
   and beta 0, but swish's alpha 1 (x * sigmoid(alpha * x): the catalog's
   m * sigmoid(m)). NULL on a failure. */
static inline dnnl_primitive_attr_t dnnl_byoc_attr_binary(int sum, dnnl_alg_kind_t binary,
                                                          const_dnnl_memory_desc_t operand, dnnl_alg_kind_t eltwise) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
  const int ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success
      && dnnl_post_ops_create(&ops) == dnnl_success
      && (!sum || dnnl_post_ops_append_sum(ops, 1.0f, 0, dnnl_data_type_undef) == dnnl_success)
      && (operand == NULL || dnnl_post_ops_append_binary(ops, binary, operand) == dnnl_success)
      && (eltwise == dnnl_alg_kind_undef
          || dnnl_post_ops_append_eltwise(ops, eltwise, eltwise == dnnl_eltwise_swish ? 1.0f : 0.0f, 0.0f)
                 == dnnl_success)
      && dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
  if (ops != NULL) dnnl_post_ops_destroy(ops);
  if (!ok) {
    dnnl_primitive_attr_destroy(attr);
    return NULL;
  }
  return attr;
}

/* dnnl_byoc_attr_binary adding an `addend` (not NULL) to the result. */
static inline dnnl_primitive_attr_t dnnl_byoc_attr_post(int sum, const_dnnl_memory_desc_t addend,
                                                        dnnl_alg_kind_t eltwise) {
  return dnnl_byoc_attr_binary(sum, dnnl_binary_add, addend, eltwise);
}

/* dnnl_byoc_attr_post with a relu when `relu`, and no other post-op. */
static inline dnnl_primitive_attr_t dnnl_byoc_attr(int sum, const_dnnl_memory_desc_t addend, int relu) {
  return dnnl_byoc_attr_post(sum, addend, relu ? dnnl_eltwise_relu : dnnl_alg_kind_undef);
}

/* The primitive of a descriptor that `made` says was created; releases the
   descriptor, the attributes and the `n` memory descriptors. 0 on success. */
static inline int dnnl_byoc_finish(dnnl_primitive_t* prim, dnnl_status_t made, dnnl_primitive_desc_t pd,
                                   dnnl_primitive_attr_t attr, dnnl_memory_desc_t* mds, int n) {
  const int ok = made == dnnl_success && dnnl_primitive_create(prim, pd) == dnnl_success;
  if (made == dnnl_success) dnnl_primitive_desc_destroy(pd);
  if (attr != NULL) dnnl_primitive_attr_destroy(attr);
  for (int k = 0; k < n; ++k) {
    if (mds[k] != NULL) dnnl_memory_desc_destroy(mds[k]);
  }
  return ok ? 0 : 1;
}

/* The descriptor *pd of a convolution from src by w, plus b (NULL: no bias), to dst,
   with the attributes attr (NULL, when making them failed: dnnl_out_of_memory), of
   geometry g. oneDNN counts dilation from 0 (byoc's 1 is its 0), and takes grouped
   weights as (G, M/G, C/G, KH, KW), the same bytes as (M, C/G, KH, KW). */
static inline dnnl_status_t dnnl_byoc_conv_desc(dnnl_primitive_desc_t* pd, dnnl_engine_t engine,
                                                const dnnl_byoc_conv_geometry* g,
                                                const_dnnl_memory_desc_t src, const_dnnl_memory_desc_t w,
                                                const_dnnl_memory_desc_t b, const_dnnl_memory_desc_t dst,
                                                const_dnnl_primitive_attr_t attr) {
  /* oneDNN reads each spatial list as a whole dnnl_dims_t */
  const dnnl_dims_t strides = {g->stride_h, g->stride_w}, dilates = {g->dilation_h - 1, g->dilation_w - 1};
  const dnnl_dims_t left = {g->pad_top, g->pad_left}, right = {g->pad_bottom, g->pad_right};
  *pd = NULL;
  if (attr == NULL) return dnnl_out_of_memory;
  return dnnl_convolution_forward_primitive_desc_create(pd, engine, dnnl_forward_inference, dnnl_convolution_direct,
                                                        src, w, b, dst, strides, dilates, left, right, attr);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_dense(dnnl_primitive_t* prim, dnnl_engine_t engine, int64_t batch, int64_t k,
                    int64_t units, int bias, int relu, dnnl_data_type_t dt) {
  const int64_t x[] = {batch, k}, w[] = {units, k}, y[] = {batch, units}, b[] = {units};
  if (k == 0) {
    *prim = NULL;
    if (!bias || !relu) return 0;
    dnnl_memory_desc_t md = dnnl_byoc_md_of(2, y, dt);
    dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
    dnnl_primitive_desc_t pd = NULL;
    const dnnl_status_t made = attr == NULL || md == NULL ? dnnl_out_of_memory
        : dnnl_eltwise_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, dnnl_eltwise_relu, md, md,
            0.0f, 0.0f, attr);
    return dnnl_byoc_finish(prim, made, pd, attr, &md, 1);
  }
  dnnl_memory_desc_t mds[4] = {dnnl_byoc_md_of(2, x, dt), dnnl_byoc_md_of(2, w, dt), dnnl_byoc_md_of(2, y, dt),
                               bias ? dnnl_byoc_md_of(1, b, dt) : NULL};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, relu);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_inner_product_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, mds[0], mds[1],
            mds[3], mds[2], attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, 4);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_pool2d(dnnl_primitive_t* prim, dnnl_engine_t engine, const dnnl_byoc_pool_geometry* g,
                     dnnl_alg_kind_t alg, int x_layout, int y_layout) {
  const int64_t x[] = {g->n, g->c, g->h, g->w}, y[] = {g->n, g->c, g->oh, g->ow};
  /* oneDNN reads each spatial list as a whole dnnl_dims_t */
  const dnnl_dims_t kernel = {g->kh, g->kw}, strides = {g->stride_h, g->stride_w};
  const dnnl_dims_t dilates = {g->dilation_h - 1, g->dilation_w - 1}, left = {g->pad_top, g->pad_left};
  const int64_t out[] = {g->oh, g->ow}, in[] = {g->h, g->w}, pads[] = {g->pad_bottom, g->pad_right};
  dnnl_dims_t right = {0};
  for (int a = 0; a < 2; ++a) {
    const int64_t reach = (out[a] - 1) * strides[a] + (kernel[a] - 1) * (dilates[a] + 1) + 1 - in[a] - left[a];
    right[a] = reach > pads[a] ? reach : pads[a];
  }
  /* a (N, C, 1, 1) result has the same bytes in either layout: take the source's, so
     that oneDNN runs its jit pooling (one of mixed layouts runs its reference code) */
  if (g->oh == 1 && g->ow == 1) y_layout = x_layout;
  dnnl_memory_desc_t mds[2] = {dnnl_byoc_md_4d(x, x_layout), dnnl_byoc_md_4d(y, y_layout)};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL || mds[0] == NULL || mds[1] == NULL ? dnnl_out_of_memory
      : dnnl_pooling_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, alg, mds[0], mds[1],
            strides, kernel, dilates, left, right, attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, 2);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_concat4d(dnnl_primitive_t* prim, dnnl_engine_t engine, int n, const int64_t* shapes,
                       int axis, const int* layouts) {
  dnnl_memory_desc_t mds[DNNL_BYOC_MAX_ARGS] = {NULL};
  if (n + 1 > DNNL_BYOC_MAX_ARGS) return 1;
  int ok = 1;
  for (int k = 0; ok && k <= n; ++k) ok = (mds[k] = dnnl_byoc_md_4d(shapes + 4 * k, layouts[k])) != NULL;
  dnnl_primitive_attr_t attr = ok ? dnnl_byoc_attr(0, NULL, 0) : NULL;
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_concat_primitive_desc_create(&pd, engine, mds[n], n, axis, (const_dnnl_memory_desc_t*)mds, attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, n + 1);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_eltwise(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank,
                      const int64_t* extents, dnnl_alg_kind_t alg, double alpha, double beta,
                      dnnl_data_type_t dt) {
  dnnl_memory_desc_t mds[1] = {dnnl_byoc_md_of(rank, extents, dt)};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_eltwise_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, alg, mds[0], mds[0],
            (float)alpha, (float)beta, attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, 1);
}

/* Declared, and described, in dnnl_support.h. */
void dnnl_byoc_gelu_infinities(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > 3.40282347e38f) out[i] = x[i]; /* above FLT_MAX: +inf */
  }
}

/* Declared, and described, in dnnl_support.h. */
void dnnl_byoc_matmul_gelu_infinities(const float* a, const float* w, const float* bias, int64_t bias_n,
                                      float* out, int64_t rows, int64_t k, int64_t n) {
  int any = 0;
  for (int64_t i = 0; i < rows * n; ++i) any |= out[i] != out[i]; /* a pass the compiler vectorises */
  if (!any) return;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (out[i * n + j] == out[i * n + j]) continue;
      float s = bias[bias_n == 1 ? 0 : j];
      for (int64_t q = 0; q < k; ++q) s += a[i * k + q] * w[q * n + j];
      if (s > 3.40282347e38f) out[i * n + j] = s; /* the sum is +inf: so is its gelu */
    }
  }
}

/* The memory descriptors of matmul a (ra extents) by b (rb extents) as numpy has it
   (dnnl_byoc_matmul), into mds: a, b, the result, and a bias of `bias` values along
   the last axis (0: none, mds[3] NULL). With `plain_b` not NULL, mds[1] lets oneDNN
   pick b's layout (dnnl_format_tag_any) and *plain_b is b's plain one. 0 for an empty
   sum or result (no descriptors), 1 when made, -1 on a failure. */
static int dnnl_byoc_matmul_mds(dnnl_memory_desc_t* mds, int ra, const int64_t* a, int rb, const int64_t* b,
                                dnnl_data_type_t dt, int64_t bias, dnnl_memory_desc_t* plain_b) {
  const int r = ra > rb ? (ra > 2 ? ra : 2) : (rb > 2 ? rb : 2);
  int64_t ea[DNNL_MAX_NDIMS], eb[DNNL_MAX_NDIMS], ey[DNNL_MAX_NDIMS], size = 1;
  mds[0] = mds[1] = mds[2] = mds[3] = NULL;
  if (plain_b != NULL) *plain_b = NULL;
  if (r > DNNL_MAX_NDIMS) return -1;
  for (int k = 0; k < r; ++k) ea[k] = eb[k] = 1;
  for (int k = 0; k < ra; ++k) ea[r - (ra == 1 ? 1 : ra) + k] = a[k];
  for (int k = 0; k < rb; ++k) eb[r - (rb == 1 ? 2 : rb) + k] = b[k];
  for (int k = 0; k < r - 2; ++k) ey[k] = ea[k] == 1 ? eb[k] : ea[k];
  ey[r - 2] = ea[r - 2];
  ey[r - 1] = eb[r - 1];
  for (int k = 0; k < r; ++k) size *= ey[k];
  if (size == 0 || ea[r - 1] == 0) return 0;
  mds[0] = dnnl_byoc_md_of(r, ea, dt);
  if (plain_b != NULL) {
    *plain_b = dnnl_byoc_md_of(r, eb, dt);
    if (dnnl_memory_desc_create_with_tag(&mds[1], r, eb, dt, dnnl_format_tag_any) != dnnl_success) mds[1] = NULL;
  } else {
    mds[1] = dnnl_byoc_md_of(r, eb, dt);
  }
  mds[2] = dnnl_byoc_md_of(r, ey, dt);
  if (bias > 0) { /* (1, ..., 1, bias): broadcast along every axis but the last */
    int64_t e[DNNL_MAX_NDIMS];
    for (int k = 0; k < r; ++k) e[k] = 1;
    e[r - 1] = bias;
    mds[3] = dnnl_byoc_md_of(r, e, dt);
  }
  const int made = mds[0] != NULL && mds[1] != NULL && mds[2] != NULL && (bias == 0 || mds[3] != NULL)
      && (plain_b == NULL || *plain_b != NULL);
  return made ? 1 : -1;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_matmul(dnnl_primitive_t* prim, dnnl_engine_t engine, int ra, const int64_t* a,
                     int rb, const int64_t* b, dnnl_data_type_t dt) {
  dnnl_memory_desc_t mds[4];
  *prim = NULL;
  const int made_mds = dnnl_byoc_matmul_mds(mds, ra, a, rb, b, dt, 0, NULL);
  if (made_mds == 0) return 0;
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL || made_mds < 0
      ? dnnl_out_of_memory : dnnl_matmul_primitive_desc_create(&pd, engine, mds[0], mds[1], NULL, mds[2], attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, 4);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_softmax(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank,
                      const int64_t* extents, int axis, dnnl_data_type_t dt) {
  dnnl_memory_desc_t mds[1] = {dnnl_byoc_md_of(rank, extents, dt)};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_softmax_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, dnnl_softmax_accurate,
            mds[0], mds[0], axis, attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, 1);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_layer_norm(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank, const int64_t* extents,
                         double epsilon) {
  int64_t rows = 1;
  for (int k = 0; k + 1 < rank; ++k) rows *= extents[k];
  const int64_t flat[2] = {rows, rank > 0 ? extents[rank - 1] : 1};
  dnnl_memory_desc_t mds[1] = {dnnl_byoc_md(2, flat)};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL || mds[0] == NULL ? dnnl_out_of_memory
      : dnnl_layer_normalization_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, mds[0],
            mds[0], NULL, (float)epsilon, dnnl_use_scale | dnnl_use_shift, attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, 1);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_layer_norm_run(dnnl_byoc_prim_t* p, dnnl_engine_t engine, const float* x, const float* scale,
                             int64_t scale_n, const float* shift, int64_t shift_n, float* out, int64_t c) {
  float* spread = NULL; /* a scale or shift of one value, repeated c times */
  if (scale_n != c || shift_n != c) {
    spread = (float*)malloc(sizeof(float) * 2 * (size_t)(c > 0 ? c : 1));
    if (spread == NULL) return 1;
    for (int64_t k = 0; k < c; ++k) {
      spread[k] = scale[scale_n == c ? k : 0];
      spread[c + k] = shift[shift_n == c ? k : 0];
    }
    scale = spread;
    shift = spread + c;
  }
  const int status = dnnl_byoc_run(p, engine, 4, (const int[]){DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST},
                                   (void* const[]){(void*)x, (void*)scale, (void*)shift, out});
  free(spread);
  return status;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_batch_norm(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank,
                         const int64_t* extents, double epsilon, int relu) {
  const unsigned flags = dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift
      | (relu ? dnnl_fuse_norm_relu : 0U);
  dnnl_memory_desc_t mds[1] = {dnnl_byoc_md(rank, extents)};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_batch_normalization_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, mds[0],
            mds[0], (float)epsilon, flags, attr);
  return dnnl_byoc_finish(prim, made, pd, attr, mds, 1);
}

/* The bytes of scratchpad `prim` needs (its attributes ask for a user-managed one). */
static inline size_t dnnl_byoc_scratch_size(const_dnnl_primitive_t prim) {
  const_dnnl_primitive_desc_t pd = NULL;
  if (prim == NULL || dnnl_primitive_get_primitive_desc(prim, &pd) != dnnl_success) return 0;
  const_dnnl_memory_desc_t md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  return md != NULL ? dnnl_memory_desc_get_size(md) : 0;
}

static inline void dnnl_byoc_step_free(dnnl_byoc_step_t* step) {
  for (int k = 0; k < step->n; ++k) dnnl_memory_destroy(step->args[k].memory);
  step->n = 0;
}

/* Executes prim in stream on ptrs[k] for the execution arguments kinds[k], each of
   memory descriptor mds[k] (mds NULL, or an entry NULL: the one the primitive has for
   that argument), with `scratch` (of dnnl_byoc_scratch_size bytes) as its scratchpad,
   and waits for it. With `kept` the memories are kept there: made by the first call,
   their data handles set by the next ones (which pass the same kinds, descriptors
   and scratch); without, made and released here. 1 on success. */
static inline int dnnl_byoc_execute_args(const_dnnl_primitive_t prim, dnnl_engine_t engine, dnnl_stream_t stream,
                                         int n, const int* kinds, const const_dnnl_memory_desc_t* mds,
                                         void* const* ptrs, void* scratch, dnnl_byoc_step_t* kept) {
  dnnl_byoc_step_t own = {0, {{0, NULL}}};
  dnnl_byoc_step_t* step = kept != NULL ? kept : &own;
  int ok = n < DNNL_BYOC_EXEC_ARGS;
  if (ok && step->n > 0) {
    for (int k = 0; ok && k < n; ++k) ok = dnnl_memory_set_data_handle(step->args[k].memory, ptrs[k]) == dnnl_success;
  } else if (ok) {
    const_dnnl_primitive_desc_t pd = NULL;
    ok = dnnl_primitive_get_primitive_desc(prim, &pd) == dnnl_success;
    for (; ok && step->n < n; ++step->n) {
      dnnl_exec_arg_t* arg = &step->args[step->n];
      arg->arg = kinds[step->n];
      const_dnnl_memory_desc_t md = mds != NULL && mds[step->n] != NULL ? mds[step->n]
          : dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, kinds[step->n]);
      ok = dnnl_memory_create(&arg->memory, md, engine, ptrs[step->n]) == dnnl_success;
      if (!ok) break;
    }
    const_dnnl_memory_desc_t scratch_md = ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
    if (ok && scratch_md != NULL && dnnl_memory_desc_get_size(scratch_md) > 0) {
      step->args[step->n].arg = DNNL_ARG_SCRATCHPAD;
      ok = dnnl_memory_create(&step->args[step->n].memory, scratch_md, engine, scratch) == dnnl_success;
      step->n += ok;
    }
  }
  ok = ok && dnnl_primitive_execute(prim, stream, step->n, step->args) == dnnl_success
      && dnnl_stream_wait(stream) == dnnl_success;
  if (kept == NULL || !ok) dnnl_byoc_step_free(step);
  return ok;
}

/* The same with the primitive's own descriptors and no memories kept. */
static inline int dnnl_byoc_execute(const_dnnl_primitive_t prim, dnnl_engine_t engine, dnnl_stream_t stream,
                                    int n, const int* kinds, void* const* ptrs, void* scratch) {
  return dnnl_byoc_execute_args(prim, engine, stream, n, kinds, NULL, ptrs, scratch, NULL);
}

/* Runs `prim` on the buffers ptrs[k] for its execution arguments kinds[k], in a
   stream of its own and with scratch memory of its own, so that calls from several
   threads write nothing they share. 0 on success; 1 when oneDNN or an allocation
   fails (the kernels return it: their macros say `status: true`, and the call
   raises RuntimeError). */
static inline int dnnl_byoc_run_alone(const_dnnl_primitive_t prim, dnnl_engine_t engine, int n, const int* kinds,
                                      void* const* ptrs) {
  const size_t bytes = dnnl_byoc_scratch_size(prim);
  void* scratch = bytes > 0 ? malloc(bytes) : NULL;
  dnnl_stream_t stream = NULL;
  const int ok = (bytes == 0 || scratch != NULL)
      && dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success
      && dnnl_byoc_execute(prim, engine, stream, n, kinds, ptrs, scratch);
  free(scratch);
  if (stream != NULL) dnnl_stream_destroy(stream);
  return ok ? 0 : 1;
}

/* Releases the reusable part of p (what dnnl_byoc_prim_cache made, or part of it). */
static inline void dnnl_byoc_prim_uncache(dnnl_byoc_prim_t* p) {
  for (int k = 0; k < p->n; ++k) dnnl_memory_destroy(p->args[k].memory);
  if (p->stream != NULL) dnnl_stream_destroy(p->stream);
  free(p->scratch);
  p->n = 0;
  p->stream = NULL;
  p->scratch = NULL;
  p->ready = 0;
}

/* Declared, and described, in dnnl_support.h. */
void dnnl_byoc_prim_free(dnnl_byoc_prim_t* p) {
  dnnl_byoc_prim_uncache(p);
  if (p->prim != NULL) dnnl_primitive_destroy(p->prim);
  p->prim = NULL;
}

/* Makes p's reusable part for the execution arguments kinds[0 .. n): memories
   without buffers (DNNL_MEMORY_NONE; each call sets them), the scratchpad's and its
   bytes, and a stream. On a failure it releases what it made, so that no call uses
   a half-made part (the next one tries again). 1 on success. */
static inline int dnnl_byoc_prim_cache(dnnl_byoc_prim_t* p, dnnl_engine_t engine, int n, const int* kinds) {
  const_dnnl_primitive_desc_t pd = NULL;
  int ok = n <= DNNL_BYOC_MAX_ARGS && dnnl_primitive_get_primitive_desc(p->prim, &pd) == dnnl_success;
  for (; ok && p->n < n; ++p->n) {
    p->args[p->n].arg = kinds[p->n];
    const_dnnl_memory_desc_t md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, kinds[p->n]);
    ok = dnnl_memory_create(&p->args[p->n].memory, md, engine, DNNL_MEMORY_NONE) == dnnl_success;
    if (!ok) break;
  }
  const_dnnl_memory_desc_t scratch_md = ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
  const size_t bytes = scratch_md != NULL ? dnnl_memory_desc_get_size(scratch_md) : 0;
  if (ok && bytes > 0) {
    p->scratch = malloc(bytes);
    p->args[p->n].arg = DNNL_ARG_SCRATCHPAD;
    ok = p->scratch != NULL
        && dnnl_memory_create(&p->args[p->n].memory, scratch_md, engine, p->scratch) == dnnl_success;
    p->n += ok;
  }
  ok = ok && dnnl_stream_create(&p->stream, engine, dnnl_stream_default_flags) == dnnl_success;
  if (!ok) dnnl_byoc_prim_uncache(p);
  p->ready = ok;
  return ok;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_run(dnnl_byoc_prim_t* p, dnnl_engine_t engine, int n, const int* kinds,
                  void* const* ptrs) {
  if (atomic_exchange_explicit(&p->busy, 1, memory_order_acquire) != 0) {
    return dnnl_byoc_run_alone(p->prim, engine, n, kinds, ptrs);
  }
  int ok = p->ready || dnnl_byoc_prim_cache(p, engine, n, kinds);
  for (int k = 0; ok && k < n; ++k) ok = dnnl_memory_set_data_handle(p->args[k].memory, ptrs[k]) == dnnl_success;
  ok = ok && dnnl_primitive_execute(p->prim, p->stream, p->n, p->args) == dnnl_success
      && dnnl_stream_wait(p->stream) == dnnl_success;
  atomic_store_explicit(&p->busy, 0, memory_order_release);
  return ok ? 0 : 1;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_matmul_run(dnnl_byoc_prim_t* p, dnnl_engine_t engine, const void* a, const void* b, void* out,
                         size_t bytes) {
  if (p->prim == NULL) { /* an empty sum or an empty result */
    memset(out, 0, bytes);
    return 0;
  }
  return dnnl_byoc_run(p, engine, 3, (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                       (void* const[]){(void*)a, (void*)b, out});
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_dense_empty(dnnl_byoc_prim_t* p, dnnl_engine_t engine, const void* b, void* out,
                          int64_t batch, int64_t units, size_t size) {
  const size_t row = (size_t)units * size;
  for (int64_t i = 0; i < batch; ++i) {
    if (b != NULL) memcpy((char*)out + (size_t)i * row, b, row);
    else memset((char*)out + (size_t)i * row, 0, row);
  }
  if (p->prim == NULL) return 0;
  return dnnl_byoc_run(p, engine, 2, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, (void* const[]){out, out});
}

/* batch_norm(conv(x, w)) = conv(x, w * k) + (shift - mean * k) per output channel
   c, k = scale[c] / sqrt(var[c] + epsilon), in double and rounded once: the `m`
   channels of w (wsize elements) into folded_w and folded_b. */
static inline void dnnl_byoc_fold_bn(float* folded_w, float* folded_b, const float* w, int64_t wsize, int64_t m,
                                     const float* const* bn, double epsilon) {
  const int64_t per_channel = m > 0 ? wsize / m : 0;
  for (int64_t c = 0; c < m; ++c) {
    const double k = (double)bn[0][c] / sqrt((double)bn[3][c] + epsilon);
    for (int64_t j = 0; j < per_channel; ++j) {
      folded_w[c * per_channel + j] = (float)((double)w[c * per_channel + j] * k);
    }
    folded_b[c] = (float)((double)bn[1][c] - (double)bn[2][c] * k);
  }
}

/* A reorder from the layout `from` to `to` (a user-managed scratchpad) into *prim;
   NULL when the layouts are equal. 0 on success. */
static inline int dnnl_byoc_reorder(dnnl_primitive_t* prim, dnnl_engine_t engine, const_dnnl_memory_desc_t from,
                                    const_dnnl_memory_desc_t to) {
  *prim = NULL;
  if (dnnl_memory_desc_equal(from, to)) return 0;
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, attr);
  return dnnl_byoc_finish(prim, made, pd, attr, NULL, 0);
}

/* byoc's own transposes, which do a packed convolution's reorders between nchw and
   nhwc (an image's (C, H*W) matrix and its (H*W, C) transpose) in place of oneDNN's
   reorder primitive: 14 us against its 26 us for 64x56x56 on two AVX-512 cores. They
   move 16x16 tiles of float32 through AVX-512 registers, or 8x8 tiles through AVX2
   ones, and 16x16 tiles of bytes (an int8 kernel's data) through SSE2 ones (16-20 us
   against 40 us for 64x56x56 on a 2-core Zen 4), with the work shared by the OpenMP
   threads oneDNN itself runs on (GNU OpenMP); elements past the last whole tile move
   one by one. On another architecture (or float32 without AVX2), oneDNN's reorders do
   it all. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

__attribute__((target("avx512f"))) static inline void dnnl_byoc_tile16(const float* in, float* out, int64_t ldi,
                                                                       int64_t ldo) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + i * ldi);
  for (int i = 0; i < 8; ++i) {  /* pairs of rows, interleaved */
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  /* quads of rows: each 128-bit lane holds 4 rows of one column */
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 2; ++i) {  /* then the lanes: 8 rows, then all 16 */
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
      t[8 * i + j + 4] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0xDD);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(out + i * ldo, r[i]);
}

__attribute__((target("avx2"))) static inline void dnnl_byoc_tile8(const float* in, float* out, int64_t ldi,
                                                                  int64_t ldo) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * ldi);
  for (int i = 0; i < 4; ++i) {  /* pairs of rows, interleaved */
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  /* quads of rows: each 128-bit lane holds 4 rows of one column */
    r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {  /* then the lanes: columns j and j + 4 of all 8 rows */
    t[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
    t[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(out + i * ldo, t[i]);
}

/* 16x16 bytes: unpacking pairs of rows, of 2-byte and of 4-byte groups, then the
   halves, leaves column j of the tile in register j. */
__attribute__((target("sse2"))) static inline void dnnl_byoc_tile16_bytes(const uint8_t* in, uint8_t* out,
                                                                           int64_t ldi, int64_t ldo) {
  __m128i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm_loadu_si128((const __m128i*)(in + i * ldi));
  for (int i = 0; i < 8; ++i) {  /* rows 2i, 2i+1 interleaved: columns 0-7, then 8-15 */
    t[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  /* rows 4i to 4i+3: columns 0-3, 4-7, 8-11, 12-15 */
    r[4 * i] = _mm_unpacklo_epi16(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm_unpackhi_epi16(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm_unpacklo_epi16(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm_unpackhi_epi16(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i) {  /* rows 8i to 8i+7: columns 4j, 4j+1, then 4j+2, 4j+3 */
    for (int j = 0; j < 4; ++j) {
      t[8 * i + 2 * j] = _mm_unpacklo_epi32(r[8 * i + j], r[8 * i + 4 + j]);
      t[8 * i + 2 * j + 1] = _mm_unpackhi_epi32(r[8 * i + j], r[8 * i + 4 + j]);
    }
  }
  for (int c = 0; c < 8; ++c) {  /* all 16 rows: columns 2c and 2c+1 */
    _mm_storeu_si128((__m128i*)(out + 2 * c * ldo), _mm_unpacklo_epi64(t[c], t[8 + c]));
    _mm_storeu_si128((__m128i*)(out + (2 * c + 1) * ldo), _mm_unpackhi_epi64(t[c], t[8 + c]));
  }
}

/* 16 rows of 64 bytes: the same steps on the four 128-bit lanes of AVX-512
   registers, four 16x16 tiles at once (18 us against SSE2's 28 for both of the
   64x56x56 conv's transposes, on a 2-core Zen 4). */
__attribute__((target("avx512bw"))) static inline void dnnl_byoc_tile16x64_bytes(const uint8_t* in, uint8_t* out,
                                                                                  int64_t ldi, int64_t ldo) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512((const void*)(in + i * ldi));
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi16(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi16(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi16(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi16(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      t[8 * i + 2 * j] = _mm512_unpacklo_epi32(r[8 * i + j], r[8 * i + 4 + j]);
      t[8 * i + 2 * j + 1] = _mm512_unpackhi_epi32(r[8 * i + j], r[8 * i + 4 + j]);
    }
  }
  for (int c = 0; c < 8; ++c) {  /* lane k holds columns 16k + 2c and 16k + 2c + 1 */
    const __m512i lo = _mm512_unpacklo_epi64(t[c], t[8 + c]), hi = _mm512_unpackhi_epi64(t[c], t[8 + c]);
    _mm_storeu_si128((__m128i*)(out + 2 * c * ldo), _mm512_castsi512_si128(lo));
    _mm_storeu_si128((__m128i*)(out + (2 * c + 1) * ldo), _mm512_castsi512_si128(hi));
    _mm_storeu_si128((__m128i*)(out + (16 + 2 * c) * ldo), _mm512_extracti32x4_epi32(lo, 1));
    _mm_storeu_si128((__m128i*)(out + (17 + 2 * c) * ldo), _mm512_extracti32x4_epi32(hi, 1));
    _mm_storeu_si128((__m128i*)(out + (32 + 2 * c) * ldo), _mm512_extracti32x4_epi32(lo, 2));
    _mm_storeu_si128((__m128i*)(out + (33 + 2 * c) * ldo), _mm512_extracti32x4_epi32(hi, 2));
    _mm_storeu_si128((__m128i*)(out + (48 + 2 * c) * ldo), _mm512_extracti32x4_epi32(lo, 3));
    _mm_storeu_si128((__m128i*)(out + (49 + 2 * c) * ldo), _mm512_extracti32x4_epi32(hi, 3));
  }
}

/* The side of the tiles of elements of `bytes` bytes this machine moves: bytes 16
   (SSE2); float32 16 (AVX-512), 8 (AVX2) or 0. */
static inline int dnnl_byoc_tile_width(size_t bytes) {
  if (bytes == 1) return 16;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 0;
}

/* The columns of a tile of `bytes`-byte elements: 64 bytes with AVX-512BW, else the side. */
static inline int dnnl_byoc_tile_columns(size_t bytes) {
  __builtin_cpu_init();
  return bytes == 1 && __builtin_cpu_supports("avx512bw") ? 64 : dnnl_byoc_tile_width(bytes);
}
#else
static inline void dnnl_byoc_tile16(const float* in, float* out, int64_t ldi, int64_t ldo) {
  (void)in, (void)out, (void)ldi, (void)ldo;
}
static inline void dnnl_byoc_tile8(const float* in, float* out, int64_t ldi, int64_t ldo) {
  (void)in, (void)out, (void)ldi, (void)ldo;
}
static inline void dnnl_byoc_tile16_bytes(const uint8_t* in, uint8_t* out, int64_t ldi, int64_t ldo) {
  (void)in, (void)out, (void)ldi, (void)ldo;
}
static inline void dnnl_byoc_tile16x64_bytes(const uint8_t* in, uint8_t* out, int64_t ldi, int64_t ldo) {
  (void)in, (void)out, (void)ldi, (void)ldo;
}
static inline int dnnl_byoc_tile_width(size_t bytes) {
  (void)bytes;
  return 0;
}
static inline int dnnl_byoc_tile_columns(size_t bytes) {
  (void)bytes;
  return 0;
}
#endif

/* The transpose that reorders a 4-D tensor of extents e from the layout `from` into
   `to`, when one of them is nchw and the other nhwc, into t = {images, rows, cols,
   tile rows, 1 when the rows are the pixels, bytes per element, tile columns}, for elements of
   data type dt (float32, or the bytes of int8 and uint8); t[0] = 0 when it is not
   such a reorder, or when this machine moves no tiles or the matrices are thinner
   than one. */
static inline void dnnl_byoc_transposition(int64_t* t, const int64_t* e, const_dnnl_memory_desc_t from,
                                           const_dnnl_memory_desc_t to, dnnl_data_type_t dt) {
  dnnl_memory_desc_t nchw = dnnl_byoc_md_4d_of(e, DNNL_BYOC_LAYOUT_plain, dt);
  dnnl_memory_desc_t nhwc = dnnl_byoc_md_4d_of(e, DNNL_BYOC_LAYOUT_channels_last, dt);
  const size_t bytes = dt == dnnl_f32 ? 4 : dt == dnnl_s8 || dt == dnnl_u8 ? 1 : 0;
  const int64_t pixels = e[2] * e[3], side = bytes > 0 ? dnnl_byoc_tile_width(bytes) : 0;
  t[0] = t[1] = t[2] = t[4] = 0;
  t[5] = (int64_t)bytes;
  t[6] = bytes > 0 ? dnnl_byoc_tile_columns(bytes) : 0;
  if (nchw != NULL && nhwc != NULL && dnnl_memory_desc_equal(from, nchw) && dnnl_memory_desc_equal(to, nhwc)) {
    t[0] = e[0], t[1] = e[1], t[2] = pixels;
  } else if (nchw != NULL && nhwc != NULL && dnnl_memory_desc_equal(from, nhwc) && dnnl_memory_desc_equal(to, nchw)) {
    t[0] = e[0], t[1] = pixels, t[2] = e[1], t[4] = 1;
  }
  t[3] = side;
  if (side == 0 || t[1] < side || t[2] < side) t[0] = 0;
  if (t[2] < t[6]) t[6] = side;  /* too few columns for a wide tile */
  if (nchw != NULL) dnnl_memory_desc_destroy(nchw);
  if (nhwc != NULL) dnnl_memory_desc_destroy(nhwc);
}

/* out = in transposed by t (dnnl_byoc_transposition's): each of the t[0] images'
   (rows, cols) matrices of t[5]-byte elements into (cols, rows). The threads share
   the tiles when there are enough elements to pay for waking them. */
static inline void dnnl_byoc_transpose(const void* in, void* out, const int64_t* t) {
  const int64_t rows = t[1], cols = t[2], side = t[3], bytes = t[5], wide = t[6];
  const int64_t row_tiles = (rows + side - 1) / side, col_tiles = (cols + wide - 1) / wide;
  const int64_t tiles = t[0] * col_tiles * row_tiles;
  #pragma omp parallel for schedule(static) if (t[0] * rows * cols >= 32768)
  for (int64_t k = 0; k < tiles; ++k) {
    /* the pixels' tiles outermost: each thread moves the pixels that it computes
       with or computed in the conv (oneDNN shares a conv's pixels out likewise), still
       in its own cache */
    const int64_t image = k / (col_tiles * row_tiles), pixel_tile = k / (t[4] ? col_tiles : row_tiles);
    const int64_t channel_tile = k % (t[4] ? col_tiles : row_tiles);
    const int64_t r0 = (t[4] ? pixel_tile % row_tiles : channel_tile) * side;
    const int64_t c0 = (t[4] ? channel_tile : pixel_tile % col_tiles) * wide;
    const char* a = (const char*)in + image * rows * cols * bytes;
    char* b = (char*)out + image * rows * cols * bytes;
    const int64_t r1 = r0 + side < rows ? r0 + side : rows, c1 = c0 + wide < cols ? c0 + wide : cols;
    int64_t c = c0;  /* the columns before c are moved */
    if (r1 - r0 == side && bytes == 1 && c1 - c0 == 64) {
      dnnl_byoc_tile16x64_bytes((const uint8_t*)a + r0 * cols + c0, (uint8_t*)b + c0 * rows + r0, cols, rows);
      c = c1;
    }
    for (; r1 - r0 == side && bytes == 1 && c + 16 <= c1; c += 16) {
      dnnl_byoc_tile16_bytes((const uint8_t*)a + r0 * cols + c, (uint8_t*)b + c * rows + r0, cols, rows);
    }
    if (r1 - r0 == side && bytes == 4 && c1 - c0 == side) {
      if (side == 16) {
        dnnl_byoc_tile16((const float*)a + r0 * cols + c0, (float*)b + c0 * rows + r0, cols, rows);
      } else {
        dnnl_byoc_tile8((const float*)a + r0 * cols + c0, (float*)b + c0 * rows + r0, cols, rows);
      }
      c = c1;
    }
    for (int64_t r = r0; c < c1 && r < r1; ++r) {  /* what no whole tile covers, one by one */
      for (int64_t j = c; j < c1; ++j) {
        if (bytes == 1) b[j * rows + r] = a[r * cols + j];
        else ((float*)b)[j * rows + r] = ((const float*)a)[r * cols + j];
      }
    }
  }
}

/* Runs the reorder `prim` (NULL: none to do) from `from` into `to`, by byoc's
   transpose t instead when t[0] > 0. 1 on success. */
static inline int dnnl_byoc_move(const_dnnl_primitive_t prim, const int64_t* t, dnnl_engine_t engine,
                                 dnnl_stream_t stream, const void* from, void* to, void* scratch) {
  if (prim == NULL) return 1;
  if (t[0] > 0) {
    dnnl_byoc_transpose(from, to, t);
    return 1;
  }
  return dnnl_byoc_execute(prim, engine, stream, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO},
                           (void* const[]){(void*)from, to}, scratch);
}

/* Winograd F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
   Networks", 2016), for the 3x3 stride-1 convolutions where it is faster than
   oneDNN's direct one. Each 2x2 block of the result is A' (U . V) A, with V = B' d B
   the 4x4 source patch d under it transformed, U = G g G' each 3x3 kernel g
   transformed, and . the sum over the input channels at each of the 16 positions:
   16 matrix products (tiles x C by C x M, a oneDNN batched matmul for each block of
   tiles, dnnl_byoc_winograd_block), which multiply 2.25 times less than the direct
   convolution. oneDNN's own Winograd is
   not implemented for float32 on these CPUs. The transforms only add and subtract
   (and halve, in G), so the results stay within a few ulps of the direct ones.
   On two AVX-512 cores of a Zen 4, against oneDNN's brgconv between nhwc tensors: 268
   against 450 us for 64 channels at 56x56, 237 against 441 for 128 at 28x28, 232
   against 397 for 256 at 14x14; slower for 512 at 7x7 (16 tiles, 443 against 363 us)
   and for 16 channels or fewer, which dnnl_byoc_winograd_fits leaves to oneDNN, as it
   does 256 channels on an Intel CPU (dnnl_byoc_intel_cpu). The spec
   option `winograd` (on by default) compiles this in (-DDNNL_BYOC_WINOGRAD). */
#define DNNL_BYOC_WG_BLOCK 64  /* the channels a transform moves at a time */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DNNL_BYOC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DNNL_BYOC_CLONES
#endif
/* The transforms are kept out of line, and may go unused in a module without such a
   conv. (Inlined into the init of constant weights that it never transforms, a 1x1
   conv's, gcc's -Warray-bounds read the weights' 3x3 loop against them.) */
#if defined(__GNUC__)
#define DNNL_BYOC_OUTLINED __attribute__((noinline, unused))
#else
#define DNNL_BYOC_OUTLINED
#endif

/* The 2x2 result tiles of the conv of geometry g, over all its images. */
static inline int64_t dnnl_byoc_winograd_tiles(const dnnl_byoc_conv_geometry* g) {
  return g->n * ((g->oh + 1) / 2) * ((g->ow + 1) / 2);
}

/* The tiles of a block, which one thread transforms, multiplies and transforms back
   at a time (the rows of each of the matmul's 16 products): a block's transforms
   take 16 x (C + M) floats a tile, and about 1 MB of them stays in a core's L2 cache
   between the three steps. Transforming all the tiles at once streamed 6.4 MB for 64
   channels at 56x56 through the L3, which other tenants of a machine share: on a
   2-core Zen 4 the conv took 0.69-0.79 ms or 1.28-1.34 ms by what they ran. */
static inline int64_t dnnl_byoc_winograd_block(int64_t tiles, int64_t c_in, int64_t m, int64_t threads) {
  int64_t most = ((int64_t)1 << 20) / (64 * (c_in + m));
  most = most < 16 ? 16 : most;
  /* as many blocks as that takes, rounded up to a multiple of the threads, of equal
     size: no thread waits for another's extra block, and no block is mostly padding */
  int64_t blocks = (tiles + most - 1) / most;
  blocks = (blocks + threads - 1) / threads * threads;
  return (tiles + blocks - 1) / blocks;
}

/* Whether this is an Intel CPU. Its AVX-512 cores issue two 512-bit multiply-adds a
   cycle, where a Zen 4 issues one, and oneDNN's brgconv then beats the Winograd from
   256 channels in and out: light ResNet-50's 256 at 14x14, each conv with its folded
   batch_norm and relu, two threads of an Intel Xeon: 630-673 us direct against
   698-782 us Winograd; 128 at 28x28 655-662 against 506-535, and 64 at 56x56 577-646
   against 449-456, still faster as Winograd. */
static inline int dnnl_byoc_intel_cpu(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  return __builtin_cpu_is("intel");
#else
  return 0;
#endif
}

/* Whether the conv of geometry g runs as Winograd: 3x3,
   stride 1, no dilation or groups, at least 32 channels in and out, transformed
   weights of at most 16 MB (and under 256 x 256 channels on an Intel CPU), at
   least 25 tiles, and at most 32 MB of transforms
   over all its tiles (5 images of 64 channels at 56x56 take 30.6 MB). The blocks
   bound the memory a call uses whatever the batch; the bound on the whole stays
   because larger batches were never measured against oneDNN's convolution. */
static inline int dnnl_byoc_winograd_fits(const dnnl_byoc_conv_geometry* g) {
#ifdef DNNL_BYOC_WINOGRAD
  const int64_t tiles = dnnl_byoc_winograd_tiles(g);
  return g->kh == 3 && g->kw == 3 && g->stride_h == 1 && g->stride_w == 1 && g->dilation_h == 1
      && g->dilation_w == 1 && g->groups == 1 && g->c >= 32 && g->o >= 32 && g->c * g->o <= 512 * 512
      && (g->c * g->o < 256 * 256 || !dnnl_byoc_intel_cpu())
      && tiles >= 25 && 16 * 4 * tiles * (g->c + g->o) <= ((int64_t)32 << 20);
#else
  (void)g;
  return 0;
#endif
}

/* u (16, C, M): G g G' of each 3x3 kernel g = w[m][c] (M, C, 3, 3), with
   G = (1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1). 1 when every weight is finite;
   0 when one is not (inf or NaN), and then every result pixel is computed directly
   (dnnl_byoc_winograd_out). */
DNNL_BYOC_OUTLINED DNNL_BYOC_CLONES static int dnnl_byoc_winograd_weights(float* u, const float* w,
                                                                          int64_t c_in, int64_t m) {
  const int64_t blocks = (m + DNNL_BYOC_WG_BLOCK - 1) / DNNL_BYOC_WG_BLOCK;
  float probe = 0.0f;  /* the sum of 0 * each weight: NaN when one is inf or NaN */
  #pragma omp parallel for schedule(static) if (c_in * m >= 4096) reduction(+ : probe)
  for (int64_t k = 0; k < c_in * blocks; ++k) {
    const int64_t c = k / blocks, o0 = k % blocks * DNNL_BYOC_WG_BLOCK;
    const int64_t n = m - o0 < DNNL_BYOC_WG_BLOCK ? m - o0 : DNNL_BYOC_WG_BLOCK;
    float g[9][DNNL_BYOC_WG_BLOCK], t[12][DNNL_BYOC_WG_BLOCK];  /* the kernels (o0 + o, c), then G g */
    for (int64_t o = 0; o < n; ++o) {
      for (int j = 0; j < 9; ++j) {
        g[j][o] = w[((o0 + o) * c_in + c) * 9 + j];
        probe += 0.0f * g[j][o];
      }
    }
    for (int j = 0; j < 3; ++j) {
      #pragma omp simd
      for (int64_t o = 0; o < n; ++o) {
        t[j][o] = g[j][o];
        t[3 + j][o] = 0.5f * (g[j][o] + g[3 + j][o] + g[6 + j][o]);
        t[6 + j][o] = 0.5f * (g[j][o] - g[3 + j][o] + g[6 + j][o]);
        t[9 + j][o] = g[6 + j][o];
      }
    }
    for (int i = 0; i < 4; ++i) {  /* (G g) G': row i of the 4x4 */
      float* r = u + (4 * i * c_in + c) * m + o0;
      const int64_t plane = c_in * m;
      const float *t0 = t[3 * i], *t1 = t[3 * i + 1], *t2 = t[3 * i + 2];
      #pragma omp simd
      for (int64_t o = 0; o < n; ++o) {
        r[o] = t0[o];
        r[plane + o] = 0.5f * (t0[o] + t1[o] + t2[o]);
        r[2 * plane + o] = 0.5f * (t0[o] - t1[o] + t2[o]);
        r[3 * plane + o] = t2[o];
      }
    }
  }
  return probe == 0.0f;
}

/* v (16, R, C): B' d B of the 4x4 patch d of each tile t in [t0, t1) (the tiles of
   each image in row-major order, 2x2 result pixels each), in row t - t0 of each of the
   16 matrices of R rows, of the nhwc source x, zero outside it, with
   B' = (1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1); wg is the struct's `winograd`.
   direct[t - t0] = 1 when the patch of tile t holds a value that is not finite (or its
   transform overflows), else 0: the transforms subtract, so one inf there would
   come out of them as inf - inf = NaN in pixels where the convolution is inf. One
   thread's block of tiles (dnnl_byoc_winograd). */
DNNL_BYOC_OUTLINED DNNL_BYOC_CLONES static void dnnl_byoc_winograd_in(const float* x, float* v,
                                                                      unsigned char* direct,
                                                                      const dnnl_byoc_winograd_plan* wg,
                                                                      int64_t t0, int64_t t1, int64_t rows) {
  static const float zeros[DNNL_BYOC_WG_BLOCK];
  const int64_t h = wg->h, w = wg->w, c_in = wg->c, tiles_h = (wg->oh + 1) / 2, tiles_w = (wg->ow + 1) / 2;
  const int64_t plane = rows * c_in;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t image = t / (tiles_h * tiles_w);
    const int64_t y0 = t / tiles_w % tiles_h * 2 - wg->pad_top, x0 = t % tiles_w * 2 - wg->pad_left;
    float probe = 0.0f;  /* the sum of 0 * each transformed value: NaN when one is not finite */
    for (int64_t c0 = 0; c0 < c_in; c0 += DNNL_BYOC_WG_BLOCK) {
      const int64_t n = c_in - c0 < DNNL_BYOC_WG_BLOCK ? c_in - c0 : DNNL_BYOC_WG_BLOCK;
      const float* d[16];
      for (int i = 0; i < 16; ++i) {
        const int64_t y = y0 + i / 4, col = x0 + i % 4;
        d[i] = y >= 0 && y < h && col >= 0 && col < w ? x + ((image * h + y) * w + col) * c_in + c0 : zeros;
      }
      float e[16][DNNL_BYOC_WG_BLOCK];  /* B' d: its rows combined */
      for (int j = 0; j < 4; ++j) {
        #pragma omp simd
        for (int64_t k = 0; k < n; ++k) {
          e[j][k] = d[j][k] - d[8 + j][k];
          e[4 + j][k] = d[4 + j][k] + d[8 + j][k];
          e[8 + j][k] = d[8 + j][k] - d[4 + j][k];
          e[12 + j][k] = d[4 + j][k] - d[12 + j][k];
        }
      }
      for (int i = 0; i < 4; ++i) {  /* then (B' d) B: its columns */
        float* o = v + (4 * i * rows + t - t0) * c_in + c0;
        const float *e0 = e[4 * i], *e1 = e[4 * i + 1], *e2 = e[4 * i + 2], *e3 = e[4 * i + 3];
        #pragma omp simd reduction(+ : probe)
        for (int64_t k = 0; k < n; ++k) {
          o[k] = e0[k] - e2[k];
          o[plane + k] = e1[k] + e2[k];
          o[2 * plane + k] = e2[k] - e1[k];
          o[3 * plane + k] = e1[k] - e3[k];
          probe += 0.0f * o[k] + 0.0f * o[plane + k] + 0.0f * o[2 * plane + k] + 0.0f * o[3 * plane + k];
        }
      }
    }
    direct[t - t0] = probe != 0.0f;  /* NaN != 0 */
  }
}

/* s[k] (k < n): the 3x3 convolution at result pixel (row, col) of image `image`,
   output channels m0 + k, computed directly from the nhwc source x and the plain
   weights w (M, C, 3, 3), zero outside the source: Winograd's stand-in for the
   pixels of a tile whose patch or weights are not all finite. */
static inline void dnnl_byoc_conv3x3_at(const float* x, const float* w, const dnnl_byoc_winograd_plan* wg,
                                        int64_t image,
                                        int64_t row, int64_t col, int64_t m0, int64_t n, float* s) {
  const int64_t h = wg->h, width = wg->w, c_in = wg->c;
  for (int64_t k = 0; k < n; ++k) s[k] = 0.0f;
  for (int j = 0; j < 9; ++j) {
    const int64_t y = row + j / 3 - wg->pad_top, at = col + j % 3 - wg->pad_left;
    if (y < 0 || y >= h || at < 0 || at >= width) continue;
    const float* d = x + ((image * h + y) * width + at) * c_in;
    for (int64_t k = 0; k < n; ++k) {
      const float* g = w + (m0 + k) * c_in * 9 + j;
      float sum = 0.0f;
      for (int64_t c = 0; c < c_in; ++c) sum += d[c] * g[c * 9];
      s[k] += sum;
    }
  }
}

/* y (nhwc) = A' P A of the products P of each tile t in [t0, t1) (row t - t0 of each
   of the 16 matrices of R rows of p), with A' = (1 1 1 0; 0 1 -1 -1), plus `bias` and
   `addend` (nhwc; either NULL: none), then a relu when wg->relu; a result pixel past the
   edge of y is not written. The addend may be y itself: each element is read before
   it is written, by the same thread. The tiles that `direct` flags (all of them when
   it is NULL: weights that are not finite) are computed directly from the source x
   and the plain weights w instead. One thread's block of tiles (dnnl_byoc_winograd). */
DNNL_BYOC_OUTLINED DNNL_BYOC_CLONES static void dnnl_byoc_winograd_out(const float* p, const float* bias,
                                                                       const float* addend, float* y,
                                                                       const unsigned char* direct,
                                                                       const float* x, const float* w,
                                                                       const dnnl_byoc_winograd_plan* wg,
                                                                       int64_t t0, int64_t t1,
                                                                       int64_t rows) {
  static const float zeros[DNNL_BYOC_WG_BLOCK];
  const int64_t m = wg->m, oh = wg->oh, ow = wg->ow, tiles_h = (oh + 1) / 2, tiles_w = (ow + 1) / 2;
  const int64_t plane = rows * m;
  const int relu = wg->relu != 0;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t image = t / (tiles_h * tiles_w), y0 = t / tiles_w % tiles_h * 2, x0 = t % tiles_w * 2;
    for (int64_t m0 = 0; m0 < m; m0 += DNNL_BYOC_WG_BLOCK) {
      const int64_t n = m - m0 < DNNL_BYOC_WG_BLOCK ? m - m0 : DNNL_BYOC_WG_BLOCK;
      const float* q = p + (t - t0) * m + m0;
      float e[8][DNNL_BYOC_WG_BLOCK];  /* A' P: its rows combined */
      for (int j = 0; j < 4; ++j) {
        const float *p0 = q + j * plane, *p1 = q + (4 + j) * plane, *p2 = q + (8 + j) * plane;
        const float* p3 = q + (12 + j) * plane;
        #pragma omp simd
        for (int64_t k = 0; k < n; ++k) {
          e[j][k] = p0[k] + p1[k] + p2[k];
          e[4 + j][k] = p1[k] - p2[k] - p3[k];
        }
      }
      const float* b = bias != NULL ? bias + m0 : zeros;
      for (int i = 0; i < 4; ++i) {  /* then (A' P) A: its columns, result pixel (i / 2, i % 2) */
        const int64_t row = y0 + i / 2, col = x0 + i % 2;
        if (row >= oh || col >= ow) continue;
        const int64_t at = ((image * oh + row) * ow + col) * m + m0;
        const float *e0 = e[i / 2 * 4], *e1 = e0 + DNNL_BYOC_WG_BLOCK, *e2 = e1 + DNNL_BYOC_WG_BLOCK;
        const float* e3 = e2 + DNNL_BYOC_WG_BLOCK;
        const float* r = addend != NULL ? addend + at : zeros;
        float* o = y + at;
        if (direct == NULL || direct[t - t0]) {
          float s[DNNL_BYOC_WG_BLOCK];
          dnnl_byoc_conv3x3_at(x, w, wg, image, row, col, m0, n, s);
          for (int64_t k = 0; k < n; ++k) {
            s[k] = s[k] + b[k] + r[k];
            o[k] = relu && s[k] < 0.0f ? 0.0f : s[k];
          }
        } else if (i % 2 == 0) {
          #pragma omp simd
          for (int64_t k = 0; k < n; ++k) {
            const float s = e0[k] + e1[k] + e2[k] + b[k] + r[k];
            o[k] = relu && s < 0.0f ? 0.0f : s;
          }
        } else {
          #pragma omp simd
          for (int64_t k = 0; k < n; ++k) {
            const float s = e1[k] - e2[k] - e3[k] + b[k] + r[k];
            o[k] = relu && s < 0.0f ? 0.0f : s;
          }
        }
      }
    }
  }
}

/* at[k]: where part k of `sizes` (n parts) starts, each at a multiple of 64 bytes
   (a cache line, an AVX-512 vector); at[n] the bytes of all. */
static inline void dnnl_byoc_offsets(const size_t* sizes, int n, size_t* at) {
  at[0] = 0;
  for (int k = 0; k < n; ++k) at[k + 1] = at[k] + (sizes[k] + 63) / 64 * 64;
}

void dnnl_byoc_packed_conv_free(dnnl_byoc_packed_conv_t* c) {
  dnnl_primitive_t* prims[] = {&c->conv, &c->in_place, &c->src_in, &c->dst_in, &c->dst_out, &c->w_in};
  for (int k = 0; k < 6; ++k) {
    if (*prims[k] != NULL) dnnl_primitive_destroy(*prims[k]);
    *prims[k] = NULL;
  }
  free(c->weights);
  free(c->plain);
  free(c->bias);
  free(c->memory);
  c->weights = NULL;
  c->plain = NULL;
  c->bias = NULL;
  c->memory = NULL;
}

/* Reorders `from` (bytes in the layout `plain`) into `to` (in the layout `packed`), once,
   on a stream of its own: the constants a kernel packs at init. 1 on success. */
static inline int dnnl_byoc_reorder_once(dnnl_engine_t engine, const_dnnl_memory_desc_t plain,
                                         const_dnnl_memory_desc_t packed, const void* from, void* to) {
  dnnl_primitive_t reorder = NULL;
  dnnl_stream_t stream = NULL;
  void* scratch = NULL;
  int ok = dnnl_byoc_reorder(&reorder, engine, plain, packed) == 0;
  if (ok && reorder == NULL) memcpy(to, from, dnnl_memory_desc_get_size(plain));
  if (ok && reorder != NULL) {
    const size_t scratch_bytes = dnnl_byoc_scratch_size(reorder);
    scratch = scratch_bytes > 0 ? malloc(scratch_bytes) : NULL;
    ok = (scratch_bytes == 0 || scratch != NULL)
        && dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success
        && dnnl_byoc_execute(reorder, engine, stream, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO},
                             (void* const[]){(void*)from, to}, scratch);
  }
  free(scratch);
  if (stream != NULL) dnnl_stream_destroy(stream);
  if (reorder != NULL) dnnl_primitive_destroy(reorder);
  return ok;
}

/* Memory for `bytes` of packed weights, freed by free(). From 2 MB on, on 2 MB
   boundaries and rounded up to them, with the kernel asked for transparent huge pages
   (madvise(MADV_HUGEPAGE): Linux's default THP mode honours only that): a network
   streams its weights from beyond the caches at every call, and with 4 KB pages each
   page of them missed the TLB. A 3x3 512->512 conv at 14x14 (9.4 MB of weights, cold)
   on an Intel Xeon: 1046-1072 us on 4 KB pages, 916-937 on huge ones. Smaller ones
   64-byte aligned. NULL when out of memory. */
static void* dnnl_byoc_weights_alloc(size_t bytes) {
  const size_t huge = (size_t)2 << 20;
  if (bytes < huge) return aligned_alloc(64, bytes > 0 ? (bytes + 63) / 64 * 64 : 64);
  const size_t rounded = (bytes + huge - 1) / huge * huge;
  void* memory = aligned_alloc(huge, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (memory != NULL) (void)madvise(memory, rounded, MADV_HUGEPAGE); /* a hint: refused, 4 KB pages */
#endif
  return memory;
}

/* c's weights: w (plain), the batch_norm `bn` (scale, shift, mean, variance) folded
   in first when not NULL, reordered into the layout `packed`, or Winograd-transformed
   for a Winograd conv. 1 on success. */
static inline int dnnl_byoc_pack_weights(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine,
                                         const_dnnl_memory_desc_t plain, const_dnnl_memory_desc_t packed,
                                         const float* w, int64_t m, const float* const* bn, double epsilon) {
  const size_t bytes = dnnl_memory_desc_get_size(plain);
  float* folded = NULL;
  if (bn != NULL) {
    folded = (float*)malloc(bytes > 0 ? bytes : 1);
    c->bias = (float*)malloc(sizeof(float) * (size_t)(m > 0 ? m : 1));
    if (folded == NULL || c->bias == NULL) {
      free(folded);
      return 0;
    }
    dnnl_byoc_fold_bn(folded, c->bias, w, (int64_t)(bytes / sizeof(float)), m, bn, epsilon);
    w = folded;
  }
  const dnnl_byoc_winograd_plan* wg = &c->winograd;
  const size_t packed_bytes = wg->n > 0 ? sizeof(float) * 16 * (size_t)(wg->c * wg->m)
                                        : dnnl_memory_desc_get_size(packed);
  c->weights = dnnl_byoc_weights_alloc(packed_bytes);
  if (wg->n > 0) {
    c->plain = (float*)malloc(bytes > 0 ? bytes : 1);
    if (c->plain != NULL) memcpy(c->plain, w, bytes);
  }
  if (c->weights != NULL && wg->n > 0) {
    c->weights_finite = dnnl_byoc_winograd_weights((float*)c->weights, w, wg->c, wg->m);
  }
  const int ok = c->weights != NULL && (wg->n == 0 || c->plain != NULL)
      && (wg->n > 0 || dnnl_byoc_reorder_once(engine, plain, packed, w, c->weights));
  free(folded);
  return ok;
}

/* dnnl_byoc_matmul_packed, the result multiplied by a tensor of its own shape when
   `multiply` (dnnl_byoc_matmul_mul_packed). */
static int dnnl_byoc_matmul_packed_by(dnnl_primitive_t* prim, dnnl_engine_t engine, int ra, const int64_t* a,
                                      int rb, const int64_t* b, dnnl_data_type_t dt, const void* w, void** packed,
                                      int64_t bias, dnnl_alg_kind_t post, int multiply) {
  dnnl_memory_desc_t mds[4], plain = NULL;
  *prim = NULL;
  *packed = NULL;
  const int made_mds = dnnl_byoc_matmul_mds(mds, ra, a, rb, b, dt, bias, &plain);
  if (made_mds == 0) return 0;
  dnnl_primitive_attr_t attr = multiply && made_mds > 0 ? dnnl_byoc_attr_binary(0, dnnl_binary_mul, mds[2], post)
                                                        : dnnl_byoc_attr_post(0, NULL, post);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL || made_mds < 0
      ? dnnl_out_of_memory : dnnl_matmul_primitive_desc_create(&pd, engine, mds[0], mds[1], mds[3], mds[2], attr);
  int ok = made == dnnl_success;
  if (ok) {
    const_dnnl_memory_desc_t chosen = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const size_t bytes = dnnl_memory_desc_get_size(chosen);
    *packed = dnnl_byoc_weights_alloc(bytes);
    ok = *packed != NULL && dnnl_byoc_reorder_once(engine, plain, chosen, w, *packed);
  }
  if (plain != NULL) dnnl_memory_desc_destroy(plain);
  const int status = dnnl_byoc_finish(prim, made, pd, attr, mds, 4);
  if (!ok || status != 0) { /* the caller's teardown does not run for a failed init */
    free(*packed);
    *packed = NULL;
    if (*prim != NULL) dnnl_primitive_destroy(*prim);
    *prim = NULL;
    return 1;
  }
  return 0;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_matmul_packed(dnnl_primitive_t* prim, dnnl_engine_t engine, int ra, const int64_t* a, int rb,
                            const int64_t* b, dnnl_data_type_t dt, const void* w, void** packed, int64_t bias,
                            dnnl_alg_kind_t post) {
  return dnnl_byoc_matmul_packed_by(prim, engine, ra, a, rb, b, dt, w, packed, bias, post, 0);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_matmul_mul_packed(dnnl_primitive_t* prim, dnnl_engine_t engine, int ra, const int64_t* a, int rb,
                                const int64_t* b, const float* w, void** packed) {
  return dnnl_byoc_matmul_packed_by(prim, engine, ra, a, rb, b, dnnl_f32, w, packed, 0, dnnl_alg_kind_undef, 1);
}

/* The implementation oneDNN runs for pd ("brgconv:avx512_core", ...). */
static inline const char* dnnl_byoc_impl(const_dnnl_primitive_desc_t pd) {
  const char* impl = "";
  return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success ? impl : "";
}

/* Replaces *pd by the descriptor of the same convolution (geometry g, weights w of
   any layout, bias b) between src and dst with the attributes attr, when oneDNN runs
   that with the same implementation as *pd: a layout of the kernel's own costs no
   reorder, and the same kernel computes as fast in it. 1 when it did. */
static inline int dnnl_byoc_prefer(dnnl_primitive_desc_t* pd, dnnl_engine_t engine, const dnnl_byoc_conv_geometry* g,
                                   const_dnnl_memory_desc_t src, const_dnnl_memory_desc_t w,
                                   const_dnnl_memory_desc_t b, const_dnnl_memory_desc_t dst,
                                   const_dnnl_primitive_attr_t attr) {
  dnnl_primitive_desc_t other = NULL;
  if (dnnl_byoc_conv_desc(&other, engine, g, src, w, b, dst, attr) != dnnl_success) return 0;
  if (strcmp(dnnl_byoc_impl(other), dnnl_byoc_impl(*pd)) != 0) {
    dnnl_primitive_desc_destroy(other);
    return 0;
  }
  dnnl_primitive_desc_destroy(*pd);
  *pd = other;
  return 1;
}

#ifdef _OPENMP
#include <omp.h>
#define DNNL_BYOC_MAX_THREADS() omp_get_max_threads()
#define DNNL_BYOC_THREAD_ID() omp_get_thread_num()
#define DNNL_BYOC_THREAD_COUNT() omp_get_num_threads()
#else
#define DNNL_BYOC_MAX_THREADS() 1
#define DNNL_BYOC_THREAD_ID() 0
#define DNNL_BYOC_THREAD_COUNT() 1
#endif

/* The conv of pd, made again with the post-ops of attr (a sum, then the relu), if its
   weights keep pd's layout (they are packed once, for both); else NULL. */
static inline dnnl_primitive_t dnnl_byoc_in_place(dnnl_engine_t engine, const dnnl_byoc_conv_geometry* g,
                                                  const_dnnl_primitive_desc_t pd, const_dnnl_memory_desc_t w,
                                                  const_dnnl_memory_desc_t b, const_dnnl_primitive_attr_t attr) {
  dnnl_primitive_desc_t sum = NULL;
  dnnl_primitive_t made = NULL;
  if (dnnl_byoc_conv_desc(&sum, engine, g, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), w, b,
                          dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), attr) != dnnl_success) {
    return NULL;
  }
  if (dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(sum, dnnl_query_weights_md, 0),
                             dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0))
      && dnnl_primitive_create(&made, sum) != dnnl_success) {
    made = NULL;
  }
  dnnl_primitive_desc_destroy(sum);
  return made;
}

/* c's Winograd geometry and matmul (the 16 products of a block, block x C by C x M,
   batched) for the conv of geometry g, with a relu when `relu`. 1 on success. */
static inline int dnnl_byoc_winograd_init(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine,
                                          const dnnl_byoc_conv_geometry* g, int relu) {
  const int64_t tiles = dnnl_byoc_winograd_tiles(g), most = DNNL_BYOC_MAX_THREADS();
  const int64_t block = dnnl_byoc_winograd_block(tiles, g->c, g->o, most > 0 ? most : 1);
  const int64_t blocks = (tiles + block - 1) / block;
  c->winograd = (dnnl_byoc_winograd_plan){
      .n = g->n, .h = g->h, .w = g->w, .c = g->c, .m = g->o, .pad_top = g->pad_top, .pad_left = g->pad_left,
      .oh = g->oh, .ow = g->ow, .relu = relu, .tiles = tiles, .block = block,
      .threads = most < blocks ? most : blocks};
  const int64_t a[] = {16, block, g->c}, b[] = {16, g->c, g->o}, d[] = {16, block, g->o};
  dnnl_memory_desc_t mds[3] = {dnnl_byoc_md(3, a), dnnl_byoc_md(3, b), dnnl_byoc_md(3, d)};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL || mds[0] == NULL || mds[1] == NULL || mds[2] == NULL
      ? dnnl_out_of_memory : dnnl_matmul_primitive_desc_create(&pd, engine, mds[0], mds[1], NULL, mds[2], attr);
  return dnnl_byoc_finish(&c->conv, made, pd, attr, mds, 3) == 0;
}

/* One thread's part of a Winograd conv's work memory, and where its pieces start
   (at[5], dnnl_byoc_offsets'): its block's transformed source (v) and products (p), a
   flag per tile, and its matmul's scratchpad. */
static inline size_t dnnl_byoc_winograd_part(const dnnl_byoc_packed_conv_t* c, size_t* at) {
  const dnnl_byoc_winograd_plan* wg = &c->winograd;
  const size_t sizes[4] = {sizeof(float) * 16 * (size_t)(wg->block * wg->c), sizeof(float) * 16 * (size_t)(wg->block * wg->m),
                           (size_t)wg->block, dnnl_byoc_scratch_size(c->conv)};
  dnnl_byoc_offsets(sizes, 4, at);
  return at[4];
}

/* Runs c's Winograd conv from src to dst (both nhwc) by the transformed weights u
   (of the plain weights w, which are all finite when `finite`), plus bias and
   addend (NULL: none). The threads share the blocks of tiles: each transforms its
   block's patches, multiplies them by u (the matmul on its own thread, in a stream
   and scratchpad of its own) and transforms the products back into dst, in its part
   of `work` (c->scratch[5] bytes: dnnl_byoc_winograd_part's, a part per thread).
   1 on success. */
static inline int dnnl_byoc_winograd(const dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* src,
                                     const void* u, const float* w, int finite, const float* bias,
                                     const float* addend, float* dst, char* work) {
  const dnnl_byoc_winograd_plan* wg = &c->winograd;
  const int64_t tiles = wg->tiles, rows = wg->block, blocks = (tiles + rows - 1) / rows;
  size_t at[5];
  const size_t part = dnnl_byoc_winograd_part(c, at);
  int failed = 0;
  #pragma omp parallel num_threads((int)wg->threads) reduction(| : failed)
  {
    const int64_t id = DNNL_BYOC_THREAD_ID(), threads = DNNL_BYOC_THREAD_COUNT();
    char* mine = work + (size_t)id * part;
    float* v = (float*)(mine + at[0]);
    float* p = (float*)(mine + at[1]);
    unsigned char* direct = (unsigned char*)(mine + at[2]);
    dnnl_stream_t stream = NULL;
    failed |= dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success;
    const int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    for (int64_t b = id; !failed && b < blocks; b += threads) {
      const int64_t t0 = b * rows, t1 = t0 + rows < tiles ? t0 + rows : tiles;
      dnnl_byoc_winograd_in(src, v, direct, wg, t0, t1, rows);
      for (int i = 0; i < 16 && t1 - t0 < rows; ++i) {  /* a last, short block: zeros in its unused rows */
        memset(v + (i * rows + t1 - t0) * wg->c, 0, sizeof(float) * (size_t)((rows - (t1 - t0)) * wg->c));
      }
      failed |= !dnnl_byoc_execute(c->conv, engine, stream, 3, kinds, (void* const[]){v, (void*)u, p}, mine + at[3]);
      if (!failed) dnnl_byoc_winograd_out(p, bias, addend, dst, finite ? direct : NULL, src, w, wg, t0, t1, rows);
    }
    if (stream != NULL) dnnl_stream_destroy(stream);
  }
  return !failed;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_packed_conv2d(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const dnnl_byoc_conv_geometry* g,
                            int bias, int sum, int relu, const float* w, const float* const* bn,
                            double epsilon, const int* layouts) {
  const int64_t x[] = {g->n, g->c, g->h, g->w}, y[] = {g->n, g->o, g->oh, g->ow};
  const int64_t wd[] = {g->groups, g->o / g->groups, g->c / g->groups, g->kh, g->kw}, b[] = {g->o};
  const int grouped = g->groups != 1, biased = bias || bn != NULL, winograd = dnnl_byoc_winograd_fits(g);
  /* the primitive's (any layout), then the kernel's: x, the plain weights, the result
     and a residual, then Winograd's x and result (nhwc) */
  dnnl_memory_desc_t mds[10] = {dnnl_byoc_md_any(4, x),
                                grouped ? dnnl_byoc_md_any(5, wd) : dnnl_byoc_md_any(4, wd + 1),
                                dnnl_byoc_md_any(4, y),
                                biased ? dnnl_byoc_md(1, b) : NULL,
                                dnnl_byoc_md_4d(x, layouts[0]),
                                grouped ? dnnl_byoc_md(5, wd) : dnnl_byoc_md(4, wd + 1),
                                dnnl_byoc_md_4d(y, layouts[1]),
                                sum ? dnnl_byoc_md_4d(y, layouts[2]) : NULL,
                                winograd ? dnnl_byoc_md_4d(x, DNNL_BYOC_LAYOUT_channels_last) : NULL,
                                winograd ? dnnl_byoc_md_4d(y, DNNL_BYOC_LAYOUT_channels_last) : NULL};
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(sum, NULL, relu);
  dnnl_primitive_desc_t pd = NULL;
  int ok = (mds[3] != NULL || !biased) && (mds[7] != NULL || !sum)
      && (!winograd || (mds[8] != NULL && mds[9] != NULL));
  for (int k = 0; k < 7; ++k) ok = ok && (k == 3 || mds[k] != NULL);
  c->adds_residual = 0;
  c->plain = NULL;
  c->in_place = NULL;
  c->weights_finite = 0;
  memset(c->transposes, 0, sizeof c->transposes);
  memset(&c->winograd, 0, sizeof c->winograd);
  memset(c->scratch, 0, sizeof c->scratch);
  if (winograd) {
    ok = ok && dnnl_byoc_winograd_init(c, engine, g, relu);
    c->adds_residual = ok && sum && dnnl_memory_desc_equal(mds[7], mds[9]);
  } else {
    ok = ok && dnnl_byoc_conv_desc(&pd, engine, g, mds[0], mds[1], mds[3], mds[2], attr) == dnnl_success;
    if (ok && !dnnl_byoc_prefer(&pd, engine, g, mds[4], mds[1], mds[3], mds[6], attr)) {
      dnnl_byoc_prefer(&pd, engine, g, mds[0], mds[1], mds[3], mds[6], attr);
    }
    if (ok && sum && dnnl_memory_desc_equal(mds[7], dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0))) {
      dnnl_primitive_attr_t add = dnnl_byoc_attr(0, mds[7], relu);
      const_dnnl_memory_desc_t src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
      c->adds_residual = add != NULL && dnnl_byoc_prefer(&pd, engine, g, src, mds[1], mds[3], mds[7], add);
      if (add != NULL) dnnl_primitive_attr_destroy(add);
    }
    ok = ok && dnnl_primitive_create(&c->conv, pd) == dnnl_success;
    if (ok && c->adds_residual && dnnl_memory_desc_equal(mds[6], dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0))) {
      c->in_place = dnnl_byoc_in_place(engine, g, pd, mds[1], mds[3], attr);
    }
  }
  if (ok) {
    const_dnnl_memory_desc_t src = winograd ? mds[8] : dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const_dnnl_memory_desc_t dst = winograd ? mds[9] : dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const_dnnl_memory_desc_t weights = winograd ? NULL : dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    ok = dnnl_byoc_reorder(&c->src_in, engine, mds[4], src) == 0
        && dnnl_byoc_reorder(&c->dst_out, engine, dst, mds[6]) == 0
        && (!sum || c->adds_residual || dnnl_byoc_reorder(&c->dst_in, engine, mds[7], dst) == 0)
        && (w != NULL ? dnnl_byoc_pack_weights(c, engine, mds[5], weights, w, g->o, bn, epsilon)
                      : winograd || dnnl_byoc_reorder(&c->w_in, engine, mds[5], weights) == 0);
    dnnl_byoc_transposition(c->transposes[0], x, mds[4], src, dnnl_f32);
    if (sum) dnnl_byoc_transposition(c->transposes[1], y, mds[7], dst, dnnl_f32);
    dnnl_byoc_transposition(c->transposes[2], y, dst, mds[6], dnnl_f32);
    /* a Winograd conv's matmul has its scratchpad in each thread's part (scratch[5]) */
    const_dnnl_primitive_t prims[] = {winograd ? NULL : c->conv, c->in_place, c->src_in, c->dst_in, c->dst_out, c->w_in};
    for (int k = 0; k < 6; ++k) {
      const size_t bytes = dnnl_byoc_scratch_size(prims[k]);
      c->scratch[0] = bytes > c->scratch[0] ? bytes : c->scratch[0];
    }
    c->scratch[1] = c->src_in != NULL ? dnnl_memory_desc_get_size(src) : 0;
    c->scratch[2] = c->dst_out != NULL ? dnnl_memory_desc_get_size(dst) : 0;
    /* a copy of a residual passed as the output too, for the binary post-op; the in-place
       primitive adds such a residual where it is */
    c->scratch[3] = c->adds_residual && c->dst_out == NULL && !winograd && c->in_place == NULL
        ? dnnl_memory_desc_get_size(dst) : 0;
    c->scratch[4] = c->w_in != NULL ? dnnl_memory_desc_get_size(weights)
        : winograd && w == NULL ? sizeof(float) * 16 * (size_t)(g->c * g->o) : 0;
    size_t parts[5];
    c->scratch[5] = winograd ? dnnl_byoc_winograd_part(c, parts) * (size_t)c->winograd.threads : 0;
    size_t at[7];
    dnnl_byoc_offsets(c->scratch, 6, at);
    /* page-aligned: from malloc's 16-byte alignment, its rows of 64 channels split
       cache lines (the conv3x3 call: 340-355 us, against 315-321 aligned) */
    c->memory = at[6] > 0 ? (char*)aligned_alloc(4096, (at[6] + 4095) / 4096 * 4096) : NULL;
    ok = ok && (at[6] == 0 || c->memory != NULL);
    atomic_store_explicit(&c->busy, 0, memory_order_release);
  }
  if (pd != NULL) dnnl_primitive_desc_destroy(pd);
  if (attr != NULL) dnnl_primitive_attr_destroy(attr);
  for (int k = 0; k < 10; ++k) {
    if (mds[k] != NULL) dnnl_memory_desc_destroy(mds[k]);
  }
  if (!ok) dnnl_byoc_packed_conv_free(c);
  return ok ? 0 : 1;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_run_packed(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* x,
                         const float* w, const float* bias, const float* residual, float* out,
                         int64_t out_size) {
  /* a residual that is the output: added where it is by the sum post-op, or copied aside for the binary one */
  const int in_place = c->in_place != NULL && residual != NULL && (const void*)residual == (const void*)out;
  const int aliased = c->scratch[3] > 0 && residual != NULL && (const void*)residual == (const void*)out;
  size_t at[7];
  dnnl_byoc_offsets(c->scratch, 6, at);
  const int kept = c->memory != NULL && atomic_exchange_explicit(&c->busy, 1, memory_order_acquire) == 0;
  char* memory = kept ? c->memory : at[6] > 0 ? (char*)aligned_alloc(64, at[6]) : NULL;
  void* src = c->src_in != NULL ? (void*)(memory + at[1]) : (void*)x;
  void* dst = c->dst_out != NULL ? (void*)(memory + at[2]) : (void*)out;
  const float* addend = aliased ? (const float*)(memory + at[3]) : residual;
  void* weights = c->weights != NULL ? c->weights : c->scratch[4] > 0 ? (void*)(memory + at[4]) : (void*)w;
  const float* b = c->bias != NULL ? c->bias : bias;
  dnnl_stream_t stream = NULL;
  int ok = (at[6] == 0 || memory != NULL)
      && dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success;
  if (ok && aliased) memcpy((void*)addend, residual, c->scratch[3]);
  if (ok && c->w_in != NULL) {
    ok = dnnl_byoc_execute(c->w_in, engine, stream, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO},
                           (void* const[]){(void*)w, weights}, memory);
  }
  int finite = c->weights_finite;  /* a call's own weights: whether they are all finite */
  if (ok && c->weights == NULL && c->winograd.n > 0) {
    finite = dnnl_byoc_winograd_weights((float*)weights, w, c->winograd.c, c->winograd.m);
  }
  ok = ok && dnnl_byoc_move(c->src_in, c->transposes[0], engine, stream, x, src, memory);
  if (ok && residual != NULL && c->dst_in != NULL) {
    ok = dnnl_byoc_move(c->dst_in, c->transposes[1], engine, stream, residual, dst, memory);
  } else if (ok && residual != NULL && !c->adds_residual && (const void*)residual != dst) {
    memcpy(dst, residual, sizeof(float) * (size_t)out_size);
  }
  if (c->winograd.n > 0) {  /* the residual is added from where it is, or from dst after the moves above */
    const float* add = c->adds_residual ? addend : residual != NULL ? (const float*)dst : NULL;
    const float* plain = c->plain != NULL ? c->plain : w;
    ok = ok && dnnl_byoc_winograd(c, engine, src, weights, plain, finite, b, add, dst, memory + at[5]);
  } else {
    /* the bias and the residual are the 4th and 5th arguments, where the conv takes them */
    const int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST,
                         b != NULL ? DNNL_ARG_BIAS : DNNL_BYOC_ARG_ADDEND, DNNL_BYOC_ARG_ADDEND};
    void* const ptrs[] = {src, weights, dst, b != NULL ? (void*)b : (void*)addend, (void*)addend};
    const int n = 3 + (b != NULL) + (c->adds_residual && !in_place);
    ok = ok && dnnl_byoc_execute(in_place ? c->in_place : c->conv, engine, stream, n, kinds, ptrs, memory);
  }
  ok = ok && dnnl_byoc_move(c->dst_out, c->transposes[2], engine, stream, dst, out, memory);
  if (kept) {
    atomic_store_explicit(&c->busy, 0, memory_order_release);
  } else {
    free(memory);
  }
  if (stream != NULL) dnnl_stream_destroy(stream);
  return ok ? 0 : 1;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_run_folded(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* x,
                         const float* w, int64_t wsize, int64_t m, const float* const* bn,
                         double epsilon, const float* residual, float* out, int64_t out_size) {
  float* folded = (float*)malloc(sizeof(float) * ((size_t)wsize + (size_t)m));
  if (folded == NULL) return 1;
  dnnl_byoc_fold_bn(folded, folded + wsize, w, wsize, m, bn, epsilon);
  const int failed = dnnl_byoc_run_packed(c, engine, x, folded, folded + wsize, residual, out, out_size);
  free(folded);
  return failed;
}

void dnnl_byoc_q8_free(dnnl_byoc_q8_t* q) {
  if (q->prim != NULL) dnnl_primitive_destroy(q->prim);
  if (q->to_src != NULL) dnnl_primitive_destroy(q->to_src);
  if (q->to_dst != NULL) dnnl_primitive_destroy(q->to_dst);
  free(q->weights);
  free(q->bias);
  free(q->w_scales);
  free(q->memory);
  for (int k = 0; k < 3; ++k) dnnl_byoc_step_free(&q->steps[k]);
  if (q->stream != NULL) dnnl_stream_destroy(q->stream);
  memset(q, 0, sizeof(*q));
}

/* Where q's scratch puts the reordered source (at[0]), the reordered result (at[1])
   and the scratchpads (at[2]), each at a multiple of 64 bytes; at[3] its bytes. */
static inline void dnnl_byoc_q8_offsets(const dnnl_byoc_q8_t* q, size_t* at) {
  const size_t sizes[] = {q->src_bytes, q->dst_bytes, q->scratch_bytes};
  dnnl_byoc_offsets(sizes, 3, at);
}

/* A kernel's init failing on what oneDNN cannot take (an int8 kernel's constants, an
   attention's shapes): says why, returns 1. */
static inline int dnnl_byoc_refuse(const char* kernel, const char* why) {
  fprintf(stderr, "byoc dnnl: %s: %s\n", kernel, why);
  return 1;
}

/* The scratch bytes of a primitive that may be NULL. */
static inline size_t dnnl_byoc_q8_scratch(const_dnnl_primitive_t prim) {
  return prim != NULL ? dnnl_byoc_scratch_size(prim) : 0;
}

/* The attributes of an int8 primitive: a user-managed scratchpad, the scales of the
   source and the result (one each) and of the weights (mask w_mask), the zero points
   of the source and the result (one each), and a relu post-op. NULL on a failure. */
static inline dnnl_primitive_attr_t dnnl_byoc_q8_attr(int w_mask, int relu) {
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, relu);
  if (attr == NULL) return NULL;
  const int ok = dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_SRC, 0) == dnnl_success
      && dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_WEIGHTS, w_mask) == dnnl_success
      && dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_DST, 0) == dnnl_success
      && dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_SRC, 0) == dnnl_success
      && dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_DST, 0) == dnnl_success;
  if (!ok) {
    dnnl_primitive_attr_destroy(attr);
    return NULL;
  }
  return attr;
}

/* Keeps a's weight scales and bias (m values) in q. 0 on success. */
static inline int dnnl_byoc_q8_keep(dnnl_byoc_q8_t* q, const dnnl_byoc_q8_args_t* a, int64_t m) {
  q->n_w_scales = a->n_w_scales;
  q->w_scales = (float*)malloc(sizeof(float) * (size_t)a->n_w_scales);
  if (q->w_scales == NULL) return 1;
  memcpy(q->w_scales, a->w_scales, sizeof(float) * (size_t)a->n_w_scales);
  if (a->bias != NULL) {
    q->bias = (float*)malloc(sizeof(float) * (size_t)(m > 0 ? m : 1));
    if (q->bias == NULL) return 1;
    memcpy(q->bias, a->bias, sizeof(float) * (size_t)m);
  }
  return 0;
}

/* Reorders the plain weights `w` (descriptor `plain`) once into the layout the
   primitive q->prim picked, into q->weights. 0 on success. */
static inline int dnnl_byoc_q8_pack(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const_dnnl_memory_desc_t plain,
                                    const int8_t* w) {
  const_dnnl_primitive_desc_t pd = NULL;
  if (dnnl_primitive_get_primitive_desc(q->prim, &pd) != dnnl_success) return 1;
  const_dnnl_memory_desc_t packed = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const size_t bytes = dnnl_memory_desc_get_size(packed);
  q->weights = dnnl_byoc_weights_alloc(bytes);
  if (q->weights == NULL) return 1;
  dnnl_primitive_t reorder = NULL;
  if (dnnl_byoc_reorder(&reorder, engine, plain, packed) != 0) return 1;
  if (reorder == NULL) {
    memcpy(q->weights, w, bytes);
    return 0;
  }
  const size_t scratch_bytes = dnnl_byoc_scratch_size(reorder);
  void* scratch = scratch_bytes > 0 ? malloc(scratch_bytes) : NULL;
  dnnl_stream_t stream = NULL;
  const int ok = (scratch_bytes == 0 || scratch != NULL)
      && dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success
      && dnnl_byoc_execute(reorder, engine, stream, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO},
                           (void* const[]){(void*)w, q->weights}, scratch)
      && dnnl_stream_wait(stream) == dnnl_success;
  if (stream != NULL) dnnl_stream_destroy(stream);
  free(scratch);
  dnnl_primitive_destroy(reorder);
  return ok ? 0 : 1;
}

/* The reorders of q's source from `src` and of its result into `dst` (plain), their
   buffers' sizes and the scratch every step shares. 0 on success. */
static inline int dnnl_byoc_q8_reorders(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const_dnnl_memory_desc_t src,
                                        const_dnnl_memory_desc_t dst) {
  const_dnnl_primitive_desc_t pd = NULL;
  if (dnnl_primitive_get_primitive_desc(q->prim, &pd) != dnnl_success) return 1;
  const_dnnl_memory_desc_t psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const_dnnl_memory_desc_t pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if (dnnl_byoc_reorder(&q->to_src, engine, src, psrc) != 0 || dnnl_byoc_reorder(&q->to_dst, engine, pdst, dst) != 0) {
    return 1;
  }
  q->src_bytes = q->to_src != NULL ? dnnl_memory_desc_get_size(psrc) : 0;
  q->dst_bytes = q->to_dst != NULL ? dnnl_memory_desc_get_size(pdst) : 0;
  size_t most = dnnl_byoc_q8_scratch(q->prim);
  const size_t s = dnnl_byoc_q8_scratch(q->to_src), d = dnnl_byoc_q8_scratch(q->to_dst);
  most = s > most ? s : most;
  q->scratch_bytes = d > most ? d : most;
  size_t at[4];
  dnnl_byoc_q8_offsets(q, at);
  q->memory = at[3] > 0 ? (char*)aligned_alloc(4096, (at[3] + 4095) / 4096 * 4096) : NULL;
  atomic_store_explicit(&q->busy, 0, memory_order_release);
  return at[3] > 0 && q->memory == NULL ? 1 : 0;
}

/* The int8 convolution of x (N, C, H, W; data type src_dt) by the s8 weights a->w (M,
   C/G, KH, KW) into (N, M, OH, OW) of data type dst_dt, plain nchw at both ends, of
   geometry g. The primitive picks its layouts (nhwc
   for the data, blocked weights with their compensations): the weights are reordered
   here, the source and the result by each call. 0 on success. */
static inline int dnnl_byoc_q8_conv2d(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const dnnl_byoc_conv_geometry* g,
                                      dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt,
                                      const dnnl_byoc_q8_args_t* a) {
  const int64_t groups = g->groups, m = g->o;
  const int64_t x[] = {g->n, g->c, g->h, g->w}, y[] = {g->n, m, g->oh, g->ow};
  const int64_t w[] = {groups, m / groups, g->c / groups, g->kh, g->kw}, b[] = {m};
  if (dnnl_byoc_q8_keep(q, a, m) != 0) return 1;
  const int wrank = groups > 1 ? 5 : 4;
  const int64_t* wdims = groups > 1 ? w : w + 1;
  const dnnl_dims_t xd = {x[0], x[1], x[2], x[3]}, yd = {y[0], y[1], y[2], y[3]};
  dnnl_dims_t wd;
  for (int k = 0; k < wrank; ++k) wd[k] = wdims[k];
  dnnl_memory_desc_t mds[6] = {NULL};
  int ok = dnnl_memory_desc_create_with_tag(&mds[0], 4, xd, src_dt, dnnl_format_tag_any) == dnnl_success
      && dnnl_memory_desc_create_with_tag(&mds[1], wrank, wd, dnnl_s8, dnnl_format_tag_any) == dnnl_success
      && dnnl_memory_desc_create_with_tag(&mds[2], 4, yd, dst_dt, dnnl_format_tag_any) == dnnl_success
      && (mds[3] = a->bias != NULL ? dnnl_byoc_md(1, b) : NULL, a->bias == NULL || mds[3] != NULL)
      && (mds[4] = dnnl_byoc_md_of(4, x, src_dt)) != NULL && (mds[5] = dnnl_byoc_md_of(4, y, dst_dt)) != NULL;
  /* per output channel: the weights' first axis, and the groups' with it */
  const int w_mask = a->n_w_scales > 1 ? (groups > 1 ? 3 : 1) : 0;
  dnnl_primitive_attr_t attr = ok ? dnnl_byoc_q8_attr(w_mask, a->relu) : NULL;
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = !ok ? dnnl_out_of_memory
      : dnnl_byoc_conv_desc(&pd, engine, g, mds[0], mds[1], mds[3], mds[2], attr);
  ok = dnnl_byoc_finish(&q->prim, made, pd, attr, NULL, 0) == 0;
  dnnl_memory_desc_t plain_w = NULL;
  ok = ok && (plain_w = dnnl_byoc_md_of(wrank, wdims, dnnl_s8)) != NULL
      && dnnl_byoc_q8_pack(q, engine, plain_w, a->w) == 0 && dnnl_byoc_q8_reorders(q, engine, mds[4], mds[5]) == 0;
  const_dnnl_primitive_desc_t made_pd = NULL;
  if (ok && dnnl_primitive_get_primitive_desc(q->prim, &made_pd) == dnnl_success) {
    dnnl_byoc_transposition(q->transposes[0], x, mds[4], dnnl_primitive_desc_query_md(made_pd, dnnl_query_src_md, 0),
                            src_dt);
    dnnl_byoc_transposition(q->transposes[1], y, dnnl_primitive_desc_query_md(made_pd, dnnl_query_dst_md, 0), mds[5],
                            dst_dt);
  }
  if (plain_w != NULL) dnnl_memory_desc_destroy(plain_w);
  for (int k = 0; k < 6; ++k) {
    if (mds[k] != NULL) dnnl_memory_desc_destroy(mds[k]);
  }
  if (!ok) dnnl_byoc_q8_free(q);
  return ok ? 0 : 1;
}

/* The int8 matmul of x (B, K; data type src_dt) by the s8 weights a->w (K, N; with
   `dense`, (N, K) rows, a dense layer's) into (B, N) of data type dst_dt, plain; the
   weights reordered here into the layout the primitive picks. 0 on success. */
static inline int dnnl_byoc_q8_matmul(dnnl_byoc_q8_t* q, dnnl_engine_t engine, int64_t batch, int64_t k,
                                      int64_t n, dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt,
                                      const dnnl_byoc_q8_args_t* a, int dense) {
  const int64_t x[] = {batch, k}, y[] = {batch, n}, b[] = {1, n};
  if (dnnl_byoc_q8_keep(q, a, n) != 0) return 1;
  const dnnl_dims_t wd = {k, n};
  dnnl_memory_desc_t mds[5] = {dnnl_byoc_md_of(2, x, src_dt), NULL, dnnl_byoc_md_of(2, y, dst_dt),
                               a->bias != NULL ? dnnl_byoc_md(2, b) : NULL, NULL};
  int ok = mds[0] != NULL && mds[2] != NULL && (a->bias == NULL || mds[3] != NULL)
      && dnnl_memory_desc_create_with_tag(&mds[4], 2, wd, dnnl_s8, dense ? dnnl_ba : dnnl_ab) == dnnl_success
      && dnnl_memory_desc_create_with_tag(&mds[1], 2, wd, dnnl_s8, dnnl_format_tag_any) == dnnl_success;
  /* per output channel: the weights' second axis */
  dnnl_primitive_attr_t attr = ok ? dnnl_byoc_q8_attr(a->n_w_scales > 1 ? 2 : 0, a->relu) : NULL;
  dnnl_primitive_desc_t pd = NULL;
  const dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_matmul_primitive_desc_create(&pd, engine, mds[0], mds[1], mds[3], mds[2], attr);
  ok = dnnl_byoc_finish(&q->prim, made, pd, attr, NULL, 0) == 0 && dnnl_byoc_q8_pack(q, engine, mds[4], a->w) == 0
      && dnnl_byoc_q8_reorders(q, engine, mds[0], mds[2]) == 0;
  for (int j = 0; j < 5; ++j) {
    if (mds[j] != NULL) dnnl_memory_desc_destroy(mds[j]);
  }
  if (!ok) dnnl_byoc_q8_free(q);
  return ok ? 0 : 1;
}

/* The end of a call that kept a kernel's scratch (its stream, memory and steps) while
   it ran: `kept`, the call took them and unlocks `busy`; else it made its own stream
   and memory, and frees them. */
static void dnnl_byoc_give_back(atomic_int* busy, int kept, dnnl_stream_t stream, void* memory) {
  if (kept) {
    atomic_store_explicit(busy, 0, memory_order_release);
    return;
  }
  if (stream != NULL) dnnl_stream_destroy(stream);
  free(memory);
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_q8_run(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const void* x, const float* xs,
                     int32_t xz, const float* ys, int32_t yz, void* out) {
  size_t at[4];
  dnnl_byoc_q8_offsets(q, at);
  const int kept = atomic_exchange_explicit(&q->busy, 1, memory_order_acquire) == 0;
  char* memory = kept ? q->memory : at[3] > 0 ? (char*)aligned_alloc(64, at[3]) : NULL;
  dnnl_stream_t stream = kept ? q->stream : NULL;
  int ok = (at[3] == 0 || memory != NULL)
      && (stream != NULL || dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success);
  if (kept) q->stream = stream;
  dnnl_byoc_step_t* steps = kept ? q->steps : NULL;
  void* src = q->to_src != NULL ? (void*)(memory + at[0]) : (void*)x;
  void* dst = q->to_dst != NULL ? (void*)(memory + at[1]) : out;
  void* scratch = memory != NULL ? memory + at[2] : NULL;
  if (ok && q->to_src != NULL && q->transposes[0][0] > 0) {
    dnnl_byoc_transpose(x, src, q->transposes[0]);
  } else if (ok && q->to_src != NULL) {
    ok = dnnl_byoc_execute_args(q->to_src, engine, stream, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, NULL,
                                (void* const[]){(void*)x, src}, scratch, kept ? &steps[0] : NULL);
  }
  /* the scales' and zero points' descriptors, when the memories are made */
  const int64_t one = 1;
  const int made = kept && steps[1].n > 0;
  dnnl_memory_desc_t scalar_f32 = NULL, scalar_s32 = NULL, w_scales = NULL;
  ok = ok
      && (made
          || ((scalar_f32 = dnnl_byoc_md(1, &one)) != NULL && (scalar_s32 = dnnl_byoc_md_of(1, &one, dnnl_s32)) != NULL
              && (w_scales = dnnl_byoc_md(1, &q->n_w_scales)) != NULL));
  if (ok) {
    int kinds[DNNL_BYOC_EXEC_ARGS] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST,
                                        DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS,
                                        DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
                                        DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST};
    const_dnnl_memory_desc_t mds[DNNL_BYOC_EXEC_ARGS] = {NULL, NULL, NULL, scalar_f32, w_scales, scalar_f32,
                                                           scalar_s32, scalar_s32};
    void* ptrs[DNNL_BYOC_EXEC_ARGS] = {src, q->weights, dst, (void*)xs, q->w_scales, (void*)ys, &xz, &yz};
    int n = 8;
    if (q->bias != NULL) {
      kinds[n] = DNNL_ARG_BIAS;
      mds[n] = NULL;
      ptrs[n++] = q->bias;
    }
    ok = dnnl_byoc_execute_args(q->prim, engine, stream, n, kinds, mds, ptrs, scratch, kept ? &steps[1] : NULL);
  }
  if (ok && q->to_dst != NULL && q->transposes[1][0] > 0) {
    dnnl_byoc_transpose(dst, out, q->transposes[1]);
  } else if (ok && q->to_dst != NULL) {
    ok = dnnl_byoc_execute_args(q->to_dst, engine, stream, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, NULL,
                                (void* const[]){dst, out}, scratch, kept ? &steps[2] : NULL);
  }
  if (scalar_f32 != NULL) dnnl_memory_desc_destroy(scalar_f32);
  if (scalar_s32 != NULL) dnnl_memory_desc_destroy(scalar_s32);
  if (w_scales != NULL) dnnl_memory_desc_destroy(w_scales);
  dnnl_byoc_give_back(&q->busy, kept, stream, memory);
  return ok ? 0 : 1;
}

/* Element i of an integer constant of data type dt (s8, u8 or s32). */
static inline int64_t dnnl_byoc_q8_int(const void* p, dnnl_data_type_t dt, int64_t i) {
  switch (dt) {
    case dnnl_s8: return ((const int8_t*)p)[i];
    case dnnl_u8: return ((const uint8_t*)p)[i];
    case dnnl_s32: return ((const int32_t*)p)[i];
    default: return 0;
  }
}

/* Whether a scale or zero point of n elements, of the extents shape[1 .. 1 + shape[0]],
   holds one value per output channel of weights of `wrank` extents (the channels on
   axis `axis`, m of them) as it broadcasts against them, or one value for all. */
static inline int dnnl_byoc_q8_fits(int64_t n, const int64_t* shape, int wrank, int axis, int64_t m) {
  if (n == 1) return 1;
  const int rank = (int)shape[0];
  if (n != m || rank > wrank) return 0;
  for (int k = 0; k < rank; ++k) {
    if (shape[1 + k] != 1 && k != axis - (wrank - rank)) return 0;
  }
  return 1;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_q8_create(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const char* kernel, int kind,
                        const dnnl_byoc_conv_geometry* geometry, const int64_t* bkn, const dnnl_data_type_t* dt, const float* ws, const void* w,
                        const void* wz, const float* bs, const int32_t* b, const int32_t* bz,
                        const int64_t* n, const int64_t* ws_shape, const int64_t* wz_shape, int relu) {
  memset(q, 0, sizeof(*q));
  if ((dt[0] != dnnl_s8 && dt[0] != dnnl_u8) || (dt[2] != dnnl_s8 && dt[2] != dnnl_u8)) {
    return dnnl_byoc_refuse(kernel, "oneDNN's int8 primitives take an int8 or uint8 source and result");
  }
  if (n[0] != 1 || n[1] != 1 || n[5] != 1 || n[6] != 1) {
    return dnnl_byoc_refuse(kernel, "oneDNN takes one scale and zero point for the source and the result");
  }
  const int conv = kind == DNNL_BYOC_Q8_CONV2D, matmul = kind == DNNL_BYOC_Q8_MATMUL;
  const int64_t m = conv ? geometry->o : bkn[2], wsize = n[2];
  const int wrank = conv ? 4 : 2, axis = matmul ? 1 : 0;  /* the weights' output channels */
  if (!dnnl_byoc_q8_fits(n[3], ws_shape, wrank, axis, m) || !dnnl_byoc_q8_fits(n[4], wz_shape, wrank, axis, m)) {
    return dnnl_byoc_refuse(kernel, "oneDNN takes the weights' scales per tensor or per output channel");
  }
  int8_t* w8 = (int8_t*)malloc((size_t)wsize + 1);
  float* bias = bs != NULL ? (float*)malloc(sizeof(float) * (size_t)(m + 1)) : NULL;
  int ok = w8 != NULL && (bs == NULL || bias != NULL), fits = 1;
  for (int64_t i = 0; ok && fits && i < wsize; ++i) {
    const int64_t c = matmul ? i % m : i / (wsize / m);
    const int64_t d = dnnl_byoc_q8_int(w, dt[1], i) - dnnl_byoc_q8_int(wz, dt[1], n[4] == 1 ? 0 : c);
    fits = d >= -128 && d <= 127;
    w8[i] = (int8_t)d;
  }
  for (int64_t c = 0; ok && bias != NULL && c < m; ++c) {
    bias[c] = ((float)b[n[7] == 1 ? 0 : c] - (float)bz[n[9] == 1 ? 0 : c]) * bs[n[8] == 1 ? 0 : c];
  }
  const dnnl_byoc_q8_args_t a = {w8, ws, n[3], bias, relu};
  int failed = 1;
  if (ok && !fits) {
    dnnl_byoc_refuse(kernel, "a weight minus its zero point is outside int8, which oneDNN's weights are");
  } else if (ok) {
    failed = conv ? dnnl_byoc_q8_conv2d(q, engine, geometry, dt[0], dt[2], &a)
                  : dnnl_byoc_q8_matmul(q, engine, bkn[0], bkn[1], bkn[2], dt[0], dt[2], &a, !matmul);
  }
  free(w8);
  free(bias);
  return failed;
}

/* Scaled dot-product attention (dnnl_byoc_attention_t, the attention patterns). */

/* out (s->dims, plain) = `in` read through s->strides: an input broadcast into a copy
   that a primitive reads (dnnl_byoc_spread_t). */
static inline void dnnl_byoc_spread(const float* in, float* out, const dnnl_byoc_spread_t* s) {
  const int64_t* e = s->dims;
  const int64_t* t = s->strides;
  for (int64_t i0 = 0; i0 < e[0]; ++i0) {
    for (int64_t i1 = 0; i1 < e[1]; ++i1) {
      for (int64_t i2 = 0; i2 < e[2]; ++i2, out += e[3]) {
        const float* row = in + i0 * t[0] + i1 * t[1] + i2 * t[2];
        if (t[3] == 1) {
          memcpy(out, row, sizeof(float) * (size_t)e[3]);
        } else {
          for (int64_t i3 = 0; i3 < e[3]; ++i3) out[i3] = row[i3 * t[3]];
        }
      }
    }
  }
}

/* The shape {rank, extents...} right-aligned against 4 axes, as numpy broadcasts it:
   e its extents (1 on the axes it lacks), t its plain row-major strides. */
static inline void dnnl_byoc_rank4(const int64_t* shape, int64_t* e, int64_t* t) {
  const int lacks = 4 - (int)shape[0];
  for (int j = 0; j < 4; ++j) e[j] = j < lacks ? 1 : shape[1 + j - lacks];
  dnnl_byoc_plain_strides(4, e, t);
}

/* The elements of 4 extents. */
static inline int64_t dnnl_byoc_size4(const int64_t* e) {
  return e[0] * e[1] * e[2] * e[3];
}

/* The descriptor *pd of the scores' matmul, q by kt into `scores`, whose post-ops
   divide (or multiply: `scale`, a binary algorithm) by c, one value, then add a bias
   of the plain extents `bias` (NULL: none), which oneDNN broadcasts against the
   scores; a user-managed scratchpad. */
static inline dnnl_status_t dnnl_byoc_scores_desc(dnnl_primitive_desc_t* pd, dnnl_engine_t engine,
                                                  const_dnnl_memory_desc_t q, const_dnnl_memory_desc_t kt,
                                                  const_dnnl_memory_desc_t scores, dnnl_alg_kind_t scale,
                                                  const int64_t* bias) {
  static const int64_t one[4] = {1, 1, 1, 1};
  dnnl_memory_desc_t c = dnnl_byoc_md(4, one), b = bias != NULL ? dnnl_byoc_md(4, bias) : NULL;
  dnnl_primitive_attr_t attr = dnnl_byoc_attr(0, NULL, 0);
  dnnl_post_ops_t ops = NULL;
  int ok = attr != NULL && c != NULL && (bias == NULL || b != NULL) && dnnl_post_ops_create(&ops) == dnnl_success
      && dnnl_post_ops_append_binary(ops, scale, c) == dnnl_success
      && (b == NULL || dnnl_post_ops_append_binary(ops, dnnl_binary_add, b) == dnnl_success)
      && dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
  *pd = NULL;
  const dnnl_status_t made = ok ? dnnl_matmul_primitive_desc_create(pd, engine, q, kt, NULL, scores, attr)
                                : dnnl_out_of_memory;
  if (ops != NULL) dnnl_post_ops_destroy(ops);
  if (attr != NULL) dnnl_primitive_attr_destroy(attr);
  if (c != NULL) dnnl_memory_desc_destroy(c);
  if (b != NULL) dnnl_memory_desc_destroy(b);
  return made;
}

/* Whether oneDNN runs pd with its reference implementation ("ref:any"), a loop of
   scalar code per element: for a matmul, 1000x slower than its brgemm kernels. */
static inline int dnnl_byoc_is_ref(const_dnnl_primitive_desc_t pd) {
  return strncmp(dnnl_byoc_impl(pd), "ref", 3) == 0;
}

/* The scores' matmul of a (q and kt as its descriptors give them) into the scores s
   (4 extents), with the bias b (4 extents, plain strides bt; NULL: none). oneDNN's
   brgemm matmul broadcasts a bias post-op only in some ways (over the scores' batch
   of (1, H) heads: (1, 1, 1, 1), (1, H, 1, 1), (1, 1, 1, Sk), (B, 1, 1, Sk),
   (B, 1, Sq, Sk) and whole, as oneDNN 3.2's broadcast strategies allow): for another
   (GPT-2's causal (1, 1, Sq, Sk) with a batch of 2, ALiBi's (1, H, 1, Sk)) it falls
   back to its reference code. Then the bias is spread along the fewest elements of
   the axes it repeats along, the smallest copy that a brgemm matmul takes (the call
   copies it, a->spreads[2]); if none does, it is read as it is, by the reference
   matmul. 0 on success. */
static inline int dnnl_byoc_attention_scores(dnnl_byoc_attention_t* a, dnnl_engine_t engine,
                                             const_dnnl_memory_desc_t q, const_dnnl_memory_desc_t kt,
                                             const_dnnl_memory_desc_t scores, dnnl_alg_kind_t scale,
                                             const int64_t* s, const int64_t* b, const int64_t* bt) {
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t made = dnnl_byoc_scores_desc(&pd, engine, q, kt, scores, scale, b);
  int repeats[4], n = 0;  /* the axes along which the bias repeats */
  for (int j = 0; b != NULL && j < 4; ++j) {
    if (b[j] != s[j]) repeats[n++] = j;
  }
  /* when oneDNN runs that with its reference code: the other subsets of those axes
     (bit j: repeats[j]), smallest spread first */
  int subsets[16], count = 0;
  int64_t sizes[16];
  for (int m = 1; made == dnnl_success && dnnl_byoc_is_ref(pd) && m < 1 << n; ++m) {
    int64_t size = 1;
    for (int j = 0; j < n; ++j) size *= (m >> j & 1) ? s[repeats[j]] : 1;
    int at = count++;
    for (; at > 0 && sizes[at - 1] > size; --at) {
      sizes[at] = sizes[at - 1];
      subsets[at] = subsets[at - 1];
    }
    sizes[at] = size;
    subsets[at] = m;
  }
  for (int k = 0; k < count; ++k) {
    int64_t e[4] = {b[0], b[1], b[2], b[3]};
    for (int j = 0; j < n; ++j) e[repeats[j]] = (subsets[k] >> j & 1) ? s[repeats[j]] : 1;
    dnnl_primitive_desc_t spread = NULL;
    if (dnnl_byoc_scores_desc(&spread, engine, q, kt, scores, scale, e) != dnnl_success) continue;
    if (dnnl_byoc_is_ref(spread)) {
      dnnl_primitive_desc_destroy(spread);
      continue;
    }
    dnnl_primitive_desc_destroy(pd);
    pd = spread;
    for (int j = 0; j < 4; ++j) {
      a->spreads[2].dims[j] = e[j];
      a->spreads[2].strides[j] = b[j] == 1 ? 0 : bt[j];
    }
    break;
  }
  return dnnl_byoc_finish(&a->prims[0], made, pd, NULL, NULL, 0);
}

void dnnl_byoc_attention_free(dnnl_byoc_attention_t* a) {
  for (int k = 0; k < 3; ++k) {
    if (a->prims[k] != NULL) dnnl_primitive_destroy(a->prims[k]);
    dnnl_byoc_step_free(&a->steps[k]);
  }
  free(a->memory);
  if (a->stream != NULL) dnnl_stream_destroy(a->stream);
  memset(a, 0, sizeof(*a));
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_attention_create(dnnl_byoc_attention_t* a, dnnl_engine_t engine, const char* kernel,
                               const int64_t* const* shapes, int k_transposed, dnnl_alg_kind_t scale,
                               int64_t c_size, const int64_t* out) {
  memset(a, 0, sizeof(*a));
  int64_t q[4], qt[4], k[4], kt[4], kts[4], v[4], vt[4], b[4] = {1, 1, 1, 1}, bt[4] = {0, 0, 0, 0};
  dnnl_byoc_rank4(shapes[0], q, qt);
  dnnl_byoc_rank4(shapes[1], k, kts);
  dnnl_byoc_rank4(shapes[2], v, vt);
  const int64_t* bias = shapes[3] != NULL ? b : NULL;
  if (bias != NULL) dnnl_byoc_rank4(shapes[3], b, bt);
  /* kt (..., D, Sk): k itself, or k's last two axes swapped, read through k's strides */
  memcpy(kt, k, sizeof(kt));
  if (k_transposed) {
    const int64_t e = kt[2], t = kts[2];
    kt[2] = kt[3], kts[2] = kts[3];
    kt[3] = e, kts[3] = t;
  }
  /* n: q kt's extents, the batch axes broadcast; s: the scores', n broadcast against
     the bias; y: the result's, s's batch broadcast against v's */
  const int64_t n[4] = {q[0] == 1 ? kt[0] : q[0], q[1] == 1 ? kt[1] : q[1], q[2], kt[3]};
  int64_t s[4], y[4];
  for (int j = 0; j < 4; ++j) s[j] = n[j] == 1 ? b[j] : n[j];
  for (int j = 0; j < 2; ++j) y[j] = s[j] == 1 ? v[j] : s[j];
  y[2] = s[2];
  y[3] = v[3];
  if (c_size != 1) return dnnl_byoc_refuse(kernel, "the scale is not one value");
  if (q[3] != kt[2] || s[3] != v[2] || memcmp(y, out, sizeof(y)) != 0) {
    return dnnl_byoc_refuse(kernel, "q, k, v and the bias do not make the result's shape");
  }
  a->out_size = dnnl_byoc_size4(y);
  if (a->out_size == 0) return 0; /* an empty result: nothing to compute */
  if (q[3] == 0 || s[3] == 0) return dnnl_byoc_refuse(kernel, "oneDNN has no matmul of an empty sum");
  /* where the bias makes the scores larger than q kt (a batch axis along which q and
     kt both repeat, one row of q or one column of kt against the bias's), the calls
     spread q and kt into copies of the scores' extents: the matmul broadcasts none */
  if (n[0] != s[0] || n[1] != s[1] || n[2] != s[2]) {
    for (int j = 0; j < 4; ++j) {
      a->spreads[0].dims[j] = j < 3 && n[j] != s[j] ? s[j] : q[j];
      a->spreads[0].strides[j] = j < 3 && n[j] != s[j] ? 0 : qt[j];
    }
  }
  if (n[3] != s[3]) {
    for (int j = 0; j < 4; ++j) {
      a->spreads[1].dims[j] = j == 3 ? s[3] : kt[j];
      a->spreads[1].strides[j] = j == 3 ? 0 : kts[j];
    }
  }
  const int spread_q = a->spreads[0].dims[3] > 0, spread_kt = a->spreads[1].dims[3] > 0;
  dnnl_memory_desc_t mds[5] = {
      spread_q ? dnnl_byoc_md(4, a->spreads[0].dims) : dnnl_byoc_md_strided(4, q, qt, dnnl_f32),
      spread_kt ? dnnl_byoc_md(4, a->spreads[1].dims) : dnnl_byoc_md_strided(4, kt, kts, dnnl_f32),
      dnnl_byoc_md(4, s), dnnl_byoc_md(4, v), dnnl_byoc_md(4, y)};
  int ok = mds[0] != NULL && mds[1] != NULL && mds[2] != NULL && mds[3] != NULL && mds[4] != NULL;
  ok = ok && dnnl_byoc_attention_scores(a, engine, mds[0], mds[1], mds[2], scale, s, bias, bt) == 0;
  /* softmax over the scores' last axis, in place; then the scores by v */
  dnnl_primitive_attr_t attr = ok ? dnnl_byoc_attr(0, NULL, 0) : NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t made = attr == NULL ? dnnl_out_of_memory
      : dnnl_softmax_forward_primitive_desc_create(&pd, engine, dnnl_forward_inference, dnnl_softmax_accurate,
            mds[2], mds[2], 3, attr);
  ok = ok && dnnl_byoc_finish(&a->prims[1], made, pd, attr, NULL, 0) == 0;
  attr = ok ? dnnl_byoc_attr(0, NULL, 0) : NULL;
  made = attr == NULL ? dnnl_out_of_memory
      : dnnl_matmul_primitive_desc_create(&pd, engine, mds[2], mds[3], NULL, mds[4], attr);
  ok = ok && dnnl_byoc_finish(&a->prims[2], made, pd, attr, NULL, 0) == 0;
  for (int j = 0; j < 5; ++j) {
    if (mds[j] != NULL) dnnl_memory_desc_destroy(mds[j]);
  }
  if (!ok) {
    dnnl_byoc_attention_free(a);
    return 1;
  }
  /* the scratch: the scores, the copies, and the largest of the three scratchpads */
  a->bytes[0] = sizeof(float) * (size_t)dnnl_byoc_size4(s);
  for (int j = 0; j < 3; ++j) a->bytes[1 + j] = sizeof(float) * (size_t)dnnl_byoc_size4(a->spreads[j].dims);
  for (int j = 0; j < 3; ++j) {
    const size_t scratch = dnnl_byoc_scratch_size(a->prims[j]);
    a->bytes[4] = scratch > a->bytes[4] ? scratch : a->bytes[4];
  }
  size_t at[6];
  dnnl_byoc_offsets(a->bytes, 5, at);
  a->memory = (char*)aligned_alloc(4096, (at[5] + 4095) / 4096 * 4096);
  atomic_store_explicit(&a->busy, 0, memory_order_release);
  if (a->memory == NULL) {
    dnnl_byoc_attention_free(a);
    return 1;
  }
  return 0;
}

/* Declared, and described, in dnnl_support.h. */
int dnnl_byoc_attention_run(dnnl_byoc_attention_t* a, dnnl_engine_t engine, const float* q, const float* k,
                            const float* v, const float* c, const float* bias, float* out) {
  if (a->out_size == 0) return 0;
  size_t at[6];
  dnnl_byoc_offsets(a->bytes, 5, at);
  const int kept = atomic_exchange_explicit(&a->busy, 1, memory_order_acquire) == 0;
  char* memory = kept ? a->memory : (char*)aligned_alloc(64, at[5]);
  if (memory == NULL) return 1; /* only a call's own allocation can fail */
  dnnl_stream_t stream = kept ? a->stream : NULL;
  int ok = stream != NULL || dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success;
  if (kept) a->stream = stream;
  dnnl_byoc_step_t* steps = kept ? a->steps : NULL;
  float* scores = (float*)(memory + at[0]);
  void* scratch = memory + at[4];
  /* the inputs as the scores' matmul reads them: spread into the scratch, or where they are */
  const float* inputs[3] = {q, k, bias};
  for (int j = 0; ok && j < 3; ++j) {
    if (a->spreads[j].dims[3] == 0) continue;
    float* copy = (float*)(memory + at[1 + j]);
    dnnl_byoc_spread(inputs[j], copy, &a->spreads[j]);
    inputs[j] = copy;
  }
  /* the scale and the bias are the first and second post-ops' second sources */
  const int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                       DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1};
  void* const ptrs[] = {(void*)inputs[0], (void*)inputs[1], scores, (void*)c, (void*)inputs[2]};
  ok = ok
      && dnnl_byoc_execute_args(a->prims[0], engine, stream, bias != NULL ? 5 : 4, kinds, NULL, ptrs, scratch,
                                kept ? &steps[0] : NULL)
      && dnnl_byoc_execute_args(a->prims[1], engine, stream, 2, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, NULL,
                                (void* const[]){scores, scores}, scratch, kept ? &steps[1] : NULL)
      && dnnl_byoc_execute_args(a->prims[2], engine, stream, 3,
                                (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, NULL,
                                (void* const[]){scores, (void*)v, out}, scratch, kept ? &steps[2] : NULL);
  dnnl_byoc_give_back(&a->busy, kept, stream, memory);
  return ok ? 0 : 1;
}

/* One row of dnnl_byoc_rms_norm, c elements from `row` into `dst`: the sum of its powers
   in 8 partial sums, lane l taking the elements l, l + 8, ... (vector lanes of doubles, a
   fixed order), merged in lane order; then the mean, eps, the root and each element's
   quotient and product in float32, as the pattern's float32 ops round them. */
DNNL_BYOC_OUTLINED DNNL_BYOC_CLONES static void dnnl_byoc_rms_row(const float* row, float p, float eps,
                                                                 const float* scale, int64_t scale_n,
                                                                 float* dst, int64_t c) {
  const int64_t whole = c - c % 8;
  double part[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  if (p == 2.0f) {
    for (int64_t k = 0; k < whole; k += 8) {
      #pragma omp simd
      for (int l = 0; l < 8; ++l) part[l] += (double)row[k + l] * (double)row[k + l];
    }
    for (int64_t k = whole; k < c; ++k) part[k - whole] += (double)row[k] * (double)row[k];
  } else {
    for (int64_t k = 0; k < c; ++k) part[k % 8] += (double)powf(row[k], p);
  }
  double sum = 0.0;
  for (int l = 0; l < 8; ++l) sum += part[l];
  const float root = sqrtf((float)(sum / (double)c) + eps);
  if (scale_n == c) {
    #pragma omp simd
    for (int64_t k = 0; k < c; ++k) dst[k] = row[k] / root * scale[k];
  } else {
    const float s = scale[0];
    #pragma omp simd
    for (int64_t k = 0; k < c; ++k) dst[k] = row[k] / root * s;
  }
}

/* Declared, and described, in dnnl_support.h. Below 32K elements the rows stay on the
   calling thread (waking oneDNN's workers costs more than they save). */
void dnnl_byoc_rms_norm(const float* x, float p, float eps, const float* scale, int64_t scale_n, float* out,
                        int64_t rows, int64_t c) {
  if (c <= 0) return;
  #pragma omp parallel for schedule(static) if (rows * c >= 32768)
  for (int64_t r = 0; r < rows; ++r) dnnl_byoc_rms_row(x + r * c, p, eps, scale, scale_n, out + r * c, c);
}
