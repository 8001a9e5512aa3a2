// Legalization of image and scan operators on models with a symbolic batch dim: the
// pipeline compiles them, and the kernels loop over the symbolic extent. Numbers are checked
// by the conformance suite in compiled mode.
#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "tests/support/compiled_kernel.h"
#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

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

// ---- against the reference interpreter --------------------------------------------------

using arith::DataType;
using testing::ArrayOf;
using testing::ExpectCompiledMatchesReference;

std::vector<double> Ramp(int64_t count) {
  std::vector<double> v;
  for (int64_t i = 0; i < count; ++i) v.push_back((i * 7 % 11) - 3.5);
  return v;
}

TEST(LegalizeImageTest, CumSumWithAxisReadAtRunTime) {
  OnnxBuilder b(14);
  b.Input("x", {2, 3});
  b.Input("axis", {}, onnx::TensorProto::INT32);
  OnnxBuilder::IntAttr(b.Node("CumSum", {"x", "axis"}, {"y"}), "reverse", 1);
  b.Output("y", {2, 3});
  std::string model = b.Serialize();
  ir::NDArray x = ArrayOf(DataType::Float(), {2, 3}, {1, 2, 3, 4, 5, 6});
  auto rows = ExpectCompiledMatchesReference(model, {x, ArrayOf(DataType::Int(32), {}, {-1})});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].GetDouble(0), 6);  // 1 + 2 + 3
  auto columns = ExpectCompiledMatchesReference(model, {x, ArrayOf(DataType::Int(32), {}, {0})});
  ASSERT_EQ(columns.size(), 1u);
  EXPECT_EQ(columns[0].GetDouble(0), 5);  // 1 + 4
}

// Resize with constant scales, each mode and some coordinate transformations.
void ExpectResizeMatches(const std::string& mode, const std::string& transform,
                         const std::vector<float>& scales) {
  OnnxBuilder b(13);
  b.Input("x", {1, 2, 4, 5});
  b.FloatInitializer("scales", {4}, scales);
  auto& node = b.Node("Resize", {"x", "", "scales"}, {"y"});
  testing::OnnxBuilder::StringAttr(node, "mode", mode);
  testing::OnnxBuilder::StringAttr(node, "coordinate_transformation_mode", transform);
  b.Output("y", {1, 2, "h", "w"});
  SCOPED_TRACE(mode + " " + transform);
  ExpectCompiledMatchesReference(b.Serialize(),
                                 {ArrayOf(DataType::Float(), {1, 2, 4, 5}, Ramp(40))});
}

TEST(LegalizeImageTest, ResizeWithConstantScalesMatchesTheReference) {
  ExpectResizeMatches("linear", "half_pixel", {1, 1, 2, 0.6f});
  ExpectResizeMatches("cubic", "align_corners", {1, 1, 1.5f, 2});
  ExpectResizeMatches("nearest", "asymmetric", {1, 1, 0.5f, 3});
  ExpectResizeMatches("linear", "pytorch_half_pixel", {1, 1, 0.25f, 1});
}

}  // namespace
}  // namespace kiln
