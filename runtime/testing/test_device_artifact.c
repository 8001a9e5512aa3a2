/* A hand-written device artifact (ABI version 4) for the runtime's tests, standing in for
 * generated code that runs its kernels on a GPU:
 *   y[i] = scale * x[i] + c[k]   with x: f32[n], k: i64[1], y: f32[n], scale = 2,
 * c = {0.5, 1, 2, 4} a constant of the model. The host code copies x and k to the device, runs
 * the one kernel over blocks of 4 threads and copies y back; k outside [0, 4) is an index error
 * of the kernel. runtime/CMakeLists.txt builds it several times: with emulated kernels, with
 * PTX for the CUDA driver (the tests' fake one), and variants that each break one thing. */
#include <stdint.h>

#include "kiln/artifact_abi.h"

#define THREADS 4

int32_t kiln_abi_version(void) { return KILN_ABI_VERSION; }

const char* kiln_signature(void) {
  return "kiln-signature 1\n"
         "input x f32 1 n\n"
         "input k i64 1 1\n"
         "output y f32 1 n\n";
}

int32_t kiln_infer_shapes(KilnEnv* env, DLTensor* inputs, DLTensor* outputs) {
  (void)env;
  outputs[0].shape[0] = inputs[0].shape[0];
  return 0;
}

#if (defined(TEST_EMULATED) && !defined(TEST_BAD_KERNEL_COUNT)) || defined(TEST_PTX)
/* Parameters: env, x, y, c, k (device pointers), n (int64_t), scale (int32_t). */
static void scale_add(void** args, int64_t block) {
  KilnEnv* env = *(KilnEnv**)args[0];
  const float* x = *(const float**)args[1];
  float* y = *(float**)args[2];
  const float* c = *(const float**)args[3];
  const int64_t* k = *(const int64_t**)args[4];
  int64_t n = *(int64_t*)args[5];
  int32_t scale = *(int32_t*)args[6];
  for (int64_t thread = 0; thread < THREADS; ++thread) {
    int64_t i = block * THREADS + thread;
    if (i >= n) return;
    if (k[0] < 0 || k[0] >= 4) {
      env->index_error(env->self, 1, 0, k[0], 4, "gather");
      return;
    }
    y[i] = (float)scale * x[i] + c[k[0]];
  }
}
#endif

const char* kiln_gpu_kernels(void) { return "scale_add\n"; }

#ifndef TEST_OMIT_ERROR_OPS
const char* kiln_gpu_error_ops(void) { return "gather\n"; }
#endif

#ifdef TEST_EMULATED
const KilnEmulatedKernelFn* kiln_gpu_emulated_kernels(void) {
#ifdef TEST_BAD_KERNEL_COUNT
  /* One kernel short of the names: the NULL ends the array early. */
  static const KilnEmulatedKernelFn kernels[] = {NULL};
#else
  static const KilnEmulatedKernelFn kernels[] = {scale_add, NULL};
#endif
  return kernels;
}
#endif

#ifdef TEST_PTX
const char* kiln_gpu_ptx(void) {
#ifdef TEST_BAD_PTX
  return "this is not PTX\n";
#endif
  return ".version 7.8\n"
         ".target sm_80\n"
         ".address_size 64\n"
         ".visible .global .align 8 .b64 kiln_gpu_index_error[6];\n"
#ifdef TEST_MISSING_KERNEL
         ".visible .entry other_kernel()\n"
         "{\n  ret;\n}\n";
#else
         ".visible .entry scale_add(\n"
         "  .param .u64 scale_add_param_0,\n"
         "  .param .u64 scale_add_param_1,\n"
         "  .param .u64 scale_add_param_2,\n"
         "  .param .u64 scale_add_param_3,\n"
         "  .param .u64 scale_add_param_4,\n"
         "  .param .u64 scale_add_param_5,\n"
         "  .param .u32 scale_add_param_6\n"
         ")\n"
         "{\n  ret;\n}\n";
#endif
}

/* Not part of the ABI: the kernel for the CPU, so that the tests' fake CUDA driver can run
 * it and the PTX variant computes real results. */
void test_device_scale_add(void** args, int64_t block) { scale_add(args, block); }
#endif

static const float kConstant[4] = {0.5f, 1.0f, 2.0f, 4.0f};

/* Frees what is not NULL, as generated code does on every path out. */
static void free_all(KilnEnv* env, void** ptrs, int count) {
  for (int i = 0; i < count; ++i) {
    if (ptrs[i] != NULL) env->device_free(env->self, ptrs[i]);
  }
}

int32_t kiln_run(KilnEnv* env, DLTensor* inputs, DLTensor* outputs) {
  int64_t n = inputs[0].shape[0];
  if (outputs[0].shape[0] != n) {
    env->shape_error(env->self, KILN_SHAPE_ERROR_OUTPUT, 0, 0, n, outputs[0].shape[0]);
    return 1;
  }
  int64_t bytes = n * (int64_t)sizeof(float);
  void* buffers[3] = {env->device_alloc(env->self, bytes),
                      env->device_alloc(env->self, (int64_t)sizeof(int64_t)),
                      env->device_alloc(env->self, bytes)};
  void* x = buffers[0];
  void* k = buffers[1];
  void* y = buffers[2];
  void* c = env->device_constant(env->self, 0, kConstant, (int64_t)sizeof kConstant);
  int32_t failed = x == NULL || k == NULL || y == NULL || c == NULL;
  if (!failed) {
    failed =
        env->copy(env->self, x, inputs[0].data, bytes, KILN_COPY_HOST_TO_DEVICE) ||
        env->copy(env->self, k, inputs[1].data, (int64_t)sizeof(int64_t), KILN_COPY_HOST_TO_DEVICE);
  }
  if (!failed && n > 0) {
    int32_t scale = 2;
    void* args[] = {&env, &x, &y, &c, &k, &n, &scale};
    failed = env->launch(env->self, 0, (n + THREADS - 1) / THREADS, THREADS, args);
  }
  if (!failed) failed = env->copy(env->self, outputs[0].data, y, bytes, KILN_COPY_DEVICE_TO_HOST);
  free_all(env, buffers, 3);
  return failed;
}
