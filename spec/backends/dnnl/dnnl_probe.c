/* The dnnl spec's probe (dnnl.yaml, `probe:`): which 16-bit float types oneDNN computes on
   this CPU, and whether its int8 kernels compute exactly. byoc compiles it with the
   spec's compile settings and calls byoc_probe once per dtype a graph uses. */
#include <string.h>
#include <oneapi/dnnl/dnnl.h>

/* 1 when oneDNN's int8 convolutions and matmuls sum exactly on this CPU: with VNNI
   (AVX-512 VNNI, AVX-VNNI or newer), whose vpdpbusd adds four uint8-by-int8 products
   into an int32. Without it oneDNN multiplies with AVX2's vpmaddubsw, which adds each
   pair of products into a saturating int16, so a large sum is clipped (measured on an
   AMD EPYC with AVX2 only: a QDQ MLP's outputs off by up to 27 steps). */
static int int8_is_exact(void) {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni
      || (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni;
}

/* For int8 and uint8: int8_is_exact. For float16 and bfloat16: 1 when oneDNN creates
   an inference inner product (with a bias), a matmul, a relu and a softmax over small
   tensors of the dtype `dtype` names on this CPU. */
int byoc_probe(const char* dtype) {
  if (strcmp(dtype, "int8") == 0 || strcmp(dtype, "uint8") == 0) return int8_is_exact();
  const dnnl_data_type_t dt = strcmp(dtype, "float16") == 0 ? dnnl_f16
      : strcmp(dtype, "bfloat16") == 0 ? dnnl_bf16 : dnnl_data_type_undef;
  dnnl_engine_t engine = NULL;
  if (dt == dnnl_data_type_undef || dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) return 0;
  const dnnl_dims_t x = {4, 16}, w = {8, 16}, y = {4, 8}, b = {8}, wt = {16, 8};
  dnnl_memory_desc_t mds[5] = {NULL};
  int ok = dnnl_memory_desc_create_with_tag(&mds[0], 2, x, dt, dnnl_ab) == dnnl_success
      && dnnl_memory_desc_create_with_tag(&mds[1], 2, w, dt, dnnl_ab) == dnnl_success
      && dnnl_memory_desc_create_with_tag(&mds[2], 2, y, dt, dnnl_ab) == dnnl_success
      && dnnl_memory_desc_create_with_tag(&mds[3], 1, b, dt, dnnl_a) == dnnl_success
      && dnnl_memory_desc_create_with_tag(&mds[4], 2, wt, dt, dnnl_ab) == dnnl_success;
  dnnl_primitive_desc_t pds[4] = {NULL};
  ok = ok
      && dnnl_inner_product_forward_primitive_desc_create(&pds[0], engine, dnnl_forward_inference, mds[0], mds[1],
             mds[3], mds[2], NULL) == dnnl_success
      && dnnl_eltwise_forward_primitive_desc_create(&pds[1], engine, dnnl_forward_inference, dnnl_eltwise_relu,
             mds[0], mds[0], 0.0f, 0.0f, NULL) == dnnl_success
      && dnnl_softmax_forward_primitive_desc_create(&pds[2], engine, dnnl_forward_inference, dnnl_softmax_accurate,
             mds[0], mds[0], 1, NULL) == dnnl_success
      && dnnl_matmul_primitive_desc_create(&pds[3], engine, mds[0], mds[4], NULL, mds[2], NULL) == dnnl_success;
  for (int k = 0; k < 4; ++k)
    if (pds[k] != NULL) dnnl_primitive_desc_destroy(pds[k]);
  for (int k = 0; k < 5; ++k)
    if (mds[k] != NULL) dnnl_memory_desc_destroy(mds[k]);
  dnnl_engine_destroy(engine);
  return ok;
}
