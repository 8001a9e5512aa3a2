// Fusion end to end: a model with matmul+add+relu and conv+add+relu compiles to fewer kernels,
// and the artifact answers what the reference interpreter answers at two batch sizes.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/artifact.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;
using testing::Wave;

std::string DenseAndConvModel() {
  OnnxBuilder b(13);
  b.Input("x", {"n", 8});
  b.Input("img", {"n", 2, 5, 5});
  b.FloatInitializer("w", {8, 4}, Wave(32, 1.0f));
  b.FloatInitializer("bias", {4}, Wave(4, 0.5f));
  b.FloatInitializer("k", {3, 2, 3, 3}, Wave(54, 0.4f));
  b.FloatInitializer("kbias", {3, 1, 1}, Wave(3, 0.2f));
  b.Node("MatMul", {"x", "w"}, {"mm"});
  b.Node("Add", {"mm", "bias"}, {"dense"});
  b.Node("Relu", {"dense"}, {"y"});
  b.Node("Conv", {"img", "k"}, {"conv"});
  b.Node("Add", {"conv", "kbias"}, {"biased"});
  b.Node("Relu", {"biased"}, {"z"});
  b.Output("y", {"n", 4});
  b.Output("z", {"n", 3, 3, 3});
  return b.Serialize();
}

size_t NumKernelCalls(const ir::IRModule& m) {
  size_t n = 0;
  for (const auto& block : m.functions.at("main").blocks) {
    for (const auto& binding : block.bindings) n += binding.value->name == "call_tir";
  }
  return n;
}

TEST(FuseEndToEndTest, KernelCountGoesDown) {
  auto m = driver::ImportModel(DenseAndConvModel());
  ASSERT_TRUE(m.ok()) << m.status();
  auto legal = driver::RunPipeline(*m, nullptr, "legalize");
  ASSERT_TRUE(legal.ok()) << legal.status();
  auto fused = driver::RunPipeline(*m, nullptr, "fuse_ops");
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(NumKernelCalls(*legal), 6u);
  EXPECT_EQ(NumKernelCalls(*fused), 2u) << ir::ToString(*fused);
  EXPECT_EQ(fused->prim_funcs.size(), 2u);
  EXPECT_TRUE(fused->prim_funcs.count("fused_matmul_add_relu_0")) << ir::ToString(*fused);
  EXPECT_TRUE(fused->prim_funcs.count("fused_conv_add_relu_0")) << ir::ToString(*fused);
}

ir::NDArray Input(std::vector<int64_t> shape, float scale) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), shape);
  std::vector<float> v = Wave(a.num_elements(), scale);
  for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = v[i] - 0.1f;
  return a;
}

TEST(FuseEndToEndTest, CompiledMatchesTheReferenceAtTwoBatchSizes) {
  std::string model = DenseAndConvModel();
  auto module = driver::ImportModel(model);
  ASSERT_TRUE(module.ok()) << module.status();
  std::unique_ptr<runtime::Model> loaded = testing::CompileAndLoad(model);
  ASSERT_TRUE(loaded);

  for (int64_t n : {1, 5}) {
    std::vector<ir::NDArray> inputs = {Input({n, 8}, 1.5f), Input({n, 2, 5, 5}, 2.0f)};
    auto want = interp::Run(*module, inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(want->size(), 2u);
    std::vector<ir::NDArray> got = {ir::NDArray::Zeros(arith::DataType::Float(32), {n, 4}),
                                    ir::NDArray::Zeros(arith::DataType::Float(32), {n, 3, 3, 3})};
    std::vector<DLTensor> in = {testing::ViewOf(inputs[0]), testing::ViewOf(inputs[1])};
    std::vector<DLTensor> out = {testing::ViewOf(got[0]), testing::ViewOf(got[1])};
    std::string error;
    ASSERT_TRUE(loaded->Run(in, &out, &error)) << error;
    for (size_t o = 0; o < 2; ++o) {
      ASSERT_EQ(got[o].num_elements(), (*want)[o].num_elements());
      int positive = 0;
      for (int64_t i = 0; i < got[o].num_elements(); ++i) {
        float expected = (*want)[o].data<float>()[i];
        positive += expected > 0;
        EXPECT_NEAR(got[o].data<float>()[i], expected, 1e-4f + 1e-4f * std::fabs(expected))
            << "batch " << n << ", output " << o << ", element " << i;
      }
      if (n == 1) continue;
      // Relu must have clipped some elements and kept others, or the check would be weak.
      EXPECT_GT(positive, 0) << "output " << o;
      EXPECT_LT(positive, got[o].num_elements()) << "output " << o;
    }
  }
}

}  // namespace
}  // namespace kiln
