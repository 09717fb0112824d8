/* byoc_module.h: what byoc's generated C and C++ modules call besides their spec's code
   (shipped with byoc, generator/c/support/).

   Every generated module includes this header. The functions are defined in the C files
   beside it, each compiled once per backend, compiler and flags into a cached object that
   the module's library links (byoc_entry.c always; byoc_errors.c, byoc_workspace.c and
   byoc_pool.c when the module uses them). They are hidden: every library has its own copy
   and its own state (its workspace blocks, its thread pool), and exports none of them.
   `byoc gen` writes these files beside the module, so that the module builds by hand:
     cc -shared -fPIC -I<tvm_ffi include> ccompiler.c byoc_entry.c ... -ltvm_ffi

   The text is C99 and C++17; a C++ module (the engine kind's) sees C linkage. */
#ifndef BYOC_MODULE_H_
#define BYOC_MODULE_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <tvm/ffi/c_api.h>

#define BYOC_HIDDEN __attribute__((visibility("hidden")))

/* On each definition in byoc's C files: weak, so that the objects of several modules
   linked into one library (TVM's export_library links one object per backend) keep one
   copy of each function instead of clashing. Their text is the same byoc's. */
#define BYOC_WEAK __attribute__((weak))

#ifdef __cplusplus
extern "C" {
#endif

/* ---- byoc_entry.c: the argument checks of the exported entries ---- */

/* Raise a Python exception of type `kind` (TypeError, ValueError, ...) with `message`
   through TVM FFI; returns -1, the entry's failure. */
BYOC_HIDDEN int byoc_raise(const char* kind, const char* message);

/* Check argument `index` of function `fn` (its `role`: "input x", "output 0") against the
   expected DLPack dtype (`code`, `bits`; `dtype` names it), rank and shape: a tensor on the
   CPU, row-major contiguous, with data. On success store its DLTensor in *out and return
   0, else raise TypeError or ValueError and return -1. */
BYOC_HIDDEN int byoc_check_arg(const char* fn, const TVMFFIAny* args, int32_t index, const char* role,
                               uint8_t code, uint8_t bits, const char* dtype, int32_t ndim,
                               const int64_t* shape, DLTensor** out);

/* Whether an output shares memory with another argument: arguments first..n-1 are the
   outputs, argument k spans bytes[k] bytes from data[k] (empty ones share nothing). */
BYOC_HIDDEN int byoc_outputs_overlap(const void* const* data, const size_t* bytes, int first, int n);

/* ---- byoc_errors.c: what a failing kernel or init says ---- */

/* The calling thread's failure message: set by byoc_error, cleared by the wrapper before
   each call of a body whose kernels may fail. */
extern BYOC_HIDDEN __thread char byoc_error_message_[256];

/* Set the calling thread's failure message from a printf format; returns 1, a kernel's
   failure status:  return byoc_error("negative input %g at index %lld", x, (long long)k); */
BYOC_HIDDEN int byoc_error(const char* format, ...) __attribute__((format(printf, 1, 2)));

/* Raise RuntimeError: `what` failed (a kernel and its node, or an init), followed by
   "; it says: " and `message` unless it is empty. Returns -1, the entry's failure. */
BYOC_HIDDEN int byoc_raise_failure(const char* what, const char* message);

/* ---- byoc_workspace.c: the per-thread workspace of the bodies' intermediate buffers ---- */

/* The calling thread's block of at least `bytes` bytes, 64-byte aligned, kept between
   calls; NULL when it cannot be allocated. When the process has no thread-specific key
   left for this library, the block is the call's own: *spare holds it, and the caller
   frees it after the call (else *spare is left as it was: NULL). */
BYOC_HIDDEN char* byoc_workspace(size_t bytes, void** spare);

/* ---- byoc_pool.c: the thread pool of parallel loops ---- */

/* A parallel loop's body: runs iterations [begin, end) of the loop whose data is `args`. */
typedef void (*byoc_body_t)(void* args, int64_t begin, int64_t end);

/* Run body(args, begin, end) over [0, count) in chunks, on the library's helper threads
   and the calling thread; every iteration runs exactly once. */
BYOC_HIDDEN void byoc_parallel_for(byoc_body_t body, void* args, int64_t count);

#ifdef __cplusplus
}
#endif

#endif /* BYOC_MODULE_H_ */
