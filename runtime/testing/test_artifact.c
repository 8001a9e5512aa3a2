/* A hand-written artifact for the runtime's tests, standing in for generated code:
 *   y[i][j] = 2 * x[i][j] + bias[i]   with x: f32[n, 3], bias: f32[n], y: f32[n, 3].
 * runtime/CMakeLists.txt builds it several times, each variant breaking one thing. */
#include <stdint.h>
#include <string.h>

#include "kiln/artifact_abi.h"

#ifndef TEST_ABI_VERSION
#define TEST_ABI_VERSION KILN_ABI_VERSION_CPU
#endif

int32_t kiln_abi_version(void) { return TEST_ABI_VERSION; }

const char* kiln_signature(void) {
#ifdef TEST_BAD_SIGNATURE
  return "kiln-signature 1\ninput x bf16 2 n 3\noutput y f32 2 n 3\n";
#else
  return "kiln-signature 1\n"
         "input x f32 2 n 3\n"
         "input bias f32 1 n\n"
         "output y f32 2 n 3\n";
#endif
}

/* Binds n from x and checks bias against it, as generated host code does. */
static int32_t check_inputs(KilnEnv* env, const DLTensor* inputs) {
  int64_t n = inputs[0].shape[0];
  if (inputs[1].shape[0] != n) {
    env->shape_error(env->self, 0, 1, 0, n, inputs[1].shape[0]);
    return 1;
  }
  return 0;
}

int32_t kiln_infer_shapes(KilnEnv* env, DLTensor* inputs, DLTensor* outputs) {
  if (check_inputs(env, inputs) != 0) return 1;
  outputs[0].shape[0] = inputs[0].shape[0];
  outputs[0].shape[1] = 3;
  return 0;
}

#ifndef TEST_OMIT_RUN
struct RowsClosure {
  const float* x;
  const float* bias;
  float* work;
};

/* Rows [begin, end) of the result, as a parallel loop of generated code would run them. */
static int32_t compute_rows(void* closure, int64_t begin, int64_t end) {
  const struct RowsClosure* c = (const struct RowsClosure*)closure;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t j = 0; j < 3; ++j) c->work[i * 3 + j] = 2 * c->x[i * 3 + j] + c->bias[i];
  }
  return 0;
}

int32_t kiln_run(KilnEnv* env, DLTensor* inputs, DLTensor* outputs) {
  if (check_inputs(env, inputs) != 0) return 1;
  int64_t n = inputs[0].shape[0];
  if (outputs[0].shape[0] != n) {
    env->shape_error(env->self, 1, 0, 0, n, outputs[0].shape[0]);
    return 1;
  }
  /* Two sizes provoke failures the tests cannot otherwise reach: n = 13 asks for a workspace
   * size gone wrong, n = 14 fails without any report. */
  if (n == 14) return 1;
  int64_t bytes = n == 13 ? -1 : n * 3 * (int64_t)sizeof(float);
  /* The result goes through workspace memory so that alloc and free are exercised. */
  float* work = (float*)env->alloc(env->self, bytes);
  if (work == NULL) return 1;
  struct RowsClosure rows = {(const float*)inputs[0].data, (const float*)inputs[1].data, work};
  if (env->parallel_for(env->self, n, compute_rows, &rows) != 0) return 1;
  memcpy(outputs[0].data, work, (size_t)bytes);
  env->free(env->self, work);
  return 0;
}
#endif
