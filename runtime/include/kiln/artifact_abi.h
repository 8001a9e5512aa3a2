/* The contract between a compiled artifact and the runtime that loads it.
 *
 * An artifact is a shared object that exports the four symbols below; for a GPU target it is
 * a shared object for the host that also carries the kernels (see "Device artifacts"). It
 * needs nothing from the process that loads it except what KilnEnv hands it, so the same
 * generated code works in a phone app, a browser (wasm) or the kiln CLI. Tensors cross as
 * DLPack DLTensor structs, dense and row-major (strides NULL).
 */
#ifndef KILN_ARTIFACT_ABI_H_
#define KILN_ARTIFACT_ABI_H_

#include <stdint.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version 4 added the device services of KilnEnv; only device artifacts need them, so CPU
 * artifacts still say 3 and a version-4 runtime loads both. */
#define KILN_ABI_VERSION 4
#define KILN_ABI_VERSION_CPU 3

#define KILN_SHAPE_ERROR_INPUT 0
#define KILN_SHAPE_ERROR_OUTPUT 1
#define KILN_SHAPE_ERROR_BOUND 2
#define KILN_SHAPE_ERROR_VALUE 3
#define KILN_SHAPE_ERROR_NO_DATA 4
/* The `dim` of an index_error that reports a sequence length rather than an index. */
#define KILN_INDEX_SEQUENCE_LENGTH -2

/* The `kind` of KilnEnv.copy. */
#define KILN_COPY_HOST_TO_DEVICE 0
#define KILN_COPY_DEVICE_TO_HOST 1
#define KILN_COPY_DEVICE_TO_DEVICE 2

/* Services the runtime provides to generated code. */
typedef struct KilnEnv {
  void* self;
  /* Workspace memory, 64-byte aligned; NULL when it cannot be had. */
  void* (*alloc)(void* self, int64_t bytes);
  void (*free)(void* self, void* ptr);
  /* A dimension `dim` of input `index` (kind KILN_SHAPE_ERROR_INPUT) or output `index`
   * (KILN_SHAPE_ERROR_OUTPUT) is not what the model's shape constraints require, or an input
   * dimension exceeds the upper bound the artifact was compiled with (KILN_SHAPE_ERROR_BOUND;
   * `expected` is the bound). Shapes may also depend on the values of an input (a reshape
   * target given as an input): KILN_SHAPE_ERROR_VALUE says input `index` holds values that do
   * not fit (a size computed from them is `actual`, `expected` is required; dim is -1), and
   * KILN_SHAPE_ERROR_NO_DATA that input `index`'s data is NULL although its values decide
   * shapes. The runtime turns this into a message with the tensor's name. */
  void (*shape_error)(void* self, int32_t kind, int32_t index, int32_t dim, int64_t expected,
                      int64_t actual);
  /* Runs task(closure, begin, end) over disjoint ranges that together cover [0, num_tasks),
   * possibly at the same time on several threads, and returns when all have finished: 0, or
   * the nonzero result of a failed range. A call from inside a task runs its ranges serially
   * on that thread. With one thread (the default) it is task(closure, 0, num_tasks). */
  int32_t (*parallel_for)(void* self, int64_t num_tasks,
                          int32_t (*task)(void* closure, int64_t begin, int64_t end),
                          void* closure);
  /* A kernel of op `op` (e.g. "gather") read index `index` from a tensor at run time, and it
   * is out of range for dimension `dim` (of size `size`) of the tensor it indexes; dim is -1
   * for an index into the flattened tensor, KILN_INDEX_SEQUENCE_LENGTH for a sequence length
   * (valid in [0, size - 1]). `input` is the input the index came from, or -1
   * when the model computed it. The kernel stops without touching memory at that index; the
   * rest of the run goes on, so the entry point may still return 0: a call that reported an
   * index error has failed whatever it returns. (Added in ABI version 3.) */
  void (*index_error)(void* self, int32_t input, int32_t dim, int64_t index, int64_t size,
                      const char* op);

  /* ---- Device services (ABI version 4), used only by device artifacts; a runtime may leave
   * them NULL for others. Device pointers are opaque to host code: it offsets them and passes
   * them on. Each returns failure (NULL or nonzero) only after reporting why, so the host
   * function just returns nonzero. */
  /* Device memory, 256-byte aligned, distinct even for 0 bytes; NULL on failure. */
  void* (*device_alloc)(void* self, int64_t bytes);
  void (*device_free)(void* self, void* ptr);
  /* Copies `bytes` bytes; `kind` is KILN_COPY_*. A copy to the host waits for every launch
   * before it. */
  int32_t (*copy)(void* self, void* dst, const void* src, int64_t bytes, int32_t kind);
  /* The device copy of constant `index` (its `bytes` bytes at host address `data`), made on
   * first use and kept as long as the model is loaded. NULL on failure. */
  void* (*device_constant)(void* self, int32_t index, const void* data, int64_t bytes);
  /* Launches kernel `kernel` (its index in kiln_gpu_kernels) on `blocks` blocks (>= 1) of
   * `threads` threads each. args[i] points at the value of the kernel's i-th parameter: the
   * KilnEnv* (unused on a GPU), then its buffers (device pointers), then its scalars
   * (int64_t, int32_t, double, ... as the kernel declares them). Launches run in order. */
  int32_t (*launch)(void* self, int32_t kernel, int64_t blocks, int32_t threads, void** args);
} KilnEnv;

/* Entry points every artifact exports. Both functions return 0 on success and nonzero after
 * reporting the reason through env (a nonzero return with no report means a workspace
 * allocation failed); a run that reported an index_error has failed even if it returns 0. Ranks and
 * dtypes are checked by the runtime before the call, against kiln_signature(). */
typedef int32_t (*KilnAbiVersionFn)(void);
/* Text, one line per tensor after a header line:
 *   kiln-signature 1
 *   input <name> <dtype> <ndim> <dim>...
 *   output <name> <dtype> <ndim> <dim>...
 * dtype is f32, f64, i8..i64, u8..u64 or bool; a dim is an integer or a symbolic expression
 * without spaces ("batch", "seq+past", "n*2"). Names contain no whitespace. */
typedef const char* (*KilnSignatureFn)(void);
/* Reads inputs[i].shape and writes every outputs[i].shape. inputs[i].data may be NULL, except
 * for an input whose values decide shapes (a shape or slice bounds given as an input): its
 * data is read, and NULL data is reported (KILN_SHAPE_ERROR_NO_DATA). */
typedef int32_t (*KilnInferShapesFn)(KilnEnv* env, DLTensor* inputs, DLTensor* outputs);
/* Checks input and output shapes, then computes outputs[i].data from inputs[i].data. */
typedef int32_t (*KilnRunFn)(KilnEnv* env, DLTensor* inputs, DLTensor* outputs);

/* Optional: `int32_t kiln_default_threads(void)`, the thread count the artifact's target
 * description asked for (`threads=N`); the runtime starts a model with that many threads
 * instead of one. Older artifacts lack it, older runtimes ignore it. */
typedef int32_t (*KilnDefaultThreadsFn)(void);

/* Device artifacts (ABI version 4): kernels run on a device, host code (kiln_infer_shapes,
 * kiln_run) on the CPU that loads the artifact. They export, as functions of no arguments:
 *   const char* kiln_gpu_kernels(void): the kernels' names, one per line, in launch-index
 *     order;
 *   const char* kiln_gpu_error_ops(void): op names, one per line, indexed by the op id of the
 *     index-error record below;
 * and either
 *   const char* kiln_gpu_ptx(void): PTX text holding every kernel as an `.entry` of its name,
 *     and the index-error record, for the CUDA driver (the runtime loads libcuda.so.1 when it
 *     loads such an artifact); or
 *   const KilnEmulatedKernelFn* kiln_gpu_emulated_kernels(void): the same kernels compiled
 *     for this CPU, in launch-index order, for an emulated device (tests; `--schedule-as` a
 *     GPU target), then NULL. fn(args, block) runs block `block` (its threads one after another) with
 *     args as for KilnEnv.launch. Index errors go through KilnEnv.index_error, as on a CPU.
 * A GPU kernel cannot call the host; the first thread to read an index out of range writes
 * the device global `kiln_gpu_index_error`, int64_t[6] {claimed (0 or 1), input, dim, op id,
 * index, size}, and stops. The runtime zeroes it before kiln_run and reads it after, and
 * reports a claimed record as KilnEnv.index_error would. */
typedef void (*KilnEmulatedKernelFn)(void** args, int64_t block);
typedef const char* (*KilnGpuTextFn)(void);
typedef const KilnEmulatedKernelFn* (*KilnGpuEmulatedKernelsFn)(void);

#define KILN_SYMBOL_GPU_KERNELS "kiln_gpu_kernels"
#define KILN_SYMBOL_GPU_ERROR_OPS "kiln_gpu_error_ops"
#define KILN_SYMBOL_GPU_PTX "kiln_gpu_ptx"
#define KILN_SYMBOL_GPU_EMULATED_KERNELS "kiln_gpu_emulated_kernels"
#define KILN_GPU_INDEX_ERROR "kiln_gpu_index_error"

#define KILN_SYMBOL_DEFAULT_THREADS "kiln_default_threads"
#define KILN_SYMBOL_ABI_VERSION "kiln_abi_version"
#define KILN_SYMBOL_SIGNATURE "kiln_signature"
#define KILN_SYMBOL_INFER_SHAPES "kiln_infer_shapes"
#define KILN_SYMBOL_RUN "kiln_run"

#ifdef __cplusplus
}
#endif

#endif /* KILN_ARTIFACT_ABI_H_ */
