// The default schedules, end to end: ONNX models compiled for a target, run through the runtime
// on one and several threads, compared with the reference interpreter. Sizes are chosen so
// that no dimension is a multiple of a tile (6 rows, 8 or 16 columns, 128-column blocks,
// 256-deep blocks), and M is symbolic.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "compiler/schedule/rules.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

ir::NDArray Random(std::vector<int64_t> shape, int seed) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.SetDouble(i, dist(rng));
  return a;
}

std::vector<float> Floats(const ir::NDArray& a) {
  std::vector<float> out(a.num_elements());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(a.GetDouble(i));
  return out;
}

std::string MatmulModel(int64_t k, int64_t n) {
  OnnxBuilder b;
  b.Input("a", {"m", k});
  b.Input("b", {k, n});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {"m", n});
  return b.Serialize();
}

class ScheduleMatmulTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScheduleMatmulTest, MatmulIsTiledAndPacked) {
  std::string kernels = ScheduledKernels(MatmulModel(300, 150), GetParam());
  EXPECT_NE(kernels.find("packed_b"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("parallel"), std::string::npos) << kernels;
  // Only weights packed at compile time, and B read in place, are prefetched: prefetching B's
  // rows as they are packed made a 1024 x 4096 x 4096 product 1.01-1.02x as slow.
  EXPECT_EQ(kernels.find("kiln.prefetch"), std::string::npos) << kernels;
}

// With AVX-512's 14-row tiles A is packed by default, as rows copied in whole vectors: an
// interleaved copy (packed_a[kk, ii]) became scatters, a quarter of the kernel's time. The
// interpreter checks the packed rows' values (m = 13 below; 30 spans three tiles).
TEST(ScheduleMatmulPackATest, RowsOfAAreCopiedAsVectors) {
  std::string onnx = MatmulModel(300, 150);
  std::string kernels = ScheduledKernels(onnx, "x86_64-v4");
  EXPECT_TRUE(std::regex_search(
      kernels,
      std::regex(R"(for pakk in range\([^\n]*\) vectorized \{\s*packed_a\[pii, pakk\] = )")))
      << kernels;
  EXPECT_NE(kernels.find("packed_a[ii, kk]"), std::string::npos) << kernels;
  std::vector<std::string> targets = CpuTestTargets();
  if (std::find(targets.begin(), targets.end(), "x86_64-v4") == targets.end()) {
    GTEST_SKIP() << "this machine does not run AVX-512";
  }
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, "x86_64-v4");
  ir::NDArray a = Random({30, 300}, 3), b = Random({300, 150}, 4);
  auto expected = interp::Run(*module, {a, b});
  ASSERT_TRUE(expected.ok()) << expected.status();
  ExpectClose(compiled.Run({a, b}, {30, 150}, 2), (*expected)[0], "m=30");
}

TEST_P(ScheduleMatmulTest, OddSizesMatchTheInterpreter) {
  // K = 300 spans two depth blocks, N = 150 two column blocks with a partial panel.
  std::string onnx = MatmulModel(300, 150);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  for (int64_t m : {1, 5, 6, 13}) {
    ir::NDArray a = Random({m, 300}, 1), b = Random({300, 150}, 2);
    auto expected = interp::Run(*module, {a, b});
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run({a, b}, {m, 150}, threads), (*expected)[0],
                  "m=" + std::to_string(m) + " threads=" + std::to_string(threads));
    }
  }
}

TEST_P(ScheduleMatmulTest, SmallAndBatchedMatmulsMatchTheInterpreter) {
  OnnxBuilder b;
  b.Input("a", {2, "m", 5});
  b.Input("b", {5, 19});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {2, "m", 19});
  std::string onnx = b.Serialize();
  EXPECT_NE(ScheduledKernels(onnx, GetParam()).find("packed_b"), std::string::npos);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  for (int64_t m : {1, 7}) {
    ir::NDArray x = Random({2, m, 5}, 3), w = Random({5, 19}, 4);
    auto expected = interp::Run(*module, {x, w});
    ASSERT_TRUE(expected.ok()) << expected.status();
    ExpectClose(compiled.Run({x, w}, {2, m, 19}, 2), (*expected)[0], "m=" + std::to_string(m));
  }
}

// Fusion appends bias, residual and activation to the matmul; the tiled form applies them
// after the product, once per element.
TEST_P(ScheduleMatmulTest, FusedEpilogueKeepsTheTiledForm) {
  OnnxBuilder b;
  b.Input("a", {"m", 300});
  b.Input("b", {300, 150});
  b.Input("bias", {150});
  b.Input("residual", {"m", 150});
  b.Node("MatMul", {"a", "b"}, {"mm"});
  b.Node("Add", {"mm", "bias"}, {"biased"});
  b.Node("Add", {"biased", "residual"}, {"sum"});
  b.Node("Relu", {"sum"}, {"y"});
  b.Output("y", {"m", 150});
  std::string onnx = b.Serialize();
  std::string kernels = ScheduledKernels(onnx, GetParam());
  EXPECT_NE(kernels.find("fused_matmul_add_add_relu"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("packed_b"), std::string::npos) << kernels;
  // The last row tile, where MR does not divide m, stores each row inside m as whole vectors,
  // its epilogue included; only a tile past N goes element by element.
  EXPECT_TRUE(std::regex_search(
      kernels,
      std::regex(R"(if it \* \d+ \+ ii < m \{\s*for jj in range\(0, \d+\) vectorized \{)")))
      << kernels;
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  for (int64_t m : {1, 13}) {
    std::vector<ir::NDArray> in = {Random({m, 300}, 5), Random({300, 150}, 6), Random({150}, 7),
                                   Random({m, 150}, 8)};
    auto expected = interp::Run(*module, in);
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run(in, {m, 150}, threads), (*expected)[0],
                  "m=" + std::to_string(m) + " threads=" + std::to_string(threads));
    }
  }
}

// A constant B (weights) is packed at compile time, K-major (MatMul) or N-major (Gemm with
// transB): the kernel takes it packed and packs nothing itself; the tiled and the one-row
// forms both read the packed layout.
std::string ConstantWeightsModel(bool transposed) {
  OnnxBuilder b;
  b.Input("a", {"m", 300});
  std::vector<float> w(300 * 150);
  ir::NDArray values = Random({300 * 150}, 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(values.GetDouble(i));
  if (transposed) {
    b.FloatInitializer("w", {150, 300}, w);
    auto& gemm = b.Node("Gemm", {"a", "w"}, {"y"});
    OnnxBuilder::IntAttr(gemm, "transB", 1);
  } else {
    b.FloatInitializer("w", {300, 150}, w);
    b.Node("MatMul", {"a", "w"}, {"y"});
  }
  b.Output("y", {"m", 150});
  return b.Serialize();
}

TEST_P(ScheduleMatmulTest, ConstantWeightsArePackedAtCompileTime) {
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "Gemm transB" : "MatMul");
    std::string onnx = ConstantWeightsModel(transposed);
    std::string kernels = ScheduledKernels(onnx, GetParam());
    EXPECT_NE(kernels.find("_packed: f32["), std::string::npos) << kernels;
    EXPECT_EQ(kernels.find("alloc packed_b"), std::string::npos) << kernels;
    // Both forms prefetch the packed rows 64 further on in their panel, unclamped: past K, the
    // next panel's rows or memory past the weights (a prefetch never faults).
    for (const char* step : {"kc \\* 256 \\+ kk", "mvk"}) {
      std::regex prefetch(absl::StrCat("kiln\\.prefetch\\(A1_packed\\[jc \\* \\d+ \\+ jp, ", step,
                                       " \\+ 64, 0\\]\\)"));
      EXPECT_TRUE(std::regex_search(kernels, prefetch)) << step << " in\n" << kernels;
    }
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    Compiled compiled(onnx, GetParam());
    for (int64_t m : {1, 5, 13}) {
      ir::NDArray a = Random({m, 300}, 10);
      auto expected = interp::Run(*module, {a});
      ASSERT_TRUE(expected.ok()) << expected.status();
      for (int threads : {1, 3}) {
        ExpectClose(compiled.Run({a}, {m, 150}, threads), (*expected)[0],
                    "m=" + std::to_string(m) + " threads=" + std::to_string(threads));
      }
    }
  }
}

// One row (single-token decode) takes the matrix-vector form: B read in place, never packed.
// K = 300 and N = 150 leave a partial panel and a partial column block. (Fusion does not yet
// append bias + relu to a constant one-row matmul; FusedEpilogueKeepsTheTiledForm's m = 1 runs
// the fused epilogue through this form, chosen at run time.)
std::string OneRowModel(bool fused) {
  OnnxBuilder b;
  b.Input("a", {1, 300});
  b.Input("b", {300, 150});
  if (fused) b.Input("bias", {150});
  b.Node("MatMul", {"a", "b"}, {fused ? "mm" : "y"});
  if (fused) {
    b.Node("Add", {"mm", "bias"}, {"biased"});
    b.Node("Relu", {"biased"}, {"y"});
  }
  b.Output("y", {1, 150});
  return b.Serialize();
}

TEST_P(ScheduleMatmulTest, OneRowIsAMatrixVectorProduct) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "bias + relu" : "plain");
    std::string onnx = OneRowModel(fused);
    std::string kernels = ScheduledKernels(onnx, GetParam());
    EXPECT_EQ(kernels.find("packed_b"), std::string::npos) << kernels;
    EXPECT_NE(kernels.find("parallel"), std::string::npos) << kernels;
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    Compiled compiled(onnx, GetParam());
    std::vector<ir::NDArray> in = {Random({1, 300}, 9), Random({300, 150}, 10)};
    if (fused) in.push_back(Random({150}, 11));
    auto expected = interp::Run(*module, in);
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run(in, {1, 150}, threads), (*expected)[0],
                  "threads=" + std::to_string(threads));
    }
  }
}

TEST_P(ScheduleMatmulTest, BatchedOneRowMatchesTheInterpreter) {
  OnnxBuilder b;
  b.Input("a", {2, 1, 64});
  b.Input("b", {64, 19});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {2, 1, 19});
  std::string onnx = b.Serialize();
  EXPECT_EQ(ScheduledKernels(onnx, GetParam()).find("packed_b"), std::string::npos);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  ir::NDArray x = Random({2, 1, 64}, 12), w = Random({64, 19}, 13);
  auto expected = interp::Run(*module, {x, w});
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int threads : {1, 3}) {
    ExpectClose(compiled.Run({x, w}, {2, 1, 19}, threads), (*expected)[0],
                "threads=" + std::to_string(threads));
  }
}

// The text of prim_func `name` in `kernels`, up to the next prim_func (or the end).
std::string KernelText(const std::string& kernels, const std::string& name) {
  size_t begin = kernels.find("prim_func @" + name + "(");
  if (begin == std::string::npos) return "";
  size_t end = kernels.find("prim_func @", begin + 1);
  return kernels.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

int64_t Count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A pointwise conv on a 7x7 plane is a matmul of 161 rows (27 tiles of 6, the last one short;
// 12 of 14 with AVX-512)
// and 49 columns: one column block. Its rows are split into several groups of equal size
// (first tile of group g = floor(g * 27 / groups)), not one group of 27 tiles, so that threads
// share them; checked on one and three threads against the interpreter.
TEST_P(ScheduleMatmulTest, SmallPlaneRowsSplitIntoEqualTasks) {
  OnnxBuilder b;
  b.Input("x", {1, 70, 7, 7});
  std::vector<float> w(161 * 70);
  ir::NDArray values = Random({161 * 70}, 14);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(values.GetDouble(i));
  b.FloatInitializer("w", {161, 70, 1, 1}, w);
  b.Node("Conv", {"x", "w"}, {"y"});
  b.Output("y", {1, 161, 7, 7});
  std::string onnx = b.Serialize();
  std::string kernels = ScheduledKernels(onnx, GetParam());
  ASSERT_NE(kernels.find("packed_b"), std::string::npos) << kernels;
  std::smatch groups, tasks;
  ASSERT_TRUE(std::regex_search(kernels, groups, std::regex("let groups: i64 = (\\d+)")))
      << kernels;
  ASSERT_TRUE(
      std::regex_search(kernels, tasks, std::regex("for b?task in range\\(0, (\\d+)\\) parallel")))
      << kernels;
  EXPECT_GE(std::stoi(groups[1]), 2) << kernels;
  EXPECT_EQ(std::stoi(tasks[1]), std::stoi(groups[1])) << kernels;  // one column block
  const int64_t rows =
      schedule::MatmulSpace(ResolvedTarget(GetParam())).Default().Get("tile_rows", 0);
  const std::string tiles = std::to_string((161 + rows - 1) / rows);  // 27 of 6, 12 of 14
  EXPECT_NE(kernels.find(absl::StrCat("for it in range(floordiv(group * ", tiles,
                                      ", groups), floordiv(group * ", tiles, " + ", tiles,
                                      ", groups) - floordiv(group * ", tiles, ", groups)) serial")),
            std::string::npos)
      << kernels;
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  ir::NDArray x = Random({1, 70, 7, 7}, 15);
  auto expected = interp::Run(*module, {x});
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int threads : {1, 3}) {
    ExpectClose(compiled.Run({x}, {1, 161, 7, 7}, threads), (*expected)[0],
                "threads=" + std::to_string(threads));
  }
}

// A pointwise conv on a 14 x 14 plane in blocks of 64 columns is three full blocks and one of 4
// columns: as one row group, the first of two threads would take two full blocks and the second
// one and the short one. Its rows are split into two groups instead, so that each thread takes
// every block of half the rows. On a 16 x 16 plane the four blocks are equal and the rows stay
// one group. Checked on one and three threads against the interpreter.
TEST_P(ScheduleMatmulTest, ShortLastColumnBlockSplitsTheRowsInTwo) {
  const ir::Target target = ResolvedTarget(GetParam());
  // The pointwise conv's matmul space (96 rows, 64 deep), blocks of 64 columns.
  schedule::Trace trace = schedule::MatmulSpace(target, false, true, 96, 64).Default();
  for (schedule::Decision& d : trace.decisions) d.value = d.knob == "block_cols" ? 64 : d.value;
  for (int64_t side : {14, 16}) {
    SCOPED_TRACE(side);
    OnnxBuilder b;
    b.Input("x", {1, 64, side, side});
    std::vector<float> w(96 * 64);
    ir::NDArray values = Random({96 * 64}, 16);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(values.GetDouble(i));
    b.FloatInitializer("w", {96, 64, 1, 1}, w);
    b.Node("Conv", {"x", "w"}, {"y"});
    b.Output("y", {1, 96, side, side});
    std::string onnx = b.Serialize();
    TracedModel traced = CompileWithTrace(onnx, target, trace);
    ASSERT_NE(traced.model, nullptr);
    std::smatch groups;
    ASSERT_TRUE(std::regex_search(traced.kernels, groups, std::regex("let groups: i64 = (\\d+)")))
        << traced.kernels;
    EXPECT_EQ(std::stoi(groups[1]), side == 14 ? 2 : 1) << traced.kernels;

    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    ir::NDArray x = Random({1, 64, side, side}, 17);
    auto expected = interp::Run(*module, {x});
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      std::string error;
      ASSERT_TRUE(traced.model->SetNumThreads(threads, &error)) << error;
      ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), {1, 96, side, side});
      ExpectClose(RunModel(*traced.model, {x}, {out})[0], (*expected)[0],
                  "threads=" + std::to_string(threads));
    }
  }
}

// Tiles of three and four vectors a row, asked with the most rows of the space (14 at AVX-512,
// 12 with 16 registers): the rows are cut to what the registers hold (9 x 3 and 6 x 4 at
// AVX-512, 4 x 3 and 2 x 4 at AVX2) and blocks of 128 and 512 columns to whole panels no
// wider (96 and 480 columns of 48 at AVX-512: 528 would pass the 1 MiB of a kernel-local
// buffer at 512-deep blocks). A pointwise conv with constant weights (A packed at compile
// time) over planes of 49 columns (one 48-column panel and the strip at AVX-512), 100 and 300
// columns (several blocks, a panel crossing N), and a product with constant B (packed at
// compile time) of 300 columns; bias and clip the epilogue. Checked against the interpreter
// on one and three threads.
TEST_P(ScheduleMatmulTest, WideTilesCutTheirRowsToTheRegisters) {
  const ir::Target target = ResolvedTarget(GetParam());
  OnnxBuilder conv;
  conv.Input("x", {1, 70, "h", "w"});
  conv.FloatInitializer("w", {161, 70, 1, 1}, Floats(Random({161 * 70}, 30)));
  conv.FloatInitializer("lo", {}, {0});
  conv.FloatInitializer("hi", {}, {6});
  conv.Node("Conv", {"x", "w"}, {"c"});
  conv.Node("Clip", {"c", "lo", "hi"}, {"y"});
  conv.Output("y", {1, 161, "h", "w"});
  OnnxBuilder product;
  product.Input("x", {"m", 70});
  product.FloatInitializer("w", {70, 300}, Floats(Random({70 * 300}, 31)));
  product.FloatInitializer("bias", {300}, Floats(Random({300}, 32)));
  product.Node("MatMul", {"x", "w"}, {"p"});
  product.Node("Add", {"p", "bias"}, {"y"});
  product.Output("y", {"m", 300});
  const std::vector<std::vector<int64_t>> conv_shapes = {
      {1, 70, 7, 7}, {1, 70, 10, 10}, {1, 70, 15, 20}};
  const std::vector<std::vector<int64_t>> product_shapes = {{33, 70}, {1, 70}};
  for (auto [vectors, asked] :
       std::vector<std::pair<int64_t, int64_t>>{{3, 128}, {4, 128}, {3, 512}}) {
    const int64_t rows = schedule::MaxTileRows(target, vectors);
    const int64_t cols = vectors * target.vector_bits / 32;
    EXPECT_EQ(rows, (target.VectorRegisters() - vectors - 1) / vectors);
    for (bool is_conv : {true, false}) {
      SCOPED_TRACE(
          absl::StrCat(vectors, " vectors, ", asked, " columns, ", is_conv ? "conv" : "product"));
      const std::string onnx = (is_conv ? conv : product).Serialize();
      const schedule::SearchSpace space =
          is_conv ? schedule::MatmulSpace(target, false, true, 161, 70)
                  : schedule::MatmulSpace(target, false, false, std::nullopt, 70);
      schedule::Trace trace = space.Default();
      for (size_t k = 0; k < space.knobs.size(); ++k) {
        const std::vector<int64_t>& choices = space.knobs[k].choices;
        int64_t& value = trace.decisions[k].value;
        if (space.knobs[k].name == "tile_vectors") value = vectors;
        if (space.knobs[k].name == "tile_rows")
          value = *std::max_element(choices.begin(), choices.end());
        if (space.knobs[k].name == "block_cols") value = asked;
        if (space.knobs[k].name == "block_depth") value = asked;
        if (space.knobs[k].name == "pack_a") value = 1;
      }
      TracedModel traced = CompileWithTrace(onnx, target, trace);
      ASSERT_NE(traced.model, nullptr);
      EXPECT_NE(traced.kernels.find(absl::StrCat("alloc acc: f32[", rows, ", ", cols, "]")),
                std::string::npos)
          << traced.kernels;
      const int64_t block = asked / cols * cols;
      EXPECT_NE(traced.kernels.find(absl::StrCat("jc * ", block, " + jp * ", cols)),
                std::string::npos)
          << traced.kernels;
      auto module = driver::ImportModel(onnx);
      ASSERT_TRUE(module.ok()) << module.status();
      for (const std::vector<int64_t>& shape : is_conv ? conv_shapes : product_shapes) {
        ir::NDArray x = Random(shape, 33);
        auto expected = interp::Run(*module, {x});
        ASSERT_TRUE(expected.ok()) << expected.status();
        for (int threads : {1, 3}) {
          std::string error;
          ASSERT_TRUE(traced.model->SetNumThreads(threads, &error)) << error;
          ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), (*expected)[0].shape);
          ExpectClose(RunModel(*traced.model, {x}, {out})[0], (*expected)[0],
                      absl::StrCat(absl::StrJoin(shape, "x"), " threads=", threads));
        }
      }
    }
  }
}

// A pointwise conv with constant weights (A packed at compile time) over a symbolic plane: the
// columns past the last whole vector (the 49th of a 7 x 7 plane, the last 4 of 14 x 14, all of
// a plane narrower than a vector) are the strip, rows in the lanes, and the panel that crosses
// N takes a tile of the vectors that reach N (one of its two on a 7 x 7 plane); on AVX-512 (14-row
// tiles, A packed by default) the kernel has both. 161 output channels end in a short row tile (the
// strip reads the zero tile past it), 300 input channels span two depth blocks of the tiles (the
// strip sums all of them at once); bias, clip and a residual add are the epilogue. Checked against
// the interpreter on one and three threads at planes that leave 0, 1, 3, 4, 9 and 1 columns past a
// vector, one or two images.
TEST_P(ScheduleMatmulTest, PointwiseConvStripsTheColumnsPastTheLastVector) {
  OnnxBuilder b;
  b.Input("x", {"n", 300, "h", "w"});
  b.Input("r", {"n", 161, "h", "w"});
  std::vector<float> w(161 * 300);
  ir::NDArray values = Random({161 * 300}, 22);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(values.GetDouble(i));
  b.FloatInitializer("w", {161, 300, 1, 1}, w);
  std::vector<float> bias(161);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 7) - 3;
  b.FloatInitializer("bias", {161}, bias);
  b.FloatInitializer("lo", {}, {0});
  b.FloatInitializer("hi", {}, {6});
  b.Node("Conv", {"x", "w", "bias"}, {"c"});
  b.Node("Clip", {"c", "lo", "hi"}, {"clipped"});
  b.Node("Add", {"clipped", "r"}, {"y"});
  b.Output("y", {"n", 161, "h", "w"});
  std::string onnx = b.Serialize();
  std::string kernels = ScheduledKernels(onnx, GetParam());
  if (GetParam() == "x86_64-v4") {
    std::string code = kernels.substr(0, kernels.find("host const"));  // not the weights
    EXPECT_NE(code.find("strip_acc"), std::string::npos) << code;
    EXPECT_NE(code.find("alloc acc: f32[14, 16]"), std::string::npos) << code;
  }
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 4, 4},   {1, 7, 7}, {2, 5, 7},
                                                      {1, 14, 14}, {1, 3, 3}, {2, 1, 1}};
  for (auto [n, h, w] : shapes) {
    ir::NDArray x = Random({n, 300, h, w}, 23), r = Random({n, 161, h, w}, 24);
    auto expected = interp::Run(*module, {x, r});
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run({x, r}, {n, 161, h, w}, threads), (*expected)[0],
                  absl::StrCat(n, "x", h, "x", w, " threads=", threads));
    }
  }
}

// Consecutive tasks take the column blocks of one row group: a 14 x 14 plane is one block of
// 128 columns and one of 68 (130 input channels: a product deep enough for blocks of 128, see
// DefaultBlockCols), and a thread's contiguous range of tasks should hold both kinds, not only
// the full blocks.
TEST_P(ScheduleMatmulTest, ConsecutiveTasksTakeTheColumnBlocksOfOneRowGroup) {
  OnnxBuilder b;
  b.Input("x", {1, 130, 14, 14});
  std::vector<float> w(161 * 130, 0.5f);
  b.FloatInitializer("w", {161, 130, 1, 1}, w);
  b.Node("Conv", {"x", "w"}, {"y"});
  b.Output("y", {1, 161, 14, 14});
  std::string kernel = KernelText(ScheduledKernels(b.Serialize(), GetParam()), "conv_0");
  kernel = kernel.substr(0, kernel.find("\n}\n"));  // not the packed weights' bytes
  EXPECT_NE(kernel.find("let jc: i64 = floormod(task, 2)"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("let group: i64 = floordiv(task, 2)"), std::string::npos) << kernel;
}

// The same split with M symbolic: the group count is an expression of M, evaluated at run
// time; rows 1 (the one-row form), 5, 13 and 161 (27 tiles, several groups).
TEST_P(ScheduleMatmulTest, SymbolicRowsSplitIntoTasksMatchTheInterpreter) {
  std::string onnx = MatmulModel(70, 49);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  for (int64_t m : {1, 5, 13, 161}) {
    ir::NDArray a = Random({m, 70}, 16), w = Random({70, 49}, 17);
    auto expected = interp::Run(*module, {a, w});
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run({a, w}, {m, 49}, threads), (*expected)[0],
                  "m=" + std::to_string(m) + " threads=" + std::to_string(threads));
    }
  }
}

// Batched matmuls (attention's [batch, heads, seq, d] @ [batch, heads, d, seq]) run their
// batch dims inside the parallel loop: one loop over batch elements x tasks, no serial loop
// around it. Two batch dims (3 x 2), M symbolic and run at 1 (the one-row form), 7 and 13,
// K and N off the tile sizes.
TEST_P(ScheduleMatmulTest, BatchDimsFoldIntoTheParallelLoop) {
  OnnxBuilder b;
  b.Input("a", {3, 2, "m", 40});
  b.Input("b", {3, 2, 40, 50});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {3, 2, "m", 50});
  std::string onnx = b.Serialize();
  std::string kernel = KernelText(ScheduledKernels(onnx, GetParam()), "matmul_0");
  ASSERT_NE(kernel, "");
  // One parallel loop per form (the one-row form and the tiled one, chosen by M at run time),
  // each over all 6 batch elements; no loop over a batch dim.
  EXPECT_EQ(Count(kernel, " parallel {"), 2) << kernel;
  EXPECT_EQ(Count(kernel, "for btask in range(0, "), 2) << kernel;
  EXPECT_EQ(Count(kernel, "for i0 in"), 0) << kernel;
  EXPECT_EQ(Count(kernel, "for i1 in"), 0) << kernel;
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  for (int64_t m : {1, 7, 13}) {
    ir::NDArray x = Random({3, 2, m, 40}, 18), y = Random({3, 2, 40, 50}, 19);
    auto expected = interp::Run(*module, {x, y});
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run({x, y}, {3, 2, m, 50}, threads), (*expected)[0],
                  "m=" + std::to_string(m) + " threads=" + std::to_string(threads));
    }
  }
}

// A constant M with a batch dim: a single parallel loop covers the batch.
TEST_P(ScheduleMatmulTest, ConstantRowsBatchedHaveOneParallelLoop) {
  OnnxBuilder b;
  b.Input("a", {3, 13, 40});
  b.Input("b", {3, 40, 50});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {3, 13, 50});
  std::string onnx = b.Serialize();
  std::string kernel = KernelText(ScheduledKernels(onnx, GetParam()), "matmul_0");
  ASSERT_NE(kernel, "");
  EXPECT_EQ(Count(kernel, " parallel {"), 1) << kernel;
  EXPECT_EQ(Count(kernel, "for i0 in"), 0) << kernel;
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  ir::NDArray x = Random({3, 13, 40}, 20), y = Random({3, 40, 50}, 21);
  auto expected = interp::Run(*module, {x, y});
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int threads : {1, 3}) {
    ExpectClose(compiled.Run({x, y}, {3, 13, 50}, threads), (*expected)[0],
                "threads=" + std::to_string(threads));
  }
}

// One-output models over x: f32[n, 300], compiled and run on 1 and 3 threads.
void ExpectLikeInterpreter(const OnnxBuilder& b, const std::string& target,
                           std::vector<int64_t> out_shape) {
  std::string onnx = b.Serialize();
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, target);
  ir::NDArray x = Random({257, 300}, 5), y = Random({257, 300}, 6);
  auto expected = interp::Run(*module, {x, y});
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int threads : {1, 3}) {
    ExpectClose(compiled.Run({x, y}, out_shape, threads), (*expected)[0],
                "threads=" + std::to_string(threads));
  }
}

TEST_P(ScheduleMatmulTest, ParallelElementwiseAndSoftmaxMatchTheInterpreter) {
  OnnxBuilder b;
  b.Input("x", {"n", 300});
  b.Input("y", {"n", 300});
  b.Node("Add", {"x", "y"}, {"s"});
  b.Node("Softmax", {"s"}, {"p"});
  b.Output("p", {"n", 300});
  EXPECT_NE(ScheduledKernels(b.Serialize(), GetParam()).find("parallel"), std::string::npos);
  ExpectLikeInterpreter(b, GetParam(), {257, 300});
}

TEST_P(ScheduleMatmulTest, ReductionsStayCorrect) {
  for (int64_t axis : {0, 1}) {
    OnnxBuilder b;
    b.Input("x", {"n", 300});
    b.Input("y", {"n", 300});
    b.Node("Mul", {"x", "y"}, {"s"});
    b.Int64Initializer("axes", {1}, {axis});
    b.Node("ReduceSum", {"s", "axes"}, {"r"});
    b.Output("r", axis == 0 ? std::vector<Dim>{1, 300} : std::vector<Dim>{"n", 1});
    SCOPED_TRACE("axis " + std::to_string(axis));
    ExpectLikeInterpreter(b, GetParam(),
                          axis == 0 ? std::vector<int64_t>{1, 300} : std::vector<int64_t>{257, 1});
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ScheduleMatmulTest, ::testing::ValuesIn(CpuTestTargets()));

}  // namespace
}  // namespace kiln::testing
