// Output shapes decided by input values beyond reshape targets: slice axes and steps, split
// sizes, reduction axes, resize scales (floats), a one-hot depth and a window size read at
// run time. The importer binds the values to symbolic variables (match_cast of
// tensor_to_shape); compiled host code reads them, checks ONNX's constraints and reports the
// input that breaks one. Compiled shapes and values are compared with the reference
// interpreter at values the conformance suite does not use; bad values must give an error
// naming the input, in compiled code and in the interpreter alike.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tests/support/import_and_run.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers
using testing::ExpectSameAsReference;

// The model compiled once and imported once.
struct Compiled : testing::CompiledModel {
  explicit Compiled(const OnnxBuilder& b) : CompiledModel(b.Serialize()) {}
};

ir::NDArray F32Range(std::vector<int64_t> shape) {
  ir::NDArray a = Iota(std::move(shape));
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = 0.5f * i - 3.0f;
  return a;
}

OnnxBuilder SliceModel() {
  OnnxBuilder b;
  b.Input("x", {4, 5, 6});
  for (const char* name : {"starts", "ends", "axes", "steps"}) {
    b.Input(name, {2}, onnx::TensorProto::INT64);
  }
  b.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  b.Output("y", {"a", "b", "c"});
  return b;
}

TEST(RuntimeShapeValuesTest, SliceWithAxesAndStepsInputsMatchesTheInterpreter) {
  Compiled c(SliceModel());
  ASSERT_TRUE(c.model);
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps, want;
  } cases[] = {
      {{5, -1}, {-100, 0}, {2, -3}, {-2, -1}, {3, 5, 3}},  // negative steps and axes
      {{1, 0}, {4, INT64_MAX}, {1, 0}, {2, 3}, {2, 2, 6}},
      {{3, 2}, {1, 2}, {0, 1}, {1, 1}, {0, 0, 6}},  // empty: ends before starts
      {{INT64_MIN, 9}, {INT64_MAX, -9}, {-1, 1}, {5, -2}, {4, 3, 2}},
  };
  for (const Case& k : cases) {
    auto want = ExpectSameAsReference(*c.model, c.module,
                                      {F32Range({4, 5, 6}), I64({2}, k.starts), I64({2}, k.ends),
                                       I64({2}, k.axes), I64({2}, k.steps)});
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, k.want);
  }
}

TEST(RuntimeShapeValuesTest, SliceRejectsBadAxesAndSteps) {
  Compiled c(SliceModel());
  ASSERT_TRUE(c.model);
  auto inputs = [](std::vector<int64_t> axes, std::vector<int64_t> steps) {
    return std::vector<ir::NDArray>{F32Range({4, 5, 6}), I64({2}, {0, 0}), I64({2}, {2, 2}),
                                    I64({2}, axes), I64({2}, steps)};
  };
  c.ExpectRejected(inputs({0, 3}, {1, 1}), "axes");   // out of range
  c.ExpectRejected(inputs({-4, 0}, {1, 1}), "axes");  // out of range below
  c.ExpectRejected(inputs({1, -2}, {1, 1}), "axes");  // the same dim twice
  c.ExpectRejected(inputs({0, 1}, {1, 0}), "steps");  // a zero step
}

OnnxBuilder SplitModel() {
  OnnxBuilder b(13);
  b.Input("x", {7, 3});
  b.Input("split", {2}, onnx::TensorProto::INT64);
  b.Node("Split", {"x", "split"}, {"y0", "y1"});
  b.Output("y0", {"a", 3});
  b.Output("y1", {"b", 3});
  return b;
}

TEST(RuntimeShapeValuesTest, SplitWithSizesInputMatchesTheInterpreter) {
  Compiled c(SplitModel());
  ASSERT_TRUE(c.model);
  for (std::vector<int64_t> sizes : {std::vector<int64_t>{2, 5}, {0, 7}, {7, 0}}) {
    auto want = ExpectSameAsReference(*c.model, c.module, {F32Range({7, 3}), I64({2}, sizes)});
    ASSERT_EQ(want.size(), 2u);
    EXPECT_EQ(want[0].shape, (std::vector<int64_t>{sizes[0], 3}));
  }
}

TEST(RuntimeShapeValuesTest, SplitRejectsSizesThatDoNotAddUpOrAreNegative) {
  Compiled c(SplitModel());
  ASSERT_TRUE(c.model);
  c.ExpectRejected({F32Range({7, 3}), I64({2}, {3, 3})}, "split");
  c.ExpectRejected({F32Range({7, 3}), I64({2}, {-1, 8})}, "split");
}

OnnxBuilder ReduceSumModel(int64_t keepdims, int64_t axes_count) {
  OnnxBuilder b(13);
  b.Input("x", {2, 3, 4});
  b.Input("axes", {axes_count}, onnx::TensorProto::INT64);
  auto& n = b.Node("ReduceSum", {"x", "axes"}, {"y"});
  OnnxBuilder::IntAttr(n, "keepdims", keepdims);
  std::vector<testing::Dim> dims;
  for (int64_t i = 0; i < (keepdims ? 3 : 3 - axes_count); ++i)
    dims.push_back("d" + std::to_string(i));
  b.Output("y", dims);
  return b;
}

TEST(RuntimeShapeValuesTest, ReduceSumWithAxesInputMatchesTheInterpreter) {
  Compiled keep(ReduceSumModel(1, 2));
  ASSERT_TRUE(keep.model);
  struct Case {
    std::vector<int64_t> axes, want;
  } kept[] = {{{0, 2}, {1, 3, 1}}, {{-1, -3}, {1, 3, 1}}, {{1, 2}, {2, 1, 1}}};
  for (const Case& k : kept) {
    auto want =
        ExpectSameAsReference(*keep.model, keep.module, {F32Range({2, 3, 4}), I64({2}, k.axes)});
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, k.want);
  }
  Compiled drop(ReduceSumModel(0, 1));
  ASSERT_TRUE(drop.model);
  Case dropped[] = {{{0}, {3, 4}}, {{1}, {2, 4}}, {{-1}, {2, 3}}};
  for (const Case& k : dropped) {
    auto want =
        ExpectSameAsReference(*drop.model, drop.module, {F32Range({2, 3, 4}), I64({1}, k.axes)});
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, k.want);
  }
}

TEST(RuntimeShapeValuesTest, ReduceSumRejectsAxesOutOfRangeOrRepeated) {
  Compiled c(ReduceSumModel(0, 2));
  ASSERT_TRUE(c.model);
  c.ExpectRejected({F32Range({2, 3, 4}), I64({2}, {0, 3})}, "axes");
  c.ExpectRejected({F32Range({2, 3, 4}), I64({2}, {2, -1})}, "axes");
}

OnnxBuilder ResizeModel(const std::string& mode) {
  OnnxBuilder b(13);
  b.Input("x", {1, 2, 3, 4});
  b.Input("scales", {4});
  auto& n = b.Node("Resize", {"x", "", "scales"}, {"y"});
  OnnxBuilder::StringAttr(n, "mode", mode);
  b.Output("y", {"n", "c", "h", "w"});
  return b;
}

ir::NDArray Scales(const std::vector<float>& v) { return F32({4}, v); }

TEST(RuntimeShapeValuesTest, ResizeWithScalesInputMatchesTheInterpreter) {
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    Compiled c(ResizeModel(mode));
    ASSERT_TRUE(c.model);
    // floor(dim * scale): 3 * 1.7 = 5.1 -> 5, 4 * 0.6 = 2.4 -> 2, 3 * 0.34 -> 1, 4 * 2.5 -> 10.
    struct Case {
      std::vector<float> scales;
      std::vector<int64_t> want;
    } cases[] = {{{1, 1, 1.7f, 0.6f}, {1, 2, 5, 2}}, {{1, 1, 0.34f, 2.5f}, {1, 2, 1, 10}}};
    for (const Case& k : cases) {
      auto want = ExpectSameAsReference(*c.model, c.module,
                                        {F32Range({1, 2, 3, 4}), Scales(k.scales)}, 1e-6);
      ASSERT_EQ(want.size(), 1u);
      EXPECT_EQ(want[0].shape, k.want) << mode;
    }
  }
}

TEST(RuntimeShapeValuesTest, ResizeRejectsScalesThatAreNotPositive) {
  Compiled c(ResizeModel("linear"));
  ASSERT_TRUE(c.model);
  c.ExpectRejected({F32Range({1, 2, 3, 4}), Scales({1, 1, -2, 1})}, "scales");
  c.ExpectRejected({F32Range({1, 2, 3, 4}), Scales({1, 0, 1, 1})}, "scales");
}

OnnxBuilder OneHotModel() {
  OnnxBuilder b(11);
  b.Input("indices", {3}, onnx::TensorProto::INT64);
  b.Input("depth", {}, onnx::TensorProto::FLOAT);
  b.FloatInitializer("values", {2}, {-1, 4});
  b.Node("OneHot", {"indices", "depth", "values"}, {"y"});
  b.Output("y", {3, "depth"});
  return b;
}

TEST(RuntimeShapeValuesTest, OneHotWithDepthInputMatchesTheInterpreter) {
  Compiled c(OneHotModel());
  ASSERT_TRUE(c.model);
  for (float depth : {5.7f, 1.0f, 3.0f}) {  // a float depth truncates
    auto want = ExpectSameAsReference(*c.model, c.module, {I64({3}, {0, -1, 2}), F32({}, {depth})});
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, (std::vector<int64_t>{3, static_cast<int64_t>(depth)}));
  }
  c.ExpectRejected({I64({3}, {0, 1, 2}), F32({}, {0.5f})}, "depth");
}

OnnxBuilder WindowModel(const std::string& op, int64_t periodic) {
  OnnxBuilder b(17);
  b.Input("size", {}, onnx::TensorProto::INT64);
  auto& n = b.Node(op, {"size"}, {"y"});
  OnnxBuilder::IntAttr(n, "periodic", periodic);
  b.Output("y", {"n"});
  return b;
}

TEST(RuntimeShapeValuesTest, WindowsWithSizeInputMatchTheInterpreter) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    for (int64_t periodic : {0, 1}) {
      Compiled c(WindowModel(op, periodic));
      ASSERT_TRUE(c.model);
      for (int64_t size : {1, 2, 9}) {
        auto want = ExpectSameAsReference(*c.model, c.module, {I64({}, {size})}, 1e-6);
        ASSERT_EQ(want.size(), 1u);
        EXPECT_EQ(want[0].shape, (std::vector<int64_t>{size})) << op;
      }
    }
  }
  Compiled c(WindowModel("HannWindow", 1));
  ASSERT_TRUE(c.model);
  c.ExpectRejected({I64({}, {-3})}, "size");
}

}  // namespace
}  // namespace kiln
