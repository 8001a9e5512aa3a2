// Legalization of the elementwise family on models with a symbolic dim: every op becomes a
// kernel whose loops run over the symbolic extent. The numbers the kernels compute are
// checked by the conformance suite in compiled mode.
#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

// Runs the whole pipeline and returns the printed kernel `name` as legalize made it (fusion
// may merge it with its neighbours later), or "" when missing.
std::string LoweredKernel(const std::string& model, const std::string& name) {
  auto m = driver::ImportModel(model);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  std::string kernel;
  auto keep_legalized = [&](const std::string& pass, const ir::IRModule& after) {
    auto it = after.prim_funcs.find(name);
    if (pass == "legalize" && it != after.prim_funcs.end()) kernel = ir::ToString(it->second);
  };
  auto lowered = driver::RunPipeline(*std::move(m), keep_legalized);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  return lowered.ok() ? kernel : "";
}

void ExpectSymbolicLoops(const std::string& kernel) {
  ASSERT_FALSE(kernel.empty());
  EXPECT_NE(kernel.find("for"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("n"), std::string::npos) << kernel;
}

TEST(LegalizeElementwiseTest, CastBothWays) {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  OnnxBuilder::IntAttr(b.Node("Cast", {"x"}, {"i"}), "to", onnx::TensorProto::INT32);
  OnnxBuilder::IntAttr(b.Node("Cast", {"i"}, {"y"}), "to", onnx::TensorProto::DOUBLE);
  b.Output("y", {"n", 3}, onnx::TensorProto::DOUBLE);
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "cast_0"));
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "cast_1"));
}

// Clip's omitted max is a none argument: the kernel gets x and min only.
TEST(LegalizeElementwiseTest, ClipWithOnlyMin) {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  b.FloatInitializer("lo", {}, {0.5f});
  b.Node("Clip", {"x", "lo"}, {"y"});
  b.Output("y", {"n", 3});
  std::string kernel = LoweredKernel(b.Serialize(), "clip_0");
  ExpectSymbolicLoops(kernel);
  EXPECT_NE(kernel.find("select"), std::string::npos) << kernel;
}

TEST(LegalizeElementwiseTest, Activations) {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  OnnxBuilder::FloatAttr(b.Node("LeakyRelu", {"x"}, {"a"}), "alpha", 0.1f);
  b.Node("Elu", {"a"}, {"e"});
  b.Node("HardSwish", {"e"}, {"h"});
  b.Node("Softplus", {"h"}, {"y"});
  b.Output("y", {"n", 3});
  for (const char* name : {"leaky_relu_0", "elu_0", "hard_swish_0", "softplus_0"}) {
    ExpectSymbolicLoops(LoweredKernel(b.Serialize(), name));
  }
}

TEST(LegalizeElementwiseTest, IntegerModShiftPow) {
  OnnxBuilder b;
  b.Input("a", {"n"}, onnx::TensorProto::INT32);
  b.Input("b", {"n"}, onnx::TensorProto::INT32);
  b.Input("u", {"n"}, onnx::TensorProto::UINT8);
  OnnxBuilder::IntAttr(b.Node("Mod", {"a", "b"}, {"m"}), "fmod", 1);
  b.Node("Pow", {"m", "b"}, {"p"});
  auto& shift = b.Node("BitShift", {"u", "u"}, {"s"});
  auto* direction = shift.add_attribute();
  direction->set_name("direction");
  direction->set_type(onnx::AttributeProto::STRING);
  direction->set_s("LEFT");
  b.Output("p", {"n"}, onnx::TensorProto::INT32);
  b.Output("s", {"n"}, onnx::TensorProto::UINT8);
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "mod_0"));
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "pow_0"));
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "bit_shift_0"));
}

TEST(LegalizeElementwiseTest, RoundSignPredicates) {
  OnnxBuilder b;
  b.Input("x", {"n"});
  b.Node("Round", {"x"}, {"r"});
  b.Node("Sign", {"r"}, {"s"});
  b.Node("IsNaN", {"s"}, {"y"});
  b.Node("IsInf", {"x"}, {"z"});
  b.Output("y", {"n"}, onnx::TensorProto::BOOL);
  b.Output("z", {"n"}, onnx::TensorProto::BOOL);
  for (const char* name : {"round_0", "sign_0", "is_nan_0", "is_inf_0"}) {
    ExpectSymbolicLoops(LoweredKernel(b.Serialize(), name));
  }
}

// An integer base with a float exponent truncates the double result: a whole power must
// come out exact, not a hair below (9^3 = 729, not 728).
TEST(LegalizeElementwiseTest, PowOfIntegerBaseAndWholeFloatExponentIsExact) {
  OnnxBuilder b(15);
  b.Input("x", {"n"}, onnx::TensorProto::INT64);
  b.Input("y", {"n"});
  b.Node("Pow", {"x", "y"}, {"z"});
  b.Output("z", {"n"}, onnx::TensorProto::INT64);
  auto want = testing::ExpectCompiledMatchesReference(
      b.Serialize(), {testing::ArrayOf(arith::DataType::Int(), {4}, {9, 3, 5, 7}),
                      testing::ArrayOf(arith::DataType::Float(), {4}, {3, 2.5, 20, 0})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(0), 729);
  EXPECT_EQ(want[0].GetDouble(1), 15);
  EXPECT_EQ(want[0].GetDouble(2), 95367431640625.0);
}

}  // namespace
}  // namespace kiln
