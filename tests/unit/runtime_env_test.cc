// The KilnEnv the runtime gives artifacts: aligned workspace, and shape- and index-error
// messages.
#include <cstdint>

#include "gtest/gtest.h"
#include "runtime/src/call_env.h"

namespace kiln::runtime {
namespace {

Signature TestSignature() {
  Signature sig;
  ParseSignature(
      "kiln-signature 1\ninput x f32 2 batch 784\ninput indices i64 1 4\noutput y f32 1 batch\n",
      &sig);
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

// A constraint that no single input's values break (index -1): no input is named.
TEST(CallEnvTest, ValueConstraintWithoutAnInputSaysSo) {
  Signature sig = TestSignature();
  CallEnv call(sig);
  call.env()->shape_error(call.env()->self, KILN_SHAPE_ERROR_VALUE, -1, -1, 3, 2);
  EXPECT_EQ(call.FailureMessage(),
            "the inputs do not meet the model's shape constraints: a size computed from them "
            "is 2, expected 3");
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

TEST(CallEnvTest, IndexErrorsNameTheInputAndTheIndexedDimension) {
  Signature sig = TestSignature();
  CallEnv call(sig);
  EXPECT_FALSE(call.HasReport());
  call.env()->index_error(call.env()->self, 1, 0, 7, 5, "gather");
  EXPECT_TRUE(call.HasReport());
  EXPECT_EQ(
      call.FailureMessage(),
      "input 'indices' holds index 7, out of range for dimension 0 of size 5 (gather axis 0)");
  // Later reports (other elements, other threads) keep the first.
  call.env()->index_error(call.env()->self, 1, 0, -9, 5, "gather");
  EXPECT_EQ(
      call.FailureMessage(),
      "input 'indices' holds index 7, out of range for dimension 0 of size 5 (gather axis 0)");
}

TEST(CallEnvTest, IndexErrorsOfComputedAndFlatIndices) {
  Signature sig = TestSignature();
  CallEnv computed(sig);
  computed.env()->index_error(computed.env()->self, -1, 1, -6, 5, "gather_elements");
  EXPECT_EQ(computed.FailureMessage(),
            "op gather_elements: index -6 (computed by the model) out of range for dimension 1 "
            "of size 5");
  CallEnv flat(sig);
  flat.env()->index_error(flat.env()->self, 1, -1, 16, 16, "max_unpool");
  EXPECT_EQ(flat.FailureMessage(),
            "input 'indices' holds index 16, out of range for size 16 (max_unpool)");
  CallEnv unknown(sig);
  unknown.env()->index_error(unknown.env()->self, 9, 0, 3, 2, "gather");
  EXPECT_EQ(unknown.FailureMessage(),
            "op gather: index 3 (computed by the model) out of range for dimension 0 of size 2");
}

}  // namespace
}  // namespace kiln::runtime
