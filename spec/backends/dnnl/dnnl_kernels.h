/* The kernels of the dnnl backend: the body of each macro of dnnl.yaml, which names this
 * file once (`bodies: {file: dnnl_kernels.h}`) and gives each macro's parameters'
 * arguments (in this parameter list's order), its layouts and its state, init and
 * teardown. The comment right above a #define is its macro's doc, which byoc writes above
 * the macro in the modules.
 *
 * byoc copies a #define into each generated module that uses its macro, without the
 * backslashes and the indentation, and expands it once per kernel: `p_ID_` is the
 * kernel's name, `p_STATE_` the region's state. No module includes this file; the
 * functions the kernels call are in dnnl_support.h and dnnl_support.c. A compiler error
 * in a kernel's line is reported at its line here.
 */

/* conv2d (NCHW, OIHW weights), then relu when relu is 1 (vars: relu), in the layouts oneDNN picks,
   the weights reordered by each call: the op conv and the pattern conv_relu */
#define DNNL_CONV2D(p_ID_, p_STATE_, p_SIZE_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 0, 0, p_RELU_, NULL, NULL, \
                                   0.0, (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_plain}); \
  } \
  static int p_ID_(const float* x, const float* w, float* out) { \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, w, NULL, NULL, out, p_SIZE_); \
  }

/* a pattern's conv2d plus a per-channel bias, optionally with relu after it, the weights reordered
   by each call (vars: relu) */
#define DNNL_CONV2D_BIAS(p_ID_, p_STATE_, p_SIZE_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 1, 0, p_RELU_, NULL, NULL, \
                                   0.0, (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_plain}); \
  } \
  static int p_ID_(const float* x, const float* w, const float* b, float* out) { \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, w, b, NULL, out, p_SIZE_); \
  }

/* a pattern's conv2d plus a residual of the output's shape, optionally with relu, the weights
   reordered by each call */
#define DNNL_CONV2D_SUM(p_ID_, p_STATE_, p_SIZE_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_, p_RES_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 0, 1, p_RELU_, NULL, NULL, \
                                   0.0, (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_RES_LAYOUT_}); \
  } \
  static int p_ID_(const float* x, const float* w, const float* residual, float* out) { \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, w, NULL, residual, out, p_SIZE_); \
  }

/* a pattern's conv2d then inference batch_norm, folded into the weights and a bias per call,
   optionally relu */
#define DNNL_CONV2D_BN(p_ID_, p_STATE_, p_SIZE_, p_M_, p_WSIZE_, p_EPS_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 1, 0, p_RELU_, NULL, NULL, \
                                   0.0, (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_plain}); \
  } \
  static int p_ID_(const float* x, const float* w, const float* scale, const float* bias, \
                   const float* mean, const float* var, float* out) { \
    return dnnl_byoc_run_folded(&p_STATE_->p_ID_, p_STATE_->engine, x, w, p_WSIZE_, p_M_, \
                                (const float* const[]){scale, bias, mean, var}, p_EPS_, NULL, out, p_SIZE_); \
  }

/* a pattern's conv2d of constant weights, in oneDNN's layouts, packed at init (vars: relu) */
#define DNNL_CONV2D_PACKED(p_ID_, p_STATE_, p_SIZE_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* w) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 0, 0, p_RELU_, w, NULL, 0.0, \
                                   (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_plain}); \
  } \
  static int p_ID_(const float* x, const float* w, float* out) { \
    (void)w; /* packed by the init */ \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, NULL, NULL, NULL, out, p_SIZE_); \
  }

/* a pattern's conv2d of constant weights plus a per-channel bias, packed at init (vars: relu) */
#define DNNL_CONV2D_BIAS_PACKED(p_ID_, p_STATE_, p_SIZE_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* w) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 1, 0, p_RELU_, w, NULL, 0.0, \
                                   (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_plain}); \
  } \
  static int p_ID_(const float* x, const float* w, const float* b, float* out) { \
    (void)w; /* packed by the init */ \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, NULL, b, NULL, out, p_SIZE_); \
  }

/* a pattern's conv2d of constant weights plus a residual (a sum post-op), packed at init (vars:
   relu) */
#define DNNL_CONV2D_SUM_PACKED(p_ID_, p_STATE_, p_SIZE_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_, p_RES_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* w) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 0, 1, p_RELU_, w, NULL, 0.0, \
                                   (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_RES_LAYOUT_}); \
  } \
  static int p_ID_(const float* x, const float* w, const float* residual, float* out) { \
    (void)w; /* packed by the init */ \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, NULL, NULL, residual, out, p_SIZE_); \
  }

/* a pattern's conv2d and batch_norm of constant parameters, folded and packed at init (vars: relu) */
#define DNNL_CONV2D_BN_PACKED(p_ID_, p_STATE_, p_SIZE_, p_EPS_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* w, \
                              const float* const* bn) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 0, 0, p_RELU_, w, bn, p_EPS_, \
                                   (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_plain}); \
  } \
  static int p_ID_(const float* x, const float* w, const float* scale, const float* shift, \
                   const float* mean, const float* var, float* out) { \
    (void)w, (void)scale, (void)shift, (void)mean, (void)var; /* folded and packed by the init */ \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, NULL, NULL, NULL, out, p_SIZE_); \
  }

/* a pattern's conv2d and batch_norm of constant parameters, folded and packed at init, plus a
   residual (a sum post-op) (vars: relu) */
#define DNNL_CONV2D_BN_SUM_PACKED(p_ID_, p_STATE_, p_SIZE_, p_EPS_, p_RELU_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_, p_RES_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* w, \
                              const float* const* bn) { \
    return dnnl_byoc_packed_conv2d(c, engine, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, 0, 1, p_RELU_, w, bn, p_EPS_, \
                                   (const int[]){DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_RES_LAYOUT_}); \
  } \
  static int p_ID_(const float* x, const float* w, const float* scale, const float* shift, \
                   const float* mean, const float* var, const float* residual, float* out) { \
    (void)w, (void)scale, (void)shift, (void)mean, (void)var; /* folded and packed by the init */ \
    return dnnl_byoc_run_packed(&p_STATE_->p_ID_, p_STATE_->engine, x, NULL, NULL, residual, out, p_SIZE_); \
  }

/* dense (an inner product), optionally with relu after it (vars: relu) */
#define DNNL_DENSE(p_ID_, p_STATE_, p_B_, p_K_, p_U_, p_RELU_, p_T_, p_DT_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_dense(prim, engine, p_B_, p_K_, p_U_, 0, p_RELU_, p_DT_); \
  } \
  static int p_ID_(const p_T_* x, const p_T_* w, p_T_* out) { \
    if (p_K_ == 0) return dnnl_byoc_dense_empty(&p_STATE_->p_ID_, p_STATE_->engine, NULL, out, p_B_, p_U_, sizeof(p_T_)); \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 3, \
                         (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, \
                         (void* const[]){(void*)x, (void*)w, out}); \
  }

/* dense plus a bias (an inner product with a bias), optionally with relu after it */
#define DNNL_DENSE_BIAS(p_ID_, p_STATE_, p_B_, p_K_, p_U_, p_RELU_, p_T_, p_DT_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_dense(prim, engine, p_B_, p_K_, p_U_, 1, p_RELU_, p_DT_); \
  } \
  static int p_ID_(const p_T_* x, const p_T_* w, const p_T_* b, p_T_* out) { \
    if (p_K_ == 0) return dnnl_byoc_dense_empty(&p_STATE_->p_ID_, p_STATE_->engine, b, out, p_B_, p_U_, sizeof(p_T_)); \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 4, \
                         (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}, \
                         (void* const[]){(void*)x, (void*)w, (void*)b, out}); \
  }

/* a 2-D pool (vars: alg, the pooling algorithm): the op max_pool and the avg_pool patterns */
#define DNNL_POOL2D(p_ID_, p_STATE_, p_ALG_, p_G_, p_SRC_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_pool2d(prim, engine, &(const dnnl_byoc_pool_geometry){DNNL_BYOC_ITEMS p_G_}, p_ALG_, \
                            DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_); \
  } \
  static int p_ID_(const float* x, float* out) { \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 2, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, \
                         (void* const[]){(void*)x, out}); \
  }

/* a pattern's concatenation of two 4-D tensors, along any axis */
#define DNNL_CONCAT2(p_ID_, p_STATE_, p_AXIS_, p_SHAPES_, p_A_LAYOUT_, p_B_LAYOUT_, p_DST_LAYOUT_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_concat4d(prim, engine, 2, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPES_}, p_AXIS_, \
                              (const int[]){DNNL_BYOC_LAYOUT_ ## p_A_LAYOUT_, DNNL_BYOC_LAYOUT_ ## p_B_LAYOUT_, \
                                            DNNL_BYOC_LAYOUT_ ## p_DST_LAYOUT_}); \
  } \
  static int p_ID_(const float* a, const float* b, float* out) { \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 3, \
                         (const int[]){DNNL_ARG_MULTIPLE_SRC, DNNL_ARG_MULTIPLE_SRC + 1, DNNL_ARG_DST}, \
                         (void* const[]){(void*)a, (void*)b, out}); \
  }

/* matmul as numpy has it (N-D, batch axes broadcast, a 1-D operand promoted), one oneDNN matmul */
#define DNNL_MATMUL(p_ID_, p_STATE_, p_A_, p_B_, p_SIZE_, p_T_, p_DT_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_matmul(prim, engine, DNNL_BYOC_ITEMS p_A_, DNNL_BYOC_ITEMS p_B_, p_DT_); \
  } \
  static int p_ID_(const p_T_* a, const p_T_* b, p_T_* out) { \
    return dnnl_byoc_matmul_run(&p_STATE_->p_ID_, p_STATE_->engine, a, b, out, sizeof(p_T_) * (size_t)p_SIZE_); \
  }

/* a pattern's matmul by constant weights (2-D), packed at init into the layout oneDNN picks (the
   state keeps them in p_ID_ ## _weights; b, the plain weights, is not read), then the eltwise
   algorithm p_ALG_ as its post-op (dnnl_alg_kind_undef: none; dnnl_eltwise_swish: m * sigmoid(m),
   a SwiGLU gate, whose swish of an empty sum, 0, is 0) */
#define DNNL_MATMUL_PACKED(p_ID_, p_STATE_, p_A_, p_B_, p_SIZE_, p_T_, p_DT_, p_ALG_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine, const p_T_* w, void** packed) { \
    return dnnl_byoc_matmul_packed(prim, engine, DNNL_BYOC_ITEMS p_A_, DNNL_BYOC_ITEMS p_B_, p_DT_, w, packed, 0, \
                                   p_ALG_); \
  } \
  static int p_ID_(const p_T_* a, const p_T_* b, p_T_* out) { \
    (void)b; /* packed by the init */ \
    return dnnl_byoc_matmul_run(&p_STATE_->p_ID_, p_STATE_->engine, a, p_STATE_->p_ID_ ## _weights, out, \
                                sizeof(p_T_) * (size_t)p_SIZE_); \
  }

/* a pattern's matmul by constant weights (2-D, float32) packed at init, times g, a tensor of the
   result's shape: the product is the matmul's post-op (DNNL_BYOC_ARG_OPERAND), so the matmul's
   result is never stored by itself. An empty sum is zeros, times g (NaN where g is inf or NaN). */
#define DNNL_MATMUL_MUL_PACKED(p_ID_, p_STATE_, p_A_, p_B_, p_SIZE_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine, const float* w, void** packed) { \
    return dnnl_byoc_matmul_mul_packed(prim, engine, DNNL_BYOC_ITEMS p_A_, DNNL_BYOC_ITEMS p_B_, w, packed); \
  } \
  static int p_ID_(const float* a, const float* b, const float* g, float* out) { \
    (void)b; /* packed by the init */ \
    if (p_STATE_->p_ID_.prim == NULL) { /* an empty sum (or an empty result) */ \
      for (int64_t k = 0; k < (int64_t)p_SIZE_; ++k) out[k] = g[k] * 0.0f; \
      return 0; \
    } \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 4, \
                         (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_BYOC_ARG_OPERAND, DNNL_ARG_DST}, \
                         (void* const[]){(void*)a, p_STATE_->p_ID_ ## _weights, (void*)g, out}); \
  }

/* a pattern's matmul by constant weights (2-D) packed at init, plus a bias along the last axis
   (p_BIAS_SIZE_ values: its extent, or 1) that the matmul adds itself; an empty sum gives the bias */
#define DNNL_MATMUL_BIAS_PACKED(p_ID_, p_STATE_, p_A_, p_B_, p_SIZE_, p_T_, p_DT_, p_BIAS_SIZE_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine, const p_T_* w, void** packed) { \
    return dnnl_byoc_matmul_packed(prim, engine, DNNL_BYOC_ITEMS p_A_, DNNL_BYOC_ITEMS p_B_, p_DT_, w, packed, \
                                   p_BIAS_SIZE_, dnnl_alg_kind_undef); \
  } \
  static int p_ID_(const p_T_* a, const p_T_* b, const p_T_* bias, p_T_* out) { \
    (void)b; /* packed by the init */ \
    if (p_STATE_->p_ID_.prim == NULL) {  /* an empty sum: the bias alone (or an empty result) */ \
      for (int64_t k = 0; k < (int64_t)p_SIZE_; ++k) out[k] = bias[k % p_BIAS_SIZE_]; \
      return 0; \
    } \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 4, \
                         (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}, \
                         (void* const[]){(void*)a, p_STATE_->p_ID_ ## _weights, (void*)bias, out}); \
  }

/* a pattern's linear layer and its gelu (float32): a matmul by constant weights (k x n, packed at
   init) plus a bias along the last axis, with gelu_erf or gelu_tanh (vars: alg) as the matmul's
   post-op, so the sum is never stored; then +inf where the sum is +inf, where oneDNN's gelu is NaN
   (dnnl_byoc_matmul_gelu_infinities). The pattern's condition rules out an empty sum (k = 0). */
#define DNNL_MATMUL_BIAS_GELU_PACKED(p_ID_, p_STATE_, p_A_, p_B_, p_SIZE_, p_ALG_, p_BIAS_SIZE_, p_K_, p_N_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine, const float* w, void** packed) { \
    return dnnl_byoc_matmul_packed(prim, engine, DNNL_BYOC_ITEMS p_A_, DNNL_BYOC_ITEMS p_B_, dnnl_f32, w, packed, \
                                   p_BIAS_SIZE_, p_ALG_); \
  } \
  static int p_ID_(const float* a, const float* w, const float* bias, float* out) { \
    if (p_STATE_->p_ID_.prim == NULL) return 0; /* an empty result */ \
    const int status = dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 4, \
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}, \
                                     (void* const[]){(void*)a, p_STATE_->p_ID_ ## _weights, (void*)bias, out}); \
    if (status == 0) dnnl_byoc_matmul_gelu_infinities(a, w, bias, p_BIAS_SIZE_, out, (p_SIZE_) / (p_N_), p_K_, p_N_); \
    return status; \
  }

/* an eltwise primitive (vars: alg, its algorithm; alpha and beta, its parameters, or the op's
   attributes of those names) */
#define DNNL_ELTWISE(p_ID_, p_STATE_, p_RANK_, p_SHAPE_, p_ALG_, p_ALPHA_, p_BETA_, p_T_, p_DT_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_eltwise(prim, engine, p_RANK_, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPE_}, p_ALG_, \
                             p_ALPHA_, p_BETA_, p_DT_); \
  } \
  static int p_ID_(const p_T_* x, p_T_* out) { \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 2, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, \
                         (void* const[]){(void*)x, out}); \
  }

/* gelu and gelu_tanh (float32): oneDNN's gelu_erf or gelu_tanh (vars: alg), then +inf where x is
   +inf, where oneDNN's is NaN (dnnl_byoc_gelu_infinities) */
#define DNNL_GELU(p_ID_, p_STATE_, p_ALG_, p_RANK_, p_SHAPE_, p_SIZE_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_eltwise(prim, engine, p_RANK_, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPE_}, p_ALG_, 0.0, \
                             0.0, dnnl_f32); \
  } \
  static int p_ID_(const float* x, float* out) { \
    const int status = dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 2, \
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, (void* const[]){(void*)x, out}); \
    if (status == 0) dnnl_byoc_gelu_infinities(x, out, p_SIZE_); \
    return status; \
  }

/* a pattern's layer normalization over the last axis, one oneDNN layer normalization: x, epsilon
   (one value, a constant read by the init), the scale and the shift (p_SCALE_SIZE_ and
   p_SHIFT_SIZE_ values: the axis's, or 1) */
#define DNNL_LAYER_NORM(p_ID_, p_STATE_, p_RANK_, p_SHAPE_, p_EPS_SIZE_, p_SCALE_SIZE_, p_SHIFT_SIZE_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine, const float* eps) { \
    if (p_EPS_SIZE_ != 1) return 1; /* the pattern takes a scalar epsilon only */ \
    return dnnl_byoc_layer_norm(prim, engine, p_RANK_, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPE_}, eps[0]); \
  } \
  static int p_ID_(const float* x, const float* eps, const float* scale, const float* shift, float* out) { \
    const int64_t extents[] = {DNNL_BYOC_ITEMS p_SHAPE_}; \
    (void)eps; /* read by the init */ \
    return dnnl_byoc_layer_norm_run(&p_STATE_->p_ID_, p_STATE_->engine, x, scale, p_SCALE_SIZE_, shift, \
                                    p_SHIFT_SIZE_, out, extents[p_RANK_ - 1]); \
  }

/* RMS normalization along the last axis (pattern rms_norm): x / sqrt(mean(x ** p) + eps) * scale,
   p and eps constant scalars, a scale of the last axis's extent or of one value */
#define DNNL_RMS_NORM(p_ID_, p_SIZE_, p_RANK_, p_SHAPE_, p_P_SIZE_, p_EPS_SIZE_, p_SCALE_SIZE_) \
  static void p_ID_(const float* x, const float* p, const float* eps, const float* scale, float* out) { \
    _Static_assert(p_P_SIZE_ == 1 && p_EPS_SIZE_ == 1, "the pattern takes a scalar exponent and epsilon"); \
    const int64_t extents[] = {DNNL_BYOC_ITEMS p_SHAPE_}; \
    const int64_t c = extents[p_RANK_ - 1]; \
    dnnl_byoc_rms_norm(x, p[0], eps[0], scale, p_SCALE_SIZE_, out, c > 0 ? p_SIZE_ / c : 0, c); \
  }

/* softmax along axis */
#define DNNL_SOFTMAX(p_ID_, p_STATE_, p_RANK_, p_SHAPE_, p_AXIS_, p_T_, p_DT_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_softmax(prim, engine, p_RANK_, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPE_}, p_AXIS_, p_DT_); \
  } \
  static int p_ID_(const p_T_* x, p_T_* out) { \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 2, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, \
                         (void* const[]){(void*)x, out}); \
  }

/* inference batch_norm over axis 1 (x, scale, shift, mean, variance), then relu when relu is 1
   (vars: relu): the op batch_norm and the pattern batch_norm_relu */
#define DNNL_BATCH_NORM(p_ID_, p_STATE_, p_RANK_, p_SHAPE_, p_EPS_, p_RELU_) \
  static int p_ID_ ## _create(dnnl_primitive_t* prim, dnnl_engine_t engine) { \
    return dnnl_byoc_batch_norm(prim, engine, p_RANK_, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPE_}, p_EPS_, \
                                p_RELU_); \
  } \
  static int p_ID_(const float* x, const float* scale, const float* shift, const float* mean, \
                   const float* var, float* out) { \
    return dnnl_byoc_run(&p_STATE_->p_ID_, p_STATE_->engine, 6, \
                         (const int[]){DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, \
                                       DNNL_ARG_VARIANCE, DNNL_ARG_DST}, \
                         (void* const[]){(void*)x, (void*)scale, (void*)shift, (void*)mean, (void*)var, out}); \
  }

/* a QDQ pattern's int8 conv2d, one oneDNN int8 convolution of constant weights packed at init
   (vars: relu) */
#define DNNL_CONV2D_Q8(p_ID_, p_STATE_, p_RELU_, p_G_, p_DTS_, p_XT_, p_WT_, p_T_, p_N_, p_WS_SHAPE_, p_WZ_SHAPE_) \
  static int p_ID_ ## _create(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const p_WT_* w, const float* ws, \
                              const p_WT_* wz) { \
    return dnnl_byoc_q8_create(q, engine, #p_ID_, DNNL_BYOC_Q8_CONV2D, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, NULL, \
                               (const dnnl_data_type_t[]){DNNL_BYOC_ITEMS p_DTS_}, ws, w, wz, NULL, NULL, NULL, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_N_, 0, 0, 0}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WS_SHAPE_}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WZ_SHAPE_}, p_RELU_); \
  } \
  static int p_ID_(const p_XT_* x, const float* xs, const p_XT_* xz, const void* w, const void* ws, \
                   const void* wz, const float* ys, const p_T_* yz, p_T_* out) { \
    (void)w, (void)ws, (void)wz; /* packed by the init */ \
    return dnnl_byoc_q8_run(&p_STATE_->p_ID_, p_STATE_->engine, x, xs, xz[0], ys, yz[0], out); \
  }

/* a QDQ pattern's int8 conv2d plus its dequantized int32 bias, one oneDNN int8 convolution (an f32
   bias) of constant weights packed at init (vars: relu) */
#define DNNL_CONV2D_Q8_BIAS(p_ID_, p_STATE_, p_RELU_, p_G_, p_DTS_, p_XT_, p_WT_, p_T_, p_N_, p_NB_, p_WS_SHAPE_, p_WZ_SHAPE_) \
  static int p_ID_ ## _create(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const p_WT_* w, const float* ws, \
                              const p_WT_* wz, const int32_t* b, const float* bs, const int32_t* bz) { \
    return dnnl_byoc_q8_create(q, engine, #p_ID_, DNNL_BYOC_Q8_CONV2D, &(const dnnl_byoc_conv_geometry){DNNL_BYOC_ITEMS p_G_}, NULL, \
                               (const dnnl_data_type_t[]){DNNL_BYOC_ITEMS p_DTS_}, ws, w, wz, bs, b, bz, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_N_, DNNL_BYOC_ITEMS p_NB_}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WS_SHAPE_}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WZ_SHAPE_}, p_RELU_); \
  } \
  static int p_ID_(const p_XT_* x, const float* xs, const p_XT_* xz, const void* w, const void* ws, \
                   const void* wz, const float* ys, const p_T_* yz, const void* b, const void* bs, \
                   const void* bz, p_T_* out) { \
    (void)w, (void)ws, (void)wz, (void)b, (void)bs, (void)bz; /* packed by the init */ \
    return dnnl_byoc_q8_run(&p_STATE_->p_ID_, p_STATE_->engine, x, xs, xz[0], ys, yz[0], out); \
  }

/* a QDQ pattern's int8 2-D matmul by constant weights, one oneDNN int8 matmul, the weights packed
   at init */
#define DNNL_MATMUL_Q8(p_ID_, p_STATE_, p_G_, p_DTS_, p_XT_, p_WT_, p_T_, p_N_, p_WS_SHAPE_, p_WZ_SHAPE_) \
  static int p_ID_ ## _create(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const p_WT_* w, const float* ws, \
                              const p_WT_* wz) { \
    return dnnl_byoc_q8_create(q, engine, #p_ID_, DNNL_BYOC_Q8_MATMUL, NULL, (const int64_t[]){DNNL_BYOC_ITEMS p_G_}, \
                               (const dnnl_data_type_t[]){DNNL_BYOC_ITEMS p_DTS_}, ws, w, wz, NULL, NULL, NULL, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_N_, 0, 0, 0}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WS_SHAPE_}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WZ_SHAPE_}, 0); \
  } \
  static int p_ID_(const p_XT_* x, const float* xs, const p_XT_* xz, const void* w, const void* ws, \
                   const void* wz, const float* ys, const p_T_* yz, p_T_* out) { \
    (void)w, (void)ws, (void)wz; /* packed by the init */ \
    return dnnl_byoc_q8_run(&p_STATE_->p_ID_, p_STATE_->engine, x, xs, xz[0], ys, yz[0], out); \
  }

/* a QDQ pattern's int8 dense (x times the (N, K) weights transposed) plus its dequantized int32
   bias, one oneDNN int8 matmul of constant weights packed at init (vars: relu) */
#define DNNL_DENSE_Q8_BIAS(p_ID_, p_STATE_, p_G_, p_DTS_, p_XT_, p_WT_, p_T_, p_N_, p_NB_, p_WS_SHAPE_, p_WZ_SHAPE_, p_RELU_) \
  static int p_ID_ ## _create(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const p_WT_* w, const float* ws, \
                              const p_WT_* wz, const int32_t* b, const float* bs, const int32_t* bz) { \
    return dnnl_byoc_q8_create(q, engine, #p_ID_, DNNL_BYOC_Q8_DENSE, NULL, (const int64_t[]){DNNL_BYOC_ITEMS p_G_}, \
                               (const dnnl_data_type_t[]){DNNL_BYOC_ITEMS p_DTS_}, ws, w, wz, bs, b, bz, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_N_, DNNL_BYOC_ITEMS p_NB_}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WS_SHAPE_}, \
                               (const int64_t[]){DNNL_BYOC_ITEMS p_WZ_SHAPE_}, p_RELU_); \
  } \
  static int p_ID_(const p_XT_* x, const float* xs, const p_XT_* xz, const void* w, const void* ws, \
                   const void* wz, const float* ys, const p_T_* yz, const void* b, const void* bs, \
                   const void* bz, p_T_* out) { \
    (void)w, (void)ws, (void)wz, (void)b, (void)bs, (void)bz; /* packed by the init */ \
    return dnnl_byoc_q8_run(&p_STATE_->p_ID_, p_STATE_->engine, x, xs, xz[0], ys, yz[0], out); \
  }

/* a pattern's scaled dot-product attention, softmax(q kt / c + bias) v: the scores' matmul with the
   scale and the bias as post-ops (vars: scale, dnnl_binary_div or dnnl_binary_mul; k_transposed 1
   where the pattern transposes k, read through strides), softmax in place, the matmul by v, the
   scores in the kernel's scratch (dnnl_byoc_attention_create) */
#define DNNL_ATTENTION_BIAS(p_ID_, p_STATE_, p_SHAPE_, p_Q_, p_K_, p_V_, p_C_SIZE_, p_BIAS_, p_SCALE_, p_K_TRANSPOSED_) \
  static int p_ID_ ## _create(dnnl_byoc_attention_t* a, dnnl_engine_t engine) { \
    return dnnl_byoc_attention_create(a, engine, #p_ID_, \
                                      (const int64_t* const[]){(const int64_t[]){DNNL_BYOC_ITEMS p_Q_}, \
                                                               (const int64_t[]){DNNL_BYOC_ITEMS p_K_}, \
                                                               (const int64_t[]){DNNL_BYOC_ITEMS p_V_}, \
                                                               (const int64_t[]){DNNL_BYOC_ITEMS p_BIAS_}}, \
                                      p_K_TRANSPOSED_, p_SCALE_, p_C_SIZE_, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPE_}); \
  } \
  static int p_ID_(const float* q, const float* k, const float* v, const float* c, const float* bias, float* out) { \
    return dnnl_byoc_attention_run(&p_STATE_->p_ID_, p_STATE_->engine, q, k, v, c, bias, out); \
  }

/* a pattern's scaled dot-product attention without a bias, softmax(q kt / c) v (vars: scale,
   k_transposed), as DNNL_ATTENTION_BIAS computes it */
#define DNNL_ATTENTION(p_ID_, p_STATE_, p_SHAPE_, p_Q_, p_K_, p_V_, p_C_SIZE_, p_SCALE_, p_K_TRANSPOSED_) \
  static int p_ID_ ## _create(dnnl_byoc_attention_t* a, dnnl_engine_t engine) { \
    return dnnl_byoc_attention_create(a, engine, #p_ID_, \
                                      (const int64_t* const[]){(const int64_t[]){DNNL_BYOC_ITEMS p_Q_}, \
                                                               (const int64_t[]){DNNL_BYOC_ITEMS p_K_}, \
                                                               (const int64_t[]){DNNL_BYOC_ITEMS p_V_}, NULL}, \
                                      p_K_TRANSPOSED_, p_SCALE_, p_C_SIZE_, (const int64_t[]){DNNL_BYOC_ITEMS p_SHAPE_}); \
  } \
  static int p_ID_(const float* q, const float* k, const float* v, const float* c, float* out) { \
    return dnnl_byoc_attention_run(&p_STATE_->p_ID_, p_STATE_->engine, q, k, v, c, NULL, out); \
  }
