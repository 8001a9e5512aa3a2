// Legalization of the tensor family on models with a symbolic dim: every op becomes a
// kernel whose loops run over the symbolic extent. The numbers the kernels compute are
// checked by the conformance suite in compiled mode.
#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "tests/support/onnx_builder.h"

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

// Some loop of the kernel runs up to the symbolic dim `var`.
void ExpectSymbolicLoops(const std::string& kernel, const std::string& var = "n") {
  ASSERT_FALSE(kernel.empty());
  EXPECT_NE(kernel.find("range(0, " + var), std::string::npos) << kernel;
}

TEST(LegalizeTensorTest, UnsqueezeSqueeze) {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  b.Int64Initializer("axes", {1}, {1});
  b.Node("Unsqueeze", {"x", "axes"}, {"u"});
  b.Node("Squeeze", {"u", "axes"}, {"y"});
  b.Output("y", {"n", 3});
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "unsqueeze_0"));
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "squeeze_0"));
}

TEST(LegalizeTensorTest, ConcatSliceTile) {
  OnnxBuilder b;
  b.Input("x", {"n", 4});
  b.Input("z", {"n", 2});
  b.Int64Initializer("starts", {1}, {-1});
  b.Int64Initializer("ends", {1}, {-100});
  b.Int64Initializer("axes", {1}, {1});
  b.Int64Initializer("steps", {1}, {-2});
  b.Int64Initializer("reps", {2}, {2, 1});
  OnnxBuilder::IntAttr(b.Node("Concat", {"x", "z"}, {"c"}), "axis", 1);
  b.Node("Slice", {"c", "starts", "ends", "axes", "steps"}, {"s"});
  b.Node("Tile", {"s", "reps"}, {"y"});
  b.Output("y", {"2*n", 3});
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "concat_0"));
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "slice_0"));
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "tile_0"));
}

TEST(LegalizeTensorTest, GatherTriluPad) {
  OnnxBuilder b;
  b.Input("x", {"n", 5});
  b.Input("i", {"m"}, onnx::TensorProto::INT64);
  b.Int64Initializer("pads", {4}, {0, 1, 0, 2});
  OnnxBuilder::IntAttr(b.Node("Gather", {"x", "i"}, {"g"}), "axis", 0);
  b.Node("Trilu", {"g"}, {"t"});
  b.Node("Pad", {"t", "pads"}, {"y"});
  b.Output("y", {"m", 8});
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "gather_0"), "m");
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "trilu_0"), "m");
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "pad_0"), "m");
}

TEST(LegalizeTensorTest, ExpandGatherElements) {
  OnnxBuilder b;
  b.Input("x", {1, 3});
  b.Input("i", {"n", 3}, onnx::TensorProto::INT64);
  b.Node("Shape", {"i"}, {"s"});
  b.Node("Expand", {"x", "s"}, {"e"});
  OnnxBuilder::IntAttr(b.Node("GatherElements", {"e", "i"}, {"y"}), "axis", 0);
  b.Output("y", {"n", 3});
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "expand_0"));
  ExpectSymbolicLoops(LoweredKernel(b.Serialize(), "gather_elements_0"));
}

}  // namespace
}  // namespace kiln
