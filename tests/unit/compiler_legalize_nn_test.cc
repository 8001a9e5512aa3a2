// Legalization of convolution and pooling on models with a symbolic batch dim: the pipeline
// compiles them, and the kernels loop over the symbolic extent. Numbers are checked by the
// conformance suite in compiled mode.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "tests/support/compiled_kernel.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

using testing::CompiledKernel;

TEST(LegalizeNNTest, ConvWithBiasOverSymbolicBatch) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 2, 5, 5});
  b.FloatInitializer("w", {4, 1, 3, 3}, std::vector<float>(36, 0.5f));
  b.FloatInitializer("bias", {4}, std::vector<float>(4, 1.0f));
  auto& node = b.Node("Conv", {"x", "w", "bias"}, {"y"});
  OnnxBuilder::IntAttr(node, "group", 2);
  OnnxBuilder::IntsAttr(node, "pads", {1, 1, 1, 1});
  OnnxBuilder::IntsAttr(node, "strides", {2, 2});
  b.Output("y", {"n", 4, 3, 3});
  std::string kernel = CompiledKernel(b.Serialize(), "conv");
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("alloc acc"), std::string::npos) << kernel;
}

TEST(LegalizeNNTest, MaxPoolOverSymbolicBatch) {
  OnnxBuilder b(13);
  b.Input("x", {"batch", 3, 8, 8});
  auto& node = b.Node("MaxPool", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(node, "kernel_shape", {2, 2});
  OnnxBuilder::IntsAttr(node, "strides", {2, 2});
  b.Output("y", {"batch", 3, 4, 4});
  std::string kernel = CompiledKernel(b.Serialize(), "max_pool");
  EXPECT_NE(kernel.find("range(0, batch)"), std::string::npos) << kernel;
}

TEST(LegalizeNNTest, GlobalAveragePoolOverSymbolicBatch) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 3, 4, 4});
  b.Node("GlobalAveragePool", {"x"}, {"y"});
  b.Output("y", {"n", 3, 1, 1});
  std::string kernel = CompiledKernel(b.Serialize(), "global_average_pool");
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
}

}  // namespace
}  // namespace kiln
