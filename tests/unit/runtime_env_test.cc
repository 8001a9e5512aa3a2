// The KilnEnv the runtime gives artifacts: aligned workspace, and shape-error messages.
#include <cstdint>

#include "gtest/gtest.h"
#include "runtime/src/call_env.h"

namespace kiln::runtime {
namespace {

Signature TestSignature() {
  Signature sig;
  ParseSignature("kiln-signature 1\ninput x f32 2 batch 784\noutput y f32 1 batch\n", &sig);
  return sig;
}

TEST(CallEnvTest, AllocationsAre64ByteAlignedAndDistinct) {
  Signature sig = TestSignature();
  CallEnv call(sig);
  KilnEnv* env = call.env();
  for (int64_t bytes : {0, 1, 63, 64, 65, 1000}) {
    void* a = env->alloc(env->self, bytes);
    void* b = env->alloc(env->self, bytes);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_NE(a, b);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u) << bytes;
    env->free(env->self, a);
    // b is left for the destructor: artifacts that stop early leak nothing.
  }
  env->free(env->self, nullptr);
  int local = 0;
  env->free(env->self, &local);  // not from this env: ignored, not passed to free()
}

TEST(CallEnvTest, ImpossibleAllocationsAreReported) {
  Signature sig = TestSignature();
  CallEnv call(sig);
  EXPECT_EQ(call.env()->alloc(call.env()->self, -5), nullptr);
  EXPECT_EQ(call.FailureMessage(), "workspace allocation of -5 bytes failed");
  CallEnv huge(sig);
  EXPECT_EQ(huge.env()->alloc(huge.env()->self, INT64_MAX), nullptr);
  EXPECT_EQ(huge.FailureMessage(),
            "workspace allocation of " + std::to_string(INT64_MAX) + " bytes failed");
}

TEST(CallEnvTest, SilentFailureMeansAllocation) {
  Signature sig = TestSignature();
  CallEnv call(sig);
  EXPECT_EQ(call.FailureMessage(), "workspace allocation failed");
}

TEST(CallEnvTest, ShapeErrorsUseSignatureNames) {
  Signature sig = TestSignature();
  CallEnv symbolic(sig);
  symbolic.env()->shape_error(symbolic.env()->self, 1, 0, 0, 7, 8);
  EXPECT_EQ(symbolic.FailureMessage(), "output 'y' dimension 0 (batch): expected 7, got 8");
  CallEnv fixed(sig);
  fixed.env()->shape_error(fixed.env()->self, 0, 0, 1, 784, 100);
  EXPECT_EQ(fixed.FailureMessage(), "input 'x' dimension 1: expected 784, got 100");
}

TEST(CallEnvTest, FirstReportWins) {
  Signature sig = TestSignature();
  CallEnv call(sig);
  call.env()->shape_error(call.env()->self, 0, 0, 1, 784, 100);
  call.env()->shape_error(call.env()->self, 1, 0, 0, 7, 8);
  EXPECT_EQ(call.FailureMessage(), "input 'x' dimension 1: expected 784, got 100");
}

TEST(CallEnvTest, IndexOutsideTheSignatureStillGetsAMessage) {
  Signature sig = TestSignature();
  CallEnv call(sig);
  call.env()->shape_error(call.env()->self, 0, 5, 2, 1, 2);
  EXPECT_EQ(call.FailureMessage(), "input #5 dimension 2: expected 1, got 2");
}

}  // namespace
}  // namespace kiln::runtime
