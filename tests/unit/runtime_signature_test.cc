// The signature text format of kiln/artifact_abi.h and the dtype names.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/runtime.h"
#include "runtime/src/signature.h"

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;

TEST(SignatureTest, ParsesInputsAndOutputsInOrder) {
  Signature sig;
  ASSERT_EQ(ParseSignature("kiln-signature 1\n"
                           "input tokens i64 2 batch seq+past\n"
                           "output logits f32 3 batch seq+past 32000\n"
                           "input mask bool 0\n",
                           &sig),
            "");
  ASSERT_EQ(sig.inputs.size(), 2u);
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_EQ(sig.inputs[0].name, "tokens");
  EXPECT_THAT(sig.inputs[0].dims, ElementsAre("batch", "seq+past"));
  EXPECT_THAT(sig.inputs[0].static_dims, ElementsAre(-1, -1));
  EXPECT_EQ(sig.inputs[1].name, "mask");
  EXPECT_TRUE(sig.inputs[1].dims.empty());
  EXPECT_EQ(sig.inputs[1].dtype.code, KILN_DL_BOOL);
  EXPECT_THAT(sig.outputs[0].static_dims, ElementsAre(-1, -1, 32000));
}

TEST(SignatureTest, AnExpressionThatStartsWithDigitsIsSymbolic) {
  Signature sig;
  ASSERT_EQ(ParseSignature("kiln-signature 1\ninput x f32 2 2*n 784\n", &sig), "");
  EXPECT_THAT(sig.inputs[0].static_dims, ElementsAre(-1, 784));
}

TEST(SignatureTest, ErrorsNameTheLine) {
  Signature sig;
  EXPECT_EQ(ParseSignature("kiln-signature 2\n", &sig),
            "line 1: expected 'kiln-signature 1', got 'kiln-signature 2'");
  EXPECT_EQ(ParseSignature("kiln-signature 1\nparam x f32 0\n", &sig),
            "line 2: expected 'input' or 'output', got 'param'");
  EXPECT_EQ(ParseSignature("kiln-signature 1\ninput x f32 2 n\n", &sig),
            "line 2: tensor 'x' has rank 2 but 1 dims");
  EXPECT_EQ(ParseSignature("kiln-signature 1\ninput x f32 two n m\n", &sig),
            "line 2: bad rank 'two'");
  EXPECT_EQ(ParseSignature("kiln-signature 1\n\ninput x\n", &sig),
            "line 3: expected '<name> <dtype> <ndim>'");
  EXPECT_EQ(ParseSignature("", &sig), "line 1: expected 'kiln-signature 1', got ''");
}

TEST(DTypeTest, EveryNameRoundTrips) {
  for (const char* name :
       {"f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"}) {
    DLDataType dtype;
    ASSERT_EQ(kiln_dtype_parse(name, &dtype), 0) << name;
    EXPECT_STREQ(kiln_dtype_name(dtype), name);
    EXPECT_EQ(dtype.lanes, 1);
  }
}

TEST(DTypeTest, CodesAndBitsFollowDLPack) {
  DLDataType dtype;
  ASSERT_EQ(kiln_dtype_parse("u16", &dtype), 0);
  EXPECT_EQ(dtype.code, kDLUInt);
  EXPECT_EQ(dtype.bits, 16);
  ASSERT_EQ(kiln_dtype_parse("bool", &dtype), 0);
  EXPECT_EQ(dtype.code, 6);
  EXPECT_EQ(dtype.bits, 8);
  ASSERT_EQ(kiln_dtype_parse("f16", &dtype), 0);
  EXPECT_EQ(dtype.code, kDLFloat);
  EXPECT_EQ(dtype.bits, 16);
  EXPECT_STREQ(kiln_dtype_name(DLDataType{kDLFloat, 16, 1}), "f16");
}

TEST(DTypeTest, UnknownNamesAndDTypes) {
  DLDataType dtype;
  EXPECT_NE(kiln_dtype_parse("bf16", &dtype), 0);
  EXPECT_NE(kiln_dtype_parse(nullptr, &dtype), 0);
  EXPECT_EQ(kiln_dtype_name(DLDataType{kDLFloat, 32, 4}), nullptr);
  EXPECT_EQ(kiln_dtype_name(DLDataType{kDLBfloat, 16, 1}), nullptr);
}

}  // namespace
}  // namespace kiln::runtime
