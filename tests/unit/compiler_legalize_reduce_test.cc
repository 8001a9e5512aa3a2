// Legalization of reductions and normalizations on models with a symbolic batch dim: the
// pipeline compiles them, and the kernels loop over the symbolic extent. Numbers are checked
// by the conformance suite in compiled mode.
#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "tests/support/compiled_kernel.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

using testing::CompiledKernel;

TEST(LegalizeReduceTest, ReduceMeanOverSymbolicRows) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 8});
  auto& node = b.Node("ReduceMean", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(node, "axes", {0});
  OnnxBuilder::IntAttr(node, "keepdims", 0);
  b.Output("y", {8});
  std::string kernel = CompiledKernel(b.Serialize(), "reduce_mean");
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("alloc acc"), std::string::npos) << kernel;
}

TEST(LegalizeReduceTest, ReduceMaxWithConstantAxesOperand) {
  OnnxBuilder b(18);
  b.Input("x", {"n", 4, 5});
  b.Int64Initializer("axes", {1}, {-1});
  b.Node("ReduceMax", {"x", "axes"}, {"y"});
  b.Output("y", {"n", 4, 1});
  std::string kernel = CompiledKernel(b.Serialize(), "reduce_max");
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
}

TEST(LegalizeReduceTest, LogSoftmaxAndLayerNorm) {
  OnnxBuilder b(17);
  b.Input("x", {"batch", 16});
  b.FloatInitializer("scale", {16}, std::vector<float>(16, 1.0f));
  b.FloatInitializer("bias", {16}, std::vector<float>(16, 0.0f));
  b.Node("LayerNormalization", {"x", "scale", "bias"}, {"h"});
  b.Node("LogSoftmax", {"h"}, {"y"});
  b.Output("y", {"batch", 16});
  std::string onnx = b.Serialize();
  EXPECT_NE(CompiledKernel(onnx, "layer_normalization").find("range(0, batch)"), std::string::npos);
  EXPECT_NE(CompiledKernel(onnx, "log_softmax").find("range(0, batch)"), std::string::npos);
}

TEST(LegalizeReduceTest, ArgMaxHasI64Output) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 7});
  OnnxBuilder::IntAttr(b.Node("ArgMax", {"x"}, {"y"}), "axis", 1);
  b.Output("y", {"n", 1}, onnx::TensorProto::INT64);
  std::string kernel = CompiledKernel(b.Serialize(), "arg_max");
  EXPECT_NE(kernel.find("i64"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
}

}  // namespace
}  // namespace kiln
