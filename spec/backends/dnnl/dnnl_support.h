/* The dnnl backend's support code (dnnl.yaml lists it under `support:`): the types,
   macros and functions its kernels call, over oneDNN's C API. Every module generated
   for the backend includes this header; dnnl_support.c defines the functions, compiled
   once per spec version, compiler and flags into an object each module's library
   links. */
#ifndef DNNL_SUPPORT_H
#define DNNL_SUPPORT_H

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>

/* The kernels below use oneDNN 3's C API; oneDNN 2 (Debian's libdnnl-dev, say) lacks it. */
#if DNNL_VERSION_MAJOR < 3
#error "the dnnl backend needs oneDNN 3 or later; the oneDNN found is older: pip install 'byoc-codegen[dnnl]'"
#endif

#define DNNL_BYOC_ITEMS(...) __VA_ARGS__

/* The most execution arguments a kernel passes (batch_norm's six), besides a scratchpad. */
#define DNNL_BYOC_MAX_ARGS 8

/* The most execution arguments one execution takes, a scratchpad included: an int8
   primitive's source, weights, bias, result, three scales and two zero points. */
#define DNNL_BYOC_EXEC_ARGS 10

/* oneDNN's data type of a byoc dtype, as a macro pastes it: DNNL_BYOC_DT_ ## dtype. */
#define DNNL_BYOC_DT_float32 dnnl_f32
#define DNNL_BYOC_DT_float16 dnnl_f16
#define DNNL_BYOC_DT_bfloat16 dnnl_bf16

/* The layouts a kernel's data may have, as its use names them (the spec's `layouts:`):
   byoc's plain row-major nchw, or channels_last, nhwc. A macro body pastes the name,
   DNNL_BYOC_LAYOUT_ ## p_SRC_LAYOUT_. */
#define DNNL_BYOC_LAYOUT_plain 0
#define DNNL_BYOC_LAYOUT_channels_last 1

/* The execution argument of a residual that a convolution adds itself (the source of
   its first post-op, a binary add). */
#define DNNL_BYOC_ARG_ADDEND (DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1)
/* The same argument where the first post-op multiplies (dnnl_byoc_matmul_mul_packed): its factor. */
#define DNNL_BYOC_ARG_OPERAND DNNL_BYOC_ARG_ADDEND

/* The execution arguments of one primitive's execution, kept between calls (an int8
   kernel keeps those of its source's reorder, its primitive and its result's
   reorder): memories whose data handles each call sets (the scratchpad's, last,
   fixed). n 0: not made. */
typedef struct {
  int n;
  dnnl_exec_arg_t args[DNNL_BYOC_EXEC_ARGS];
} dnnl_byoc_step_t;

/* A kernel's primitive and what its calls reuse: a stream, one memory object per
   execution argument (the scratchpad's last) and the scratchpad's bytes, made by the
   first call that runs on them. `busy` is the lock of the reusable part: a call
   that takes it (an atomic exchange, never a wait) sets the memories' data handles
   to its buffers and runs in that stream; a call made while another holds it runs
   as dnnl_byoc_run_alone, with a stream and memories of its own. Making a stream and
   the memories costs twice what executing a 10x10 inner product does; reused, a
   small call costs about what oneDNN called directly does. */
typedef struct {
  dnnl_primitive_t prim;
  atomic_int busy;                      /* 1 while a call uses the fields below */
  int ready;                            /* the fields below are made */
  int n;                                /* args[0 .. n): the arguments, then a scratchpad */
  dnnl_stream_t stream;
  dnnl_exec_arg_t args[DNNL_BYOC_MAX_ARGS + 1];
  void* scratch;
} dnnl_byoc_prim_t;

/* A Winograd conv's plan (dnnl_byoc_winograd_init's): the geometry its transforms
   read, and how its threads share its 2x2 result tiles. */
typedef struct {
  int64_t n, h, w, c;               /* the source, nhwc */
  int64_t m;                        /* the output channels */
  int64_t pad_top, pad_left;
  int64_t oh, ow;                   /* the result, nhwc */
  int64_t relu;                     /* 1: a relu after the bias and addend */
  int64_t tiles, block, threads;    /* the tiles, the tiles of a block, the threads */
} dnnl_byoc_winograd_plan;

/* A convolution in the layouts oneDNN picks for it (format_tag_any: blocked ones,
   which run its direct and brgemm kernels rather than the plain layouts' im2col and
   gemm). Constant weights, and a folded batch_norm's bias, are packed into its layout
   once, at init; weights that are inputs are reordered into it by each call, in the
   call's scratch (147 KB for a 64x64 3x3 conv, against the 2.4x a plain-layout conv
   takes). The source, a residual and the result are reordered between the layouts
   the kernel's use gives them (byoc's plain one, or channels_last) and the
   primitive's in the call's scratch, when they differ (a NULL reorder where they do
   not). Read-only after the init but for `busy`, the lock of the scratch it keeps
   (`memory`): a call takes it, and a call made while another thread holds it
   allocates its own. Allocating it per call cost what the kernel zeroes fresh pages
   for: with glibc handing the 8 MB of a 64x56x56 Winograd conv back to the system
   after each call (MALLOC_MMAP_THRESHOLD_=1048576), 2.6 ms a call against 0.32. */
typedef struct {
  dnnl_primitive_t conv;
  /* the conv with a sum post-op, for a call whose output is its residual's buffer (the
     function's memory plan lets the result overwrite a residual read last here): it
     adds what dst holds, with no copy. Against the binary post-op into a buffer of its
     own, this skips the result's cold writes: 1x1 convs of ResNet-50 on an Intel Xeon,
     387-308 us against 505-376. NULL: none (a Winograd conv, or other layouts). */
  dnnl_primitive_t in_place;
  dnnl_primitive_t src_in;   /* x -> the conv's source layout */
  dnnl_primitive_t dst_in;   /* a residual -> the destination layout (a sum post-op) */
  dnnl_primitive_t dst_out;  /* the destination layout -> the output's */
  dnnl_primitive_t w_in;     /* a call's plain weights -> the conv's layout (weights NULL) */
  void* weights;             /* the weights in the conv's layout; NULL: each call brings them */
  float* plain;              /* a Winograd conv's packed weights as they were, (M, C, 3, 3) with a batch_norm
                                folded in: the direct stand-in's for tiles that are not finite */
  int weights_finite;        /* a Winograd conv's packed weights are all finite (0: every tile direct) */
  float* bias;               /* a folded batch_norm's bias; NULL: the kernel's bias input, if any */
  int adds_residual;         /* the conv reads the residual itself (DNNL_BYOC_ARG_ADDEND), not from dst */
  int64_t transposes[3][7];  /* byoc's transposes doing src_in, dst_in, dst_out (dnnl_byoc_transposition) */
  /* a Winograd conv's plan, its source and result nhwc and `conv` the matmul of a
     block; all 0: a oneDNN convolution */
  dnnl_byoc_winograd_plan winograd;
  /* a call's scratch, in bytes: the primitives' scratchpad, the reordered source and
     result, a copy of a residual passed as the output too, the reordered weights,
     and the Winograd transforms' */
  size_t scratch[6];
  char* memory;              /* the kept scratch, of all of scratch[] (dnnl_byoc_offsets) */
  atomic_int busy;           /* 1 while a call uses `memory` */
} dnnl_byoc_packed_conv_t;

/* int8 (QDQ) convolutions and matmuls: a pattern's
   quantize_linear(op(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz)), ys, yz)
   as one oneDNN int8 primitive. x is u8 or s8 (DNNL_BYOC_Q8_ ## dtype), w s8, the
   result u8 or s8; oneDNN multiplies the 8-bit values into exact int32 sums of
   (x - xz) * w, then in float32 scales them by xs * ws (per tensor, or per output
   channel), adds the float32 bias, applies the relu, divides by ys (dst scale), adds
   yz and rounds to nearest even, saturated. Scales and zero points are runtime
   arguments (DNNL_ARG_ATTR_SCALES | arg, DNNL_ARG_ATTR_ZERO_POINTS | arg), f32 and
   s32. The weights (and the bias, dequantized in float32 as ONNX does) are
   constants, reordered once at init into the layout the primitive picks. */
#include <stdio.h>
#define DNNL_BYOC_Q8_int8 dnnl_s8
#define DNNL_BYOC_Q8_uint8 dnnl_u8
#define DNNL_BYOC_Q8_int32 dnnl_s32

/* The weights and the bias an int8 kernel's init makes of its pattern's constants. */
typedef struct {
  const int8_t* w;          /* the weights, plain: oihw (a conv) or (K, N) (a matmul) */
  const float* w_scales;    /* 1 or one per output channel */
  int64_t n_w_scales;
  const float* bias;        /* one per output channel; NULL: no bias */
  int relu;
} dnnl_byoc_q8_args_t;

/* An int8 kernel: its primitive, the reorders of its source and result between
   byoc's plain layout and the primitive's (NULL: the same), and its constants.
   Read-only after the init but for `busy`, the lock of what it keeps: the scratch
   (`memory`: the reordered source and result and the scratchpads, page-aligned as
   dnnl_byoc_packed_conv_t's), a stream and the memories of each step. A call takes
   it, and a call made while another thread holds it makes its own. Kept, a call
   costs what oneDNN called directly does (made per call, about 10 us more). */
typedef struct {
  dnnl_primitive_t prim, to_src, to_dst;
  void* weights;            /* in the primitive's layout */
  float* bias;              /* NULL: none */
  float* w_scales;          /* n_w_scales: 1, or one per output channel */
  int64_t n_w_scales;
  size_t src_bytes, dst_bytes, scratch_bytes;
  int64_t transposes[2][7]; /* byoc's transposes doing to_src and to_dst (dnnl_byoc_transposition) */
  char* memory;             /* the kept scratch (dnnl_byoc_q8_offsets lays it out); NULL: none needed */
  dnnl_stream_t stream;     /* the kept stream; NULL: not made yet */
  dnnl_byoc_step_t steps[3]; /* the kept memories of to_src, prim and to_dst */
  atomic_int busy;          /* 1 while a call uses `memory`, `stream` and `steps` */
} dnnl_byoc_q8_t;

/* The int8 kernels' kinds: what dnnl_byoc_q8_create makes. */
#define DNNL_BYOC_Q8_CONV2D 0
#define DNNL_BYOC_Q8_MATMUL 1  /* weights (K, N) */
#define DNNL_BYOC_Q8_DENSE 2   /* weights (N, K): a matmul by their transpose */

/* Scaled dot-product attention, softmax(q kt / c + bias) v (or q kt times c), as the
   attention patterns match it in a transformer imported from ONNX: three oneDNN
   primitives, created once. The first matmul computes the scores of every (batch,
   head) pair, its binary post-ops divide them by c (or multiply) and add the bias, which
   oneDNN broadcasts; softmax runs in place over their last axis; the second matmul
   multiplies them by v into the result. The scores live in the kernel's scratch (with
   the copies below and the primitives' one scratchpad), kept between calls as a
   dnnl_byoc_q8_t's is: a call takes it with an atomic exchange, and a call made while
   another thread holds it allocates its own. */

/* An input a call copies, broadcast, before a primitive reads it: where oneDNN would
   run its reference matmul (1000x slower: 165 ms against 0.16 for GPT-2's scores) on
   the input as it is, or cannot broadcast it at all (a bias whose batch the scores'
   matmul would not make). out[i0][i1][i2][i3] = in[i0 * strides[0] + ...], plain. */
typedef struct {
  int64_t dims[4];     /* the copy's extents; dims[3] 0: the input is read as it is */
  int64_t strides[4];  /* the input's step along each axis, 0 where the copy repeats it */
} dnnl_byoc_spread_t;

typedef struct {
  dnnl_primitive_t prims[3];     /* the scores (q kt, scale, bias), softmax in place, the result */
  dnnl_byoc_spread_t spreads[3]; /* copies of q, kt and the bias (dnnl_byoc_attention_create says when) */
  int64_t out_size;              /* 0: an empty result, no primitives */
  /* the scratch's parts, in bytes: the scores, the copies of q, kt and the bias, and
     the scratchpad the three primitives share (they run one after the other) */
  size_t bytes[5];
  char* memory;                  /* the kept scratch (dnnl_byoc_offsets lays it out) */
  dnnl_stream_t stream;          /* the kept stream; NULL: not made yet */
  dnnl_byoc_step_t steps[3];     /* the kept memories of each primitive's execution */
  atomic_int busy;               /* 1 while a call uses `memory`, `stream` and `steps` */
} dnnl_byoc_attention_t;

/* The functions of dnnl_support.c that the spec's macros call. Hidden: a module's
   library links them but never exports them, so two libraries loaded in one process
   keep their own. */
#if defined(__GNUC__)
#define DNNL_SUPPORT_API __attribute__((visibility("hidden")))
#else
#define DNNL_SUPPORT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A 2-D convolution's geometry: x (n, c, h, w) by weights (o, c / groups, kh, kw) into
   (n, o, oh, ow). Pads and dilations are ONNX's (a dilation of 1 is none); the
   generated code writes it with designated initializers, from the op's attributes. */
typedef struct {
  int64_t n, c, h, w;                /* the source */
  int64_t o, kh, kw;                 /* the weights' output channels and window */
  int64_t oh, ow;                    /* the result's height and width */
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t dilation_h, dilation_w;
  int64_t groups;
} dnnl_byoc_conv_geometry;

/* A 2-D pool's geometry: x (n, c, h, w) into (n, c, oh, ow) by a kh x kw window. */
typedef struct {
  int64_t n, c, h, w;                /* the source */
  int64_t oh, ow;                    /* the result's height and width */
  int64_t kh, kw;                    /* the window */
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t dilation_h, dilation_w;
} dnnl_byoc_pool_geometry;

/* dense: y (B, U) = x (B, K) times w (U, K) transposed (an inner product),
   optionally plus a bias (U,), then a relu when `relu`; all of data type `dt`. oneDNN
   has no inner product of K = 0: there y is the bias or zeros (dnnl_byoc_dense_empty
   writes it), and *prim the relu of a bias, in place (NULL when there is nothing to do). */
DNNL_SUPPORT_API int dnnl_byoc_dense(dnnl_primitive_t* prim, dnnl_engine_t engine, int64_t batch, int64_t k,
                                     int64_t units, int bias, int relu, dnnl_data_type_t dt);

/* A 2-D pool of geometry g, source and result each in its layout (one of
   DNNL_BYOC_LAYOUT_*). The right padding is what makes the output size byoc's: more
   than the pads when ceil_mode rounded the size up, and a window's overhang is padding
   (never the maximum; not counted by avg_exclude_padding). */
DNNL_SUPPORT_API int dnnl_byoc_pool2d(dnnl_primitive_t* prim, dnnl_engine_t engine, const dnnl_byoc_pool_geometry* g,
                                      dnnl_alg_kind_t alg, int x_layout, int y_layout);

/* The concatenation along `axis` of n 4-D tensors (N, C, H, W), each in its layout
   (DNNL_BYOC_LAYOUT_*: layouts[k] for input k, layouts[n] for the result); `shapes`
   holds the inputs' extents, 4 each, then the result's. */
DNNL_SUPPORT_API int dnnl_byoc_concat4d(dnnl_primitive_t* prim, dnnl_engine_t engine, int n, const int64_t* shapes,
                                        int axis, const int* layouts);

/* An eltwise op `alg` with its parameters alpha and beta (oneDNN's names: the slope of
   a leaky relu, elu's scale, soft_relu's 1) over a tensor of `rank`
   extents of data type `dt`. */
DNNL_SUPPORT_API int dnnl_byoc_eltwise(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank,
                                       const int64_t* extents, dnnl_alg_kind_t alg, double alpha, double beta,
                                       dnnl_data_type_t dt);

/* dnnl_byoc_matmul by constant weights w (b's extents, plain): the primitive with its
   weights in the layout oneDNN picks for them (format_tag_any: its brgemm kernels'
   blocked one), and *packed the weights reordered into it, once (aligned_alloc: the
   caller frees it). With `bias` values (0: none; the last axis's extent, or 1), a bias
   added along the last axis (DNNL_ARG_BIAS), and with a `post` algorithm (not
   dnnl_alg_kind_undef) that eltwise applied to the sum, in float, before the result is
   stored. An empty sum or result makes neither (*prim and *packed NULL). 0 on success. */
DNNL_SUPPORT_API int dnnl_byoc_matmul_packed(dnnl_primitive_t* prim, dnnl_engine_t engine, int ra, const int64_t* a,
                                             int rb, const int64_t* b, dnnl_data_type_t dt, const void* w,
                                             void** packed, int64_t bias, dnnl_alg_kind_t post);

/* Layer normalization over the last of `rank` extents (the others flattened into rows),
   with a scale and a shift of that axis's extent c and `epsilon`: one oneDNN layer
   normalization of (rows, c). */
DNNL_SUPPORT_API int dnnl_byoc_layer_norm(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank,
                                          const int64_t* extents, double epsilon);

/* Runs p (dnnl_byoc_layer_norm's) on x into out; a scale or shift of scale_n or shift_n
   values: c, or 1 (broadcast: repeated c times for the call). 0 on success. */
DNNL_SUPPORT_API int dnnl_byoc_layer_norm_run(dnnl_byoc_prim_t* p, dnnl_engine_t engine, const float* x,
                                              const float* scale, int64_t scale_n, const float* shift,
                                              int64_t shift_n, float* out, int64_t c);

/* RMS normalization over the last axis, of extent c, of `rows` rows, as the ops of the
   pattern rms_norm compute it: out = x / sqrt(mean(x ** p) + eps) * scale, a scale of
   scale_n values (c, or 1: broadcast). byoc's own loop (oneDNN 3.2's layer
   normalization always subtracts the mean): each row's powers summed in double, on
   oneDNN's OpenMP threads for large tensors; the rest in float32, op by op, as the
   pattern's ops round. p == 2 squares exactly; another p calls powf. */
DNNL_SUPPORT_API void dnnl_byoc_rms_norm(const float* x, float p, float eps, const float* scale, int64_t scale_n,
                                         float* out, int64_t rows, int64_t c);

/* After oneDNN's gelu_erf or gelu_tanh over n floats: where x is +inf, out is +inf (as
   the catalog's gelu and gelu_tanh), not oneDNN's NaN; their only difference from the
   catalog's ops (tests/test_nan_semantics.py). */
DNNL_SUPPORT_API void dnnl_byoc_gelu_infinities(const float* x, float* out, int64_t n);

/* dnnl_byoc_matmul_packed (float32, no bias, no eltwise) with the result multiplied by a
   tensor of the result's shape as the matmul's post-op (DNNL_BYOC_ARG_OPERAND, row-major),
   so the product is never stored by itself: `g * (x @ w)`, the up projection of a SwiGLU
   times the gate's swish. An empty sum or result makes neither (*prim and *packed NULL).
   0 on success. */
DNNL_SUPPORT_API int dnnl_byoc_matmul_mul_packed(dnnl_primitive_t* prim, dnnl_engine_t engine, int ra,
                                                 const int64_t* a, int rb, const int64_t* b, const float* w,
                                                 void** packed);

/* The same after a matmul whose gelu is its post-op (dnnl_byoc_matmul_packed's `post`):
   out holds gelu(a @ w + bias) for a of `rows` x k, w of k x n (plain, row-major) and a
   bias of bias_n values (n, or 1). Where out is NaN, the sum is computed again here, and
   where that is +inf, out is +inf. One pass that finds no NaN is all it costs. */
DNNL_SUPPORT_API void dnnl_byoc_matmul_gelu_infinities(const float* a, const float* w, const float* bias,
                                                       int64_t bias_n, float* out, int64_t rows, int64_t k,
                                                       int64_t n);

/* matmul as numpy has it: a (..., M, K) of rank ra times b (..., K, N) of rank rb, the
   batch axes right-aligned and broadcast (oneDNN broadcasts an extent of 1), a 1-D a
   a row (1, K) and a 1-D b a column (K, 1); all of data type dt. The result's bytes
   are those of numpy's shape, which drops the axes a 1-D operand added. oneDNN has
   no matmul of an empty sum or an empty result: there *prim is NULL, and the
   kernel's call writes zeros. */
DNNL_SUPPORT_API int dnnl_byoc_matmul(dnnl_primitive_t* prim, dnnl_engine_t engine, int ra, const int64_t* a,
                                      int rb, const int64_t* b, dnnl_data_type_t dt);

/* softmax along `axis` of a tensor of `rank` extents of data type `dt`, shifted by
   the maximum (oneDNN computes it in float32 for the 16-bit types). */
DNNL_SUPPORT_API int dnnl_byoc_softmax(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank,
                                       const int64_t* extents, int axis, dnnl_data_type_t dt);

/* Inference batch_norm over axis 1 with the given mean and variance (global stats),
   scale and shift, then a relu when `relu`. */
DNNL_SUPPORT_API int dnnl_byoc_batch_norm(dnnl_primitive_t* prim, dnnl_engine_t engine, int rank,
                                          const int64_t* extents, double epsilon, int relu);

/* The teardown: the reusable part, then the primitive. */
DNNL_SUPPORT_API void dnnl_byoc_prim_free(dnnl_byoc_prim_t* p);

/* Runs p's primitive on the buffers ptrs[k] for its execution arguments kinds[k]
   (always the same kinds for one kernel): in p's reusable stream and memories when
   no other call holds them, else as dnnl_byoc_run_alone. Calls from several threads
   at once each run on what they alone write. 0 on success, 1 on a failure. */
DNNL_SUPPORT_API int dnnl_byoc_run(dnnl_byoc_prim_t* p, dnnl_engine_t engine, int n, const int* kinds,
                                   void* const* ptrs);

/* A matmul kernel's call: a by b (the plain weights, or the packed ones the init made)
   into out, of `bytes` bytes, which an empty sum or result (p's primitive NULL) leaves
   zero. 0 on success. */
DNNL_SUPPORT_API int dnnl_byoc_matmul_run(dnnl_byoc_prim_t* p, dnnl_engine_t engine, const void* a,
                                          const void* b, void* out, size_t bytes);

/* dense with K = 0, which has no products: out (B, U) is the bias b (U values of
   `size` bytes; NULL: zeros), then p's relu in place when it has one. 0 on success. */
DNNL_SUPPORT_API int dnnl_byoc_dense_empty(dnnl_byoc_prim_t* p, dnnl_engine_t engine, const void* b, void* out,
                                           int64_t batch, int64_t units, size_t size);

DNNL_SUPPORT_API void dnnl_byoc_packed_conv_free(dnnl_byoc_packed_conv_t* c);

/* Creates c: the conv2d of geometry g with a bias when `bias`, and
   the post-ops, its weights w packed (with the batch_norm `bn` folded in when not
   NULL, which gives it a bias), or, when w is NULL, reordered by each call from the
   plain weights it brings; `layouts` are those (DNNL_BYOC_LAYOUT_*) of the
   source, the result and a residual as the kernel gets them. On a failure it
   releases all it made. 0 on success.

   A conv that dnnl_byoc_winograd_fits runs as Winograd, between nhwc tensors.
   Otherwise the primitive is oneDNN's pick for any layouts, unless oneDNN runs the same
   implementation between the kernel's own layouts, or with the kernel's result
   layout (a network's first conv, of an nchw source: oneDNN picks nChw16c for its
   result, 16 times the source's bytes to reorder). A residual that is already in
   the result's layout is added by a binary post-op that reads it where it is,
   rather than by a sum post-op on a copy of it in the result, when oneDNN runs that
   with the same implementation too (Winograd's result transform always reads it
   where it is when it is nhwc). */
DNNL_SUPPORT_API int dnnl_byoc_packed_conv2d(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine,
                                             const dnnl_byoc_conv_geometry* g,
                                             int bias, int sum, int relu, const float* w, const float* const* bn,
                                             double epsilon, const int* layouts);

/* Runs c on x by w (plain; unused when c packed its own at init), plus `bias` when
   c holds no folded one (NULL: none), plus `residual` (NULL: none; of out_size
   elements): the reorders and the conv in one stream, in one scratch (c's kept one,
   or, when another call holds it, an allocation of the call's own; laid out by
   c->scratch) for the reordered source, result and weights, the scratchpads,
   Winograd's transforms and, when the conv reads the residual itself and a caller
   passed it as the output too, a copy of it. For a sum post-op the
   residual is put into the result first (reordered, or copied as it is when its
   layout is the primitive's). 0 on success, 1 on a failure. */
DNNL_SUPPORT_API int dnnl_byoc_run_packed(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* x,
                                          const float* w, const float* bias, const float* residual, float* out,
                                          int64_t out_size);

/* Runs c (made with a bias and weights per call) on x by w (wsize elements, m output
   channels) with the batch_norm `bn` (scale, shift, mean, variance) folded into the
   weights and the bias per call, since its parameters may be inputs (the _PACKED
   macros fold constant ones once, at init), plus `residual` (NULL: none). 0 on
   success, 1 on a failure. */
DNNL_SUPPORT_API int dnnl_byoc_run_folded(dnnl_byoc_packed_conv_t* c, dnnl_engine_t engine, const float* x,
                                          const float* w, int64_t wsize, int64_t m, const float* const* bn,
                                          double epsilon, const float* residual, float* out, int64_t out_size);

DNNL_SUPPORT_API void dnnl_byoc_q8_free(dnnl_byoc_q8_t* q);

/* Runs the int8 kernel q on x into out (both plain) with the source's and the
   result's scale (xs, ys) and zero point (xz, yz): the source reordered into the
   primitive's layout (by byoc's transpose where it is nhwc), the primitive, the
   result reordered back (likewise), in q's kept
   stream, scratch and memories (or, when another call holds them, ones of the
   call's own). 0 on success, 1 on a failure. */
DNNL_SUPPORT_API int dnnl_byoc_q8_run(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const void* x, const float* xs,
                                      int32_t xz, const float* ys, int32_t yz, void* out);

/* The init of an int8 kernel named `kernel` from its pattern's constants: a conv2d
   (`kind` DNNL_BYOC_Q8_CONV2D, of `geometry`; `bkn` NULL), a 2-D matmul or a dense
   (DNNL_BYOC_Q8_MATMUL, _DENSE; bkn = {B, K, N}; `geometry` NULL). dt = {x, w, y} are the data types of the source (and
   its zero point), the weights (and theirs) and the result; ws and bs the float32
   scales of the weights and the bias (NULL: no bias); w, wz, b and bz the weights,
   their zero point, the bias and its zero point (int32); n the element counts of {xs,
   xz, w, ws, wz, ys, yz, b, bs, bz}; ws_shape and wz_shape {rank, extents...}.
   oneDNN takes one scale and zero point for the source and the result, and
   weights w - wz in s8 (the weights' zero point is subtracted here: ONNX Runtime's
   symmetric int8 weights have 0): other constants make the init fail, saying why on
   stderr. The bias is dequantized as ONNX does, (float)b - (float)bz, times bs, in
   float32. 0 on success. */
DNNL_SUPPORT_API int dnnl_byoc_q8_create(dnnl_byoc_q8_t* q, dnnl_engine_t engine, const char* kernel, int kind,
                                         const dnnl_byoc_conv_geometry* geometry, const int64_t* bkn,
                                         const dnnl_data_type_t* dt, const float* ws, const void* w,
                                         const void* wz, const float* bs, const int32_t* b, const int32_t* bz,
                                         const int64_t* n, const int64_t* ws_shape, const int64_t* wz_shape, int relu);

/* The init of an attention kernel named `kernel` (dnnl_byoc_attention_t): shapes
   holds q's, k's and v's, then the bias's (NULL: no bias), each {rank, extents...};
   with `k_transposed`, k is (..., Sk, D) and the pattern's transpose of its last two
   axes is read in place, through strides; else k is kt, (..., D, Sk). q, kt and v have
   rank 2 to 4, the bias 0 to 4: all are right-aligned against the rank-4 result
   `out` (its 4 extents), and their batch axes broadcast as numpy's do. The scale c
   is c_size values, which must be 1: `scale` is dnnl_binary_div (scores / c) or
   dnnl_binary_mul (scores * c). The init refuses (saying why on stderr) an empty
   sum (D or Sk 0), a scale of several values, and shapes that do not make `out`.
   0 on success. */
DNNL_SUPPORT_API int dnnl_byoc_attention_create(dnnl_byoc_attention_t* a, dnnl_engine_t engine, const char* kernel,
                                                const int64_t* const* shapes, int k_transposed,
                                                dnnl_alg_kind_t scale, int64_t c_size, const int64_t* out);

/* Runs a (dnnl_byoc_attention_create's) on q, k (or kt), v, the scale c (one value)
   and the bias (NULL: none) into out: the copies a's plan makes, then its three
   primitives, in a's kept stream, scratch and memories (or, when another call holds
   them, ones of the call's own). 0 on success, 1 on a failure. */
DNNL_SUPPORT_API int dnnl_byoc_attention_run(dnnl_byoc_attention_t* a, dnnl_engine_t engine, const float* q,
                                             const float* k, const float* v, const float* c, const float* bias,
                                             float* out);

DNNL_SUPPORT_API void dnnl_byoc_attention_free(dnnl_byoc_attention_t* a);

#ifdef __cplusplus
}
#endif

#endif /* DNNL_SUPPORT_H */
