// wasm32 and wasm32-simd artifacts run in Node.js through runtime/js/kiln.mjs (by way of
// kiln-runner.mjs), compared with the reference interpreter: elementwise math, a matmul with a
// symbolic batch, a conv, shapes computed from an input's values, and calls that must fail
// with a message naming the input. Also: the SIMD preset really emits SIMD128 and the other
// does not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"
#include "tests/wasm/wasm_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

// n values scale * sin(0.7 i + 0.3).
std::vector<float> Wave(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * i + 0.3f);
  return v;
}

void ExpectClose(const ir::NDArray& expected, const ir::NDArray& actual, const std::string& what) {
  ASSERT_EQ(expected.shape, actual.shape) << what;
  ASSERT_EQ(expected.dtype.code, actual.dtype.code) << what;
  ASSERT_EQ(expected.dtype.bits, actual.dtype.bits) << what;
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    double e = expected.GetDouble(i), a = actual.GetDouble(i);
    ASSERT_NEAR(e, a, 1e-4 * (1 + std::fabs(e))) << what << " element " << i;
  }
}

class WasmNode : public ::testing::TestWithParam<std::string> {
 protected:
  // Compiles `onnx` for the parameter target, runs it in Node and on the reference
  // interpreter, and compares every output.
  void ExpectMatchesReference(const std::string& onnx, const std::vector<ir::NDArray>& inputs,
                              const std::string& name) {
    auto wasm = CompileForWasm(onnx, GetParam());
    ASSERT_TRUE(wasm.ok()) << wasm.status();
    auto expected = ImportAndRun(onnx, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();
    auto actual = RunInNode(*wasm, inputs, name + "-" + GetParam());
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_EQ(expected->size(), actual->size());
    for (size_t i = 0; i < expected->size(); ++i) {
      ExpectClose((*expected)[i], (*actual)[i], name + " output " + std::to_string(i));
    }
  }
};

TEST(WasmTools, NodeIsInstalled) {
  ScratchDir dir("node-version");
  CommandResult result = RunCommand(Quote(KILN_NODE) + " --version", dir / "log");
  EXPECT_EQ(result.exit_code, 0) << "Node.js (" << KILN_NODE << ") does not run: " << result.output;
}

// exp, tanh and division: the math library and vector code, with a symbolic dim.
std::string ElementwiseModel() {
  OnnxBuilder b;
  b.Input("x", {"n", 37});
  b.Input("y", {"n", 37});
  b.Output("z", {"n", 37});
  b.Node("Mul", {"x", "y"}, {"xy"});
  b.Node("Exp", {"xy"}, {"e"});
  b.Node("Tanh", {"x"}, {"t"});
  b.Node("Div", {"e", "t"}, {"z"});
  return b.Serialize();
}

TEST_P(WasmNode, ElementwiseMatchesReference) {
  for (int64_t n : {1, 5}) {
    ExpectMatchesReference(ElementwiseModel(),
                           {F32({n, 37}, Wave(n * 37, 1.5f)), F32({n, 37}, Wave(n * 37 + 3, 0.8f))},
                           "elementwise-n" + std::to_string(n));
  }
}

// x[batch, 96] @ w[96, 40] + b, Relu: the matmul schedule's tiles and a symbolic batch.
std::string MatmulModel() {
  OnnxBuilder b;
  b.Input("x", {"batch", 96});
  b.Output("y", {"batch", 40});
  b.FloatInitializer("w", {96, 40}, Wave(96 * 40, 0.2f));
  b.FloatInitializer("b", {40}, Wave(40, 0.5f));
  b.Node("MatMul", {"x", "w"}, {"xw"});
  b.Node("Add", {"xw", "b"}, {"xwb"});
  b.Node("Relu", {"xwb"}, {"y"});
  return b.Serialize();
}

TEST_P(WasmNode, MatmulWithSymbolicBatchMatchesReference) {
  for (int64_t batch : {1, 3, 17}) {
    ExpectMatchesReference(MatmulModel(), {F32({batch, 96}, Wave(batch * 96, 1.0f))},
                           "matmul-batch" + std::to_string(batch));
  }
}

TEST_P(WasmNode, ConvMatchesReference) {
  OnnxBuilder b;
  b.Input("x", {"n", 3, 10, 10});
  b.Output("y", {"n", 8, 10, 10});
  b.FloatInitializer("w", {8, 3, 3, 3}, Wave(8 * 27, 0.3f));
  b.FloatInitializer("b", {8}, Wave(8, 0.1f));
  OnnxBuilder::IntsAttr(b.Node("Conv", {"x", "w", "b"}, {"y"}), "pads", {1, 1, 1, 1});
  ExpectMatchesReference(b.Serialize(), {F32({2, 3, 10, 10}, Wave(600, 1.0f))}, "conv");
}

// Reshape to a shape given as an input: the output shape comes from the input's values.
std::string ReshapeModel() {
  OnnxBuilder b;
  b.Input("x", {"n", 12});
  b.Input("shape", {2}, onnx::TensorProto::INT64);
  b.Output("y", {"a", "b"});
  b.Node("Reshape", {"x", "shape"}, {"r"});
  b.Node("Neg", {"r"}, {"y"});
  return b.Serialize();
}

TEST_P(WasmNode, ShapesFromInputValuesMatchReference) {
  ExpectMatchesReference(ReshapeModel(), {F32({2, 12}, Wave(24, 1.0f)), I64({2}, {8, 3})},
                         "reshape-8x3");
  ExpectMatchesReference(ReshapeModel(), {F32({2, 12}, Wave(24, 1.0f)), I64({2}, {-1, 4})},
                         "reshape-infer");
}

TEST_P(WasmNode, ValuesThatDoNotFitNameTheInput) {
  auto wasm = CompileForWasm(ReshapeModel(), GetParam());
  ASSERT_TRUE(wasm.ok()) << wasm.status();
  auto result = RunInNode(*wasm, {F32({2, 12}, Wave(24, 1.0f)), I64({2}, {5, 5})},
                          "reshape-bad-" + GetParam());
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("input 'shape'"));
}

TEST_P(WasmNode, BadShapeNamesTheInput) {
  auto wasm = CompileForWasm(MatmulModel(), GetParam());
  ASSERT_TRUE(wasm.ok()) << wasm.status();
  auto result = RunInNode(*wasm, {F32({2, 95}, Wave(190, 1.0f))}, "matmul-bad-" + GetParam());
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
  EXPECT_EQ(result.status().message(), "input 'x' dimension 1: expected 96, got 95");

  auto wrong_dtype = RunInNode(*wasm, {I64({2, 96}, {})}, "matmul-dtype-" + GetParam());
  ASSERT_FALSE(wrong_dtype.ok());
  EXPECT_EQ(wrong_dtype.status().message(), "input 'x': expected dtype f32, got i64");

  auto missing = RunInNode(*wasm, {}, "matmul-count-" + GetParam());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "expected 1 inputs, got 0");
}

// A Gather index out of range is reported by the artifact (index_error) and named by the
// runtime.
TEST_P(WasmNode, IndexOutOfRangeNamesTheInput) {
  OnnxBuilder b;
  b.Input("data", {5, 3});
  b.Input("indices", {2}, onnx::TensorProto::INT64);
  b.Output("y", {2, 3});
  b.Node("Gather", {"data", "indices"}, {"y"});
  auto wasm = CompileForWasm(b.Serialize(), GetParam());
  ASSERT_TRUE(wasm.ok()) << wasm.status();
  auto result =
      RunInNode(*wasm, {F32({5, 3}, Wave(15, 1.0f)), I64({2}, {1, 7})}, "gather-" + GetParam());
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("input 'indices' holds index 7, out of range for dimension 0 of size 5"));
}

// api_check.mjs: kiln.mjs's API and allocator, the module's imports and exports.
TEST_P(WasmNode, ApiAllocatorAndModuleInterface) {
  auto wasm = CompileForWasm(MatmulModel(), GetParam());
  ASSERT_TRUE(wasm.ok()) << wasm.status();
  ScratchDir dir("heap-" + GetParam());
  WriteFile(dir / "model.wasm", *wasm);
  CommandResult result =
      RunCommand(Quote(KILN_NODE) + " " + Quote(KILN_SOURCE_DIR "/tests/wasm/api_check.mjs") + " " +
                     Quote(dir / "model.wasm"),
                 dir / "log");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "ok\n");
}

// The runner's protocol at its edges: an artifact that does not load is exit status 2 with
// the reason on stderr; an empty stdin ends it with status 0 and no output.
TEST(WasmRunner, LoadFailureAndEndOfInput) {
  ScratchDir dir("runner-edges");
  WriteFile(dir / "bad.wasm", "not a wasm module");
  std::string runner =
      Quote(KILN_NODE) + " " + Quote(KILN_SOURCE_DIR "/runtime/js/kiln-runner.mjs");
  CommandResult bad =
      RunCommand(runner + " " + Quote(dir / "bad.wasm") + " < /dev/null", dir / "log");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("cannot load artifact"));
  auto wasm = CompileForWasm(MatmulModel(), "wasm32");
  ASSERT_TRUE(wasm.ok()) << wasm.status();
  WriteFile(dir / "model.wasm", *wasm);
  CommandResult empty =
      RunCommand(runner + " " + Quote(dir / "model.wasm") + " < /dev/null", dir / "log");
  EXPECT_EQ(empty.exit_code, 0) << empty.output;
  EXPECT_EQ(empty.output, "");
}

INSTANTIATE_TEST_SUITE_P(Targets, WasmNode, ::testing::Values("wasm32", "wasm32-simd"),
                         [](const auto& info) {
                           return info.param == "wasm32" ? std::string("Wasm32")
                                                         : std::string("Wasm32Simd");
                         });

// The number of disassembled instructions that work on v128 values (SIMD128).
int CountSimdInstructions(const std::string& wasm, const std::string& name) {
  ScratchDir dir(name);
  WriteFile(dir / "model.wasm", wasm);
  CommandResult result =
      RunCommand(Quote(KILN_LLVM_OBJDUMP) + " -d " + Quote(dir / "model.wasm"), dir / "log");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  int count = 0;
  std::istringstream lines(result.output);
  for (std::string line; std::getline(lines, line);) {
    for (const char* shape :
         {"v128.", "f32x4.", "i32x4.", "i64x2.", "f64x2.", "i8x16.", "i16x8."}) {
      if (line.find(shape) != std::string::npos) {
        ++count;
        break;
      }
    }
  }
  return count;
}

// KILN_WASM_LD overrides the linker CMake found; its failure is an internal error with its exit
// status, not a broken module.
TEST(WasmLink, LinkerFailureIsInternal) {
  setenv("KILN_WASM_LD", "/bin/false", 1);
  auto failed = CompileForWasm(ElementwiseModel(), "wasm32");
  unsetenv("KILN_WASM_LD");
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("wasm-ld failed (exit 1)"));
}

TEST(WasmSimd, OnlyTheSimdPresetEmitsSimd128) {
  auto plain = CompileForWasm(ElementwiseModel(), "wasm32");
  auto simd = CompileForWasm(ElementwiseModel(), "wasm32-simd");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(simd.ok()) << simd.status();
  EXPECT_EQ(CountSimdInstructions(*plain, "objdump-plain"), 0);
  EXPECT_GT(CountSimdInstructions(*simd, "objdump-simd"), 10);
}

}  // namespace
}  // namespace kiln::testing
