// The rows rule (reduce_rule.h), end to end: softmax, log-softmax, layer norm and reductions
// over the last axis, compiled with each knob of the rule's space at each of its choices, at
// static and symbolic shapes (rows of 0 to 100 elements, around and between the vector
// widths), run on one and three threads and compared with the reference interpreter. A
// reduction over another axis, and an integer one, stay on the generic rule and stay correct.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/manifest.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/verifier.h"
#include "compiler/schedule/reduce_rule.h"
#include "compiler/schedule/schedule.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

ir::NDArray Random(arith::DataType dtype, std::vector<int64_t> shape, int seed) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-4, 4);
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    a.SetDouble(i, dtype.is_float() ? dist(rng) : static_cast<int64_t>(dist(rng) * 100));
  }
  return a;
}

// One op over x[a, 3, n]: `a` and `n` are names (symbolic) or numbers.
struct RowCase {
  std::string name;
  std::string op;  // Softmax, LogSoftmax, LayerNormalization, ReduceSum, ReduceMean, ReduceMax
  int64_t axis = -1;
  bool keepdims = false;
  onnx::TensorProto::DataType elem_type = onnx::TensorProto::FLOAT;
  // Whether the rows rule takes the kernel (else the generic rule does).
  bool rows = true;

  std::string Model(Dim a, Dim n) const {
    OnnxBuilder b(17);
    b.Input("x", {a, 3, n}, elem_type);
    std::vector<std::string> inputs = {"x"};
    std::vector<Dim> out = {a, 3, n};
    if (op == "LayerNormalization") {
      b.Input("scale", {n});
      b.Input("bias", {n});
      inputs = {"x", "scale", "bias"};
    } else if (op == "ReduceSum") {
      b.Int64Initializer("axes", {1}, {axis});
      inputs.push_back("axes");
    }
    onnx::NodeProto& node = b.Node(op, inputs, {"y"});
    if (op.rfind("Reduce", 0) == 0) {
      if (op != "ReduceSum") OnnxBuilder::IntsAttr(node, "axes", {axis});
      OnnxBuilder::IntAttr(node, "keepdims", keepdims);
      const size_t d = axis < 0 ? out.size() - 1 : axis;
      if (keepdims) {
        out[d] = Dim(int64_t{1});
      } else {
        out.erase(out.begin() + d);
      }
    } else {
      OnnxBuilder::IntAttr(node, "axis", axis);
    }
    b.Output("y", out, elem_type);
    return b.Serialize();
  }

  std::vector<ir::NDArray> Inputs(int64_t a, int64_t n) const {
    arith::DataType dtype = elem_type == onnx::TensorProto::FLOAT ? arith::DataType::Float(32)
                                                                  : arith::DataType::Int(32);
    std::vector<ir::NDArray> inputs = {Random(dtype, {a, 3, n}, 1)};
    if (op == "LayerNormalization") {
      inputs.push_back(Random(dtype, {n}, 2));
      inputs.push_back(Random(dtype, {n}, 3));
    }
    return inputs;
  }
};

std::vector<RowCase> Cases() {
  return {
      {.name = "softmax", .op = "Softmax"},
      {.name = "log_softmax", .op = "LogSoftmax"},
      {.name = "layer_norm", .op = "LayerNormalization"},
      {.name = "reduce_sum", .op = "ReduceSum"},
      {.name = "reduce_mean_keepdims", .op = "ReduceMean", .keepdims = true},
      {.name = "reduce_max", .op = "ReduceMax"},
      {.name = "reduce_sum_middle_axis", .op = "ReduceSum", .axis = 1, .rows = false},
      {.name = "reduce_max_int32",
       .op = "ReduceMax",
       .elem_type = onnx::TensorProto::INT32,
       .rows = false},
  };
}

const std::vector<int64_t> kRowLengths = {0, 1, 3, 7, 8, 9, 33, 100};
const std::vector<int64_t> kOuterExtents = {1, 2, 5};

// The search spaces of the model's tunable kernels.
std::vector<schedule::SearchSpace> Spaces(const std::string& onnx, const ir::Target& target) {
  std::vector<schedule::SearchSpace> spaces;
  for (const schedule::TunableKernel& k : schedule::TunableKernels(Fused(onnx, target), target)) {
    spaces.insert(spaces.end(), k.spaces.begin(), k.spaces.end());
  }
  return spaces;
}

// The model run at x[a, 3, n] on one and three threads matches the interpreter.
void ExpectMatchesInterpreter(runtime::Model& model, const RowCase& c, const std::string& onnx,
                              int64_t a, int64_t n) {
  SCOPED_TRACE("a=" + std::to_string(a) + " n=" + std::to_string(n));
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<ir::NDArray> inputs = c.Inputs(a, n);
  auto expected = interp::Run(*module, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int threads : {1, 3}) {
    std::string error;
    ASSERT_TRUE(model.SetNumThreads(threads, &error)) << error;
    const ir::NDArray& want = (*expected)[0];
    ir::NDArray got = RunModel(model, inputs, {ir::NDArray::Zeros(want.dtype, want.shape)})[0];
    ExpectClose(got, want, "threads=" + std::to_string(threads));
  }
}

// Every trace that sets one knob of the rows space to one of its choices (the others at their
// defaults); just the default for a kernel the rule does not take.
std::vector<schedule::Trace> TracesToTry(const RowCase& c, const ir::Target& target) {
  if (!c.rows) return {schedule::Trace{}};
  std::vector<schedule::SearchSpace> spaces = Spaces(c.Model("a", "n"), target);
  EXPECT_EQ(spaces.size(), 1u);
  if (spaces.size() != 1) return {};
  const schedule::SearchSpace& space = spaces[0];
  std::vector<schedule::Trace> traces;
  for (size_t knob = 0; knob < space.knobs.size(); ++knob) {
    for (int64_t choice : space.knobs[knob].choices) {
      schedule::Trace trace = space.Default();
      trace.decisions[knob].value = choice;
      traces.push_back(trace);
    }
  }
  return traces;
}

class ScheduleRowsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScheduleRowsTest, RowKernelsTakeTheRowsSpaceAndOthersNone) {
  ir::Target target = ResolvedTarget(GetParam());
  for (const RowCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<schedule::SearchSpace> spaces = Spaces(c.Model("a", "n"), target);
    if (!c.rows) {
      EXPECT_TRUE(spaces.empty());
      continue;
    }
    ASSERT_EQ(spaces.size(), 1u);
    EXPECT_EQ(spaces[0].rule, "rows");
    ASSERT_EQ(spaces[0].knobs.size(), 2u);
    EXPECT_EQ(spaces[0].knobs[0].name, "rows_per_task");
    EXPECT_EQ(spaces[0].knobs[1].name, "accumulators");
    EXPECT_GT(spaces[0].Size(), 1);
  }
}

// Softmax's max and sum run in vector lanes, and the fused row index is the parallel loop.
TEST_P(ScheduleRowsTest, SoftmaxReducesInVectorLanesOverParallelRows) {
  ir::Target target = ResolvedTarget(GetParam());
  const int64_t lanes = std::max(4, target.vector_bits / 32) * 2;  // two accumulators
  std::string kernels = ScheduledKernels(Cases()[0].Model("a", "n"), GetParam());
  EXPECT_NE(kernels.find("for task in range(0, a * 3) parallel"), std::string::npos) << kernels;
  const std::string loop = "for k_l in range(0, " + std::to_string(lanes) + ") vectorized {";
  for (const char* update :
       {"_partial[k_l] = max(", "sum_partial[k_l] = sum_partial[k_l] + out["}) {
    size_t at = kernels.find(update);
    ASSERT_NE(at, std::string::npos) << update << "\n" << kernels;
    // The update sits in a vectorized loop over the lanes.
    size_t vector_loop = kernels.rfind(loop, at);
    ASSERT_NE(vector_loop, std::string::npos) << kernels;
    EXPECT_EQ(kernels.substr(vector_loop, at - vector_loop).find("serial"), std::string::npos)
        << kernels;
  }
  // The lanes fold in halves down to lane 0, which alone meets the row's accumulator.
  for (int64_t half = lanes / 4; half >= 1; half /= 2) {
    const std::string fold = absl::StrCat("for k_l in range(0, ", half, ") vectorized {\n",
                                          "        sum_partial[k_l] = sum_partial[k_l] + ",
                                          "sum_partial[k_l + ", half, "]");
    EXPECT_NE(kernels.find(fold), std::string::npos) << fold << "\n" << kernels;
  }
  EXPECT_NE(kernels.find("sum[0] = sum[0] + sum_partial[0]"), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("sum[0] = sum[0] + sum_partial[k_l]"), std::string::npos) << kernels;
}

// The default trace, a trace of another rule and a trace of values outside the space build
// exactly the kernel the rule builds with no trace.
TEST_P(ScheduleRowsTest, DefaultTraceBuildsTheUntracedKernel) {
  ir::Target target = ResolvedTarget(GetParam());
  ir::IRModule module = Fused(Cases()[2].Model("a", "n"), target);
  const ir::PrimFunc* kernel = nullptr;
  for (const auto& [name, func] : module.prim_funcs) {
    if (!func.is_host && func.body && schedule::RowsSpace(func.body, target)) kernel = &func;
  }
  ASSERT_NE(kernel, nullptr) << ir::ToString(module);
  schedule::SearchSpace space = *schedule::RowsSpace(kernel->body, target);
  auto built = [&](const schedule::Trace& trace) {
    auto k = schedule::ScheduleRows(kernel->body, target, trace);
    EXPECT_TRUE(k.has_value());
    return k ? ir::ToString(k->body) : "";
  };
  std::string untraced = built({});
  EXPECT_EQ(built(space.Default()), untraced);
  EXPECT_EQ(built({"rows", {{"rows_per_task", 3}, {"accumulators", 0}}}), untraced);
  EXPECT_EQ(built({"conv", {{"rows_per_task", 4}}}), untraced);
  EXPECT_NE(built({"rows", {{"rows_per_task", 4}, {"accumulators", 4}}}), untraced);
}

// Symbolic rows and row lengths: one compile per trace, run at every shape.
TEST_P(ScheduleRowsTest, EveryKnobChoiceMatchesTheInterpreterAtSymbolicShapes) {
  ir::Target target = ResolvedTarget(GetParam());
  for (const RowCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const std::string onnx = c.Model("a", "n");
    for (const schedule::Trace& trace : TracesToTry(c, target)) {
      SCOPED_TRACE(trace.ToJson());
      TracedModel traced = CompileWithTrace(onnx, target, trace);
      ASSERT_NE(traced.model, nullptr);
      for (int64_t a : kOuterExtents) {
        for (int64_t n : kRowLengths) ExpectMatchesInterpreter(*traced.model, c, onnx, a, n);
      }
    }
  }
}

// Static shapes: constant extents, rows shorter than the lanes left as they are.
TEST_P(ScheduleRowsTest, EveryKnobChoiceMatchesTheInterpreterAtStaticShapes) {
  ir::Target target = ResolvedTarget(GetParam());
  for (const RowCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    for (const auto& [a, n] : {std::pair<int64_t, int64_t>{1, 7}, {2, 9}, {5, 33}, {3, 100}}) {
      const std::string onnx = c.Model(Dim(a), Dim(n));
      for (const schedule::Trace& trace : TracesToTry(c, target)) {
        SCOPED_TRACE(trace.ToJson());
        TracedModel traced = CompileWithTrace(onnx, target, trace);
        ASSERT_NE(traced.model, nullptr);
        ExpectMatchesInterpreter(*traced.model, c, onnx, a, n);
      }
    }
  }
}

// Global average and max pools sum (or take the max of) each plane as one contiguous row, so
// the rows rule runs the (n, c) planes in parallel and each plane in vector lanes; checked
// against the interpreter at planes of 1, 49, 100 and 3136 elements, rank 3 and 4, on one and
// three threads.
TEST_P(ScheduleRowsTest, GlobalPoolsRunEachPlaneAsARow) {
  for (bool max : {false, true}) {
    for (int rank : {3, 4}) {
      SCOPED_TRACE(absl::StrCat(max ? "GlobalMaxPool" : "GlobalAveragePool", " rank ", rank));
      OnnxBuilder b;
      std::vector<Dim> in = {"n", 40, "h"}, out = {"n", 40, int64_t{1}};
      if (rank == 4) {
        in.push_back("w");
        out.push_back(int64_t{1});
      }
      b.Input("x", in);
      b.Node(max ? "GlobalMaxPool" : "GlobalAveragePool", {"x"}, {"y"});
      b.Output("y", out);
      const std::string onnx = b.Serialize();
      std::string kernels = ScheduledKernels(onnx, GetParam());
      EXPECT_NE(kernels.find("for task in range(0, n * 40) parallel"), std::string::npos)
          << kernels;
      EXPECT_NE(kernels.find("_partial[r_l]"), std::string::npos) << kernels;
      auto module = driver::ImportModel(onnx);
      ASSERT_TRUE(module.ok()) << module.status();
      Compiled compiled(onnx, GetParam());
      for (auto [n, h, w] :
           std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 7, 7}, {1, 10, 10}, {1, 56, 56}}) {
        std::vector<int64_t> shape = {n, 40, rank == 4 ? h : h * w};
        std::vector<int64_t> out_shape = {n, 40, 1};
        if (rank == 4) {
          shape.push_back(w);
          out_shape.push_back(1);
        }
        ir::NDArray x = Random(arith::DataType::Float(32), shape, 5);
        auto expected = interp::Run(*module, {x});
        ASSERT_TRUE(expected.ok()) << expected.status();
        for (int threads : {1, 3}) {
          ExpectClose(compiled.Run({x}, out_shape, threads), (*expected)[0],
                      absl::StrCat(n, "x", h, "x", w, " threads=", threads));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ScheduleRowsTest, ::testing::ValuesIn(CpuTestTargets()));

}  // namespace
}  // namespace kiln::testing
