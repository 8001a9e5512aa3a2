// Legalization of image and scan operators on models with a symbolic batch dim: the
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

TEST(LegalizeImageTest, DepthToSpaceOverSymbolicBatch) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 8, 3, 3});
  auto& node = b.Node("DepthToSpace", {"x"}, {"y"});
  OnnxBuilder::IntAttr(node, "blocksize", 2);
  b.Output("y", {"n", 2, 6, 6});
  std::string kernel = CompiledKernel(b.Serialize(), "depth_to_space");
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
}

TEST(LegalizeImageTest, CumSumOverSymbolicRows) {
  OnnxBuilder b(14);
  b.Input("x", {"n", 5});
  b.Int64Initializer("axis", {}, {1});
  auto& node = b.Node("CumSum", {"x", "axis"}, {"y"});
  OnnxBuilder::IntAttr(node, "reverse", 1);
  b.Output("y", {"n", 5});
  std::string kernel = CompiledKernel(b.Serialize(), "cum_sum");
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("alloc acc"), std::string::npos) << kernel;
}

TEST(LegalizeImageTest, CumSumAlongSymbolicAxis) {
  OnnxBuilder b(14);
  b.Input("x", {"len", 3});
  b.Int64Initializer("axis", {}, {0});
  OnnxBuilder::IntAttr(b.Node("CumSum", {"x", "axis"}, {"y"}), "exclusive", 1);
  b.Output("y", {"len", 3});
  std::string kernel = CompiledKernel(b.Serialize(), "cum_sum");
  EXPECT_NE(kernel.find("range(0, len)"), std::string::npos) << kernel;
}

}  // namespace
}  // namespace kiln
