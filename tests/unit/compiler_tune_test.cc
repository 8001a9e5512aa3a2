// Tuning end to end: schedules as traces, the cost model, every knob of the matmul rule
// replayed from a tuning record into a compiled artifact that matches the reference
// interpreter, and TuneModel measuring a model's kernels into the database that later
// compiles read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <regex>
#include <set>

#include "cache/tuning_db.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/driver/tuning.h"
#include "compiler/interp/interpreter.h"
#include "compiler/schedule/rules.h"
#include "compiler/schedule/schedule.h"
#include "compiler/tune/cost_model.h"
#include "tests/support/artifact.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using schedule::Trace;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(TraceTest, JsonRoundTripsAndBadTextIsNamed) {
  Trace trace{"matmul", {{"tile_rows", 4}, {"block_depth", 128}}};
  // Canonical JSON (keys sorted, no spaces), as the tuning database stores it.
  EXPECT_EQ(trace.ToJson(), R"({"decisions":[{"knob":"tile_rows","value":4},)"
                            R"({"knob":"block_depth","value":128}],"rule":"matmul"})");
  absl::StatusOr<Trace> parsed = schedule::ParseTrace(trace.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, trace);
  EXPECT_EQ(parsed->Get("block_depth", 0), 128);
  EXPECT_EQ(parsed->Get("group_tiles", 32), 32);
  EXPECT_THAT(schedule::ParseTrace("{").status().message(), HasSubstr("is not JSON"));
  EXPECT_THAT(schedule::ParseTrace(R"({"decisions":[]})").status().message(),
              HasSubstr("no \"rule\""));
  EXPECT_THAT(schedule::ParseTrace(R"({"rule":"matmul","decisions":[{"knob":"x","value":"big"}]})")
                  .status()
                  .message(),
              HasSubstr("not {\"knob\": string, \"value\": integer}"));
}

TEST(TraceTest, ASpaceContainsExactlyTracesOfItsChoices) {
  schedule::SearchSpace space = schedule::MatmulSpace(*ir::ParseTarget("x86_64-v3"));
  EXPECT_EQ(space.rule, "matmul");
  EXPECT_GT(space.Size(), 100);
  Trace trace = space.Default();
  EXPECT_EQ(trace.Get("tile_rows", 0), 6);  // AVX2: 16 registers, 6 x 2 accumulators
  EXPECT_TRUE(space.Contains(trace));
  trace.decisions[0].value = 7;  // not a choice
  EXPECT_FALSE(space.Contains(trace));
  trace = space.Default();
  trace.rule = "conv";
  EXPECT_FALSE(space.Contains(trace));
  trace = space.Default();
  trace.decisions.pop_back();
  EXPECT_FALSE(space.Contains(trace));
  EXPECT_EQ(schedule::MatmulSpace(*ir::ParseTarget("x86_64-v4")).Default().Get("tile_rows", 0), 14);
}

// With a constant row count M, the default register tile is no taller than needed: fewer rows
// (at least half as many) where that wastes less of the last tile. 16 rows in tiles of 14
// computed 28; a 1x1 conv of 32 -> 16 channels on 112 x 112 ran 0.67x the time in two tiles of
// 8, one of 144 -> 32 on 28 x 28 0.84x in three of 11 (bench/RESULTS.md, nineteenth round).
TEST(TraceTest, DefaultTileRowsWasteLeastOfAConstantM) {
  ir::Target v4 = *ir::ParseTarget("x86_64-v4"), v3 = *ir::ParseTarget("x86_64-v3");
  const std::vector<std::pair<int64_t, int64_t>> rows_for_m = {
      {16, 8}, {24, 12}, {32, 11}, {64, 13}, {96, 14}, {144, 12}, {1280, 14}, {1, 7}};
  for (auto [m, rows] : rows_for_m) {
    EXPECT_EQ(schedule::DefaultTileRows(v4, m), rows) << "M = " << m;
    schedule::SearchSpace space = schedule::MatmulSpace(v4, false, false, m);
    EXPECT_EQ(space.Default().Get("tile_rows", 0), rows) << "M = " << m;
    EXPECT_EQ(space.Default().Get("pack_a", -1), rows > 8 ? 1 : 0) << "M = " << m;
  }
  EXPECT_EQ(schedule::DefaultTileRows(v4, std::nullopt), 14);  // a symbolic M
  EXPECT_EQ(schedule::DefaultTileRows(v3, 16), 6);             // 6 x 3 against 4 x 4: a tie
  EXPECT_EQ(schedule::DefaultTileRows(v3, 8), 4);
}

// A shallow product's task takes more columns by default, as many more as keep a block of B
// about 256 x 128 floats, up to 512: C's rows are then written in strips of 2 KiB, not 512
// bytes (a 1x1 conv of 16 -> 96 channels on 112 x 112 ran 0.73x the time; bench/RESULTS.md,
// twenty-third round). The other column counts stay choices, each once.
TEST(TraceTest, ShallowProductsTakeWiderColumnBlocksByDefault) {
  ir::Target v4 = *ir::ParseTarget("x86_64-v4");
  const std::vector<std::pair<int64_t, int64_t>> cols_for_k = {
      {1, 512}, {16, 512}, {64, 512}, {65, 256}, {96, 256}, {128, 256}, {129, 128}, {1024, 128}};
  for (auto [k, cols] : cols_for_k) {
    EXPECT_EQ(schedule::DefaultBlockCols(k), cols) << "K = " << k;
    schedule::SearchSpace space = schedule::MatmulSpace(v4, false, true, 96, k);
    EXPECT_EQ(space.Default().Get("block_cols", 0), cols) << "K = " << k;
    auto knob =
        std::ranges::find_if(space.knobs, [](const auto& kn) { return kn.name == "block_cols"; });
    ASSERT_NE(knob, space.knobs.end());
    std::vector<int64_t> choices = knob->choices;
    std::ranges::sort(choices);
    EXPECT_EQ(choices, (std::vector<int64_t>{64, 128, 256, 512})) << "K = " << k;
  }
  EXPECT_EQ(schedule::DefaultBlockCols(std::nullopt), 128);  // a symbolic K
  EXPECT_EQ(schedule::MatmulSpace(v4).Default().Get("block_cols", 0), 128);
}

// With 32 vector registers, a product of many rows (or a symbolic count) seeds the search with
// the default's tile at 3 and 4 vectors reading A in place; with 16 registers, few rows, or
// for a pointwise conv, nothing.
TEST(TraceTest, TallProductsSeedWideTilesReadingAInPlace) {
  ir::Target v4 = *ir::ParseTarget("x86_64-v4");
  for (std::optional<int64_t> rows : {std::optional<int64_t>(), std::optional<int64_t>(1024)}) {
    schedule::SearchSpace space = schedule::MatmulSpace(v4, false, false, rows, 1024);
    ASSERT_EQ(space.seeds.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const schedule::Trace& seed = space.seeds[i];
      SCOPED_TRACE(seed.ToJson());
      EXPECT_TRUE(space.Contains(seed));
      EXPECT_EQ(seed.Get("tile_vectors", 0), static_cast<int64_t>(3 + i));
      EXPECT_EQ(seed.Get("pack_a", 1), 0);
      for (const schedule::Decision& d : seed.decisions) {
        if (d.knob != "tile_vectors" && d.knob != "pack_a") {
          EXPECT_EQ(d.value, space.Default().Get(d.knob, -1)) << d.knob;
        }
      }
    }
  }
  EXPECT_TRUE(schedule::MatmulSpace(v4, false, false, 16, 1024).seeds.empty());
  EXPECT_TRUE(schedule::MatmulSpace(v4, false, /*reads_b_in_place=*/true, 1024, 64).seeds.empty());
  EXPECT_TRUE(schedule::MatmulSpace(*ir::ParseTarget("x86_64-v3")).seeds.empty());
}

TEST(CostModelTest, RidgeRegressionRanksByTheLearnedFunction) {
  // y = 3 + 2 a - b on a grid: the model must predict unseen points in the right order.
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (double a = 0; a < 4; ++a) {
    for (double b = 0; b < 4; ++b) {
      if (a == 2 && b == 1) continue;
      x.push_back({a, b});
      y.push_back(3 + 2 * a - b);
    }
  }
  tune::RidgeModel model(1e-6);
  model.Fit(x, y);
  EXPECT_NEAR(model.Predict({2, 1}), 6, 1e-3);
  EXPECT_LT(model.Predict({0, 3}), model.Predict({3, 0}));
}

TEST(CostModelTest, FeaturesHaveOneLengthPerSpaceSet) {
  schedule::SearchSpace matmul = schedule::MatmulSpace(*ir::ParseTarget("x86_64-v3"));
  schedule::SearchSpace library{"openblas", {}};
  std::vector<schedule::SearchSpace> spaces = {matmul, library};
  std::vector<double> a = tune::TraceFeatures(spaces, matmul.Default());
  std::vector<double> b = tune::TraceFeatures(spaces, library.Default());
  EXPECT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
}

// y = relu(a @ w + bias): a [n, 70] (n symbolic), w a constant [70, 45], so the tiles have
// edges in every dimension and the schedule packs w at compile time.
std::string MatmulModel(bool weights_constant) {
  testing::OnnxBuilder b;
  b.Input("a", {"n", 70});
  std::vector<float> w(70 * 45), bias(45);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37 % 101) - 50) / 50;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 7) - 3;
  if (weights_constant) {
    b.FloatInitializer("w", {70, 45}, w);
  } else {
    b.Input("w", {70, 45});
  }
  b.FloatInitializer("bias", {45}, bias);
  b.Node("MatMul", {"a", "w"}, {"p"});
  b.Node("Add", {"p", "bias"}, {"s"});
  b.Node("Relu", {"s"}, {"y"});
  b.Output("y", {"n", 45});
  return b.Serialize();
}

std::vector<schedule::TunableKernel> Tunable(const std::string& onnx, const ir::Target& target) {
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(onnx);
  EXPECT_TRUE(module.ok()) << module.status();
  ir::PassContext context;
  context.target = target;
  absl::StatusOr<ir::IRModule> fused =
      driver::RunPipeline(*std::move(module), nullptr, "fuse_ops", context);
  EXPECT_TRUE(fused.ok()) << fused.status();
  return fused.ok() ? schedule::TunableKernels(*fused, target)
                    : std::vector<schedule::TunableKernel>{};
}

TEST(WorkloadTest, EqualKernelsOfDifferentModelsShareAWorkload) {
  ir::Target target = *ir::ParseTarget("x86_64-v3");
  std::vector<schedule::TunableKernel> constant = Tunable(MatmulModel(true), target);
  std::vector<schedule::TunableKernel> input = Tunable(MatmulModel(false), target);
  ASSERT_EQ(constant.size(), 1u);
  ASSERT_EQ(input.size(), 1u);
  // The same product, but constant weights are packed at compile time: another workload.
  EXPECT_NE(constant[0].workload, input[0].workload);
  EXPECT_THAT(constant[0].workload, HasSubstr("constant parameters: 1"));
  // Renamed tensors and nodes: the same workload.
  std::string renamed = MatmulModel(true);
  for (auto [from, to] : {std::pair{"bias", "beta"}, std::pair{"\x01w", "\x01q"}}) {
    for (size_t at = renamed.find(from); at != std::string::npos; at = renamed.find(from, at)) {
      renamed.replace(at, std::string(from).size(), to);
    }
  }
  std::vector<schedule::TunableKernel> again = Tunable(renamed, target);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].workload, constant[0].workload);
}

class TuningDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln-tune-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
    absl::StatusOr<std::unique_ptr<cache::TuningDb>> db =
        cache::TuningDb::Open((dir_ / "kiln.db").string());
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Compiles `onnx` (MatmulModel) with the database and runs it on n = 13 rows against the
  // interpreter; returns the compile's report of tuned kernels.
  std::string ExpectCompiledMatchesInterpreter(const std::string& onnx, bool weights_input,
                                               const ir::Target& target, const std::string& what,
                                               std::vector<int64_t> rows = {13}) {
    driver::CompileOptions options;
    options.tuning_db = db_.get();
    std::string report;
    auto events = [&](const driver::CompileEvent& e) {
      if (e.name == "schedule") report = e.message;
    };
    absl::StatusOr<driver::Artifact> artifact = driver::CompileModel(onnx, target, options, events);
    EXPECT_TRUE(artifact.ok()) << what << ": " << artifact.status();
    if (!artifact.ok()) return report;
    std::unique_ptr<runtime::Model> model = testing::LoadArtifact(*artifact);
    if (!model) return report;
    for (int64_t n : rows) {
      std::vector<ir::NDArray> inputs = {testing::Iota({n, 70})};
      for (int64_t i = 0; i < n * 70; ++i) inputs[0].data<float>()[i] = std::sin(i);
      if (weights_input) inputs.push_back(testing::Iota({70, 45}));
      absl::StatusOr<ir::IRModule> module = driver::ImportModel(onnx);
      absl::StatusOr<std::vector<ir::NDArray>> want = interp::Run(*module, inputs);
      EXPECT_TRUE(want.ok()) << want.status();
      if (!want.ok()) return report;
      std::vector<ir::NDArray> got = testing::RunModel(
          *model, inputs, {ir::NDArray::Zeros(arith::DataType::Float(32), {n, 45})});
      testing::ExpectClose(got[0], (*want)[0], absl::StrCat(what, ", n = ", n));
    }
    return report;
  }

  void Put(const schedule::TunableKernel& kernel, const ir::Target& target, const Trace& trace,
           const std::string& compiler_version = driver::CompilerVersion(),
           const std::string& bucket = "") {
    cache::TuningRecord record;
    record.key = driver::TuningKeyOf(kernel.workload, target, bucket);
    record.trace_json = trace.ToJson();
    record.median_ns = 1;
    record.times_ns = {1};
    record.device = "test";
    record.compiler_version = compiler_version;
    ASSERT_TRUE(db_->Put(record).ok());
  }

  std::filesystem::path dir_;
  std::unique_ptr<cache::TuningDb> db_;
};

// The kernel text `onnx`'s tunable kernel gets from `trace`.
std::string ScheduledWith(const std::string& onnx, const ir::Target& target, const Trace& trace) {
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(onnx);
  ir::PassContext context;
  context.target = target;
  absl::StatusOr<ir::IRModule> fused =
      driver::RunPipeline(*std::move(module), nullptr, "fuse_ops", context);
  absl::StatusOr<ir::IRModule> scheduled = schedule::Schedule(
      *std::move(fused), target, [&](const schedule::TunableKernel&) { return trace; });
  EXPECT_TRUE(scheduled.ok()) << scheduled.status();
  std::string text;
  for (const auto& [name, func] : scheduled->prim_funcs) {
    if (!func.is_host) text += ir::ToString(func);
  }
  return text;
}

// Each choice of each knob, the others at their defaults, replayed from a tuning record: the
// kernel differs from the default one, the compile says it used the record, and the artifact
// computes what the interpreter does.
TEST_F(TuningDbTest, EveryMatmulKnobChoiceReplaysIntoACorrectArtifact) {
  ir::Target target = *ir::ParseTarget("x86_64-v3");
  for (bool constant : {true, false}) {
    const std::string onnx = MatmulModel(constant);
    std::vector<schedule::TunableKernel> kernels = Tunable(onnx, target);
    ASSERT_EQ(kernels.size(), 1u);
    const schedule::SearchSpace& space = kernels[0].spaces.front();
    const std::string default_text = ScheduledWith(onnx, target, space.Default());
    for (size_t k = 0; k < space.knobs.size(); ++k) {
      for (int64_t choice : space.knobs[k].choices) {
        Trace trace = space.Default();
        trace.decisions[k].value = choice;
        const std::string what = (constant ? "constant w, " : "w an input, ") + trace.ToJson();
        // Rows past what the registers hold with the default two vectors are cut to it
        // (schedule::MaxTileRows): the default tile again. Every other choice changes it.
        const bool cut = space.knobs[k].name == "tile_rows" &&
                         choice > schedule::MaxTileRows(target, 2) &&
                         space.knobs[k].choices.front() == schedule::MaxTileRows(target, 2);
        if (cut) {
          EXPECT_EQ(ScheduledWith(onnx, target, trace), default_text) << what;
        } else if (choice != space.knobs[k].choices.front()) {
          EXPECT_NE(ScheduledWith(onnx, target, trace), default_text) << what;
        }
        ASSERT_NO_FATAL_FAILURE(Put(kernels[0], target, trace));
        EXPECT_EQ(ExpectCompiledMatchesInterpreter(onnx, !constant, target, what),
                  "1 of 1 tunable kernels from tuning records")
            << what;
        ASSERT_TRUE(db_->Retire("none").ok());  // empties the database for the next choice
      }
    }
  }
}

// Row groups of 128 tiles: a tall product keeps fewer groups than with 64 (each packs its own
// copy of B's blocks), and a call still has two tasks or more, so a record timed on one thread
// leaves work for a second one.
TEST(MatmulGroupTilesTest, GroupsOf128TilesOnlyCapTheTilesOfAGroup) {
  ir::Target target = *ir::ParseTarget("x86_64-v3");  // 6-row tiles
  auto groups = [&](int64_t rows, int64_t group_tiles) {
    testing::OnnxBuilder b;
    b.Input("a", {rows, 70});
    b.Input("w", {70, 45});
    b.Node("MatMul", {"a", "w"}, {"y"});
    b.Output("y", {rows, 45});
    const std::string onnx = b.Serialize();
    std::vector<schedule::TunableKernel> kernels = Tunable(onnx, target);
    EXPECT_EQ(kernels.size(), 1u);
    if (kernels.size() != 1) return int64_t{-1};
    Trace trace = kernels[0].spaces.front().Default();
    for (schedule::Decision& d : trace.decisions) {
      if (d.knob == "group_tiles") d.value = group_tiles;
    }
    const std::string text = ScheduledWith(onnx, target, trace);
    std::smatch match;
    EXPECT_TRUE(std::regex_search(text, match, std::regex("let groups: i64 = (\\d+)"))) << text;
    return match.empty() ? int64_t{-1} : int64_t{std::stoi(match[1])};
  };
  // 1024 rows, 171 tiles, one column block.
  EXPECT_EQ(groups(1024, 64), 3);
  EXPECT_EQ(groups(1024, 128), 2);
  // 128 rows, 22 tiles: two groups either way.
  EXPECT_EQ(groups(128, 64), 2);
  EXPECT_EQ(groups(128, 128), 2);
}

TEST_F(TuningDbTest, RecordsOfAnotherCompilerOrTargetAreNotUsed) {
  ir::Target target = *ir::ParseTarget("x86_64-v3");
  const std::string onnx = MatmulModel(true);
  std::vector<schedule::TunableKernel> kernels = Tunable(onnx, target);
  ASSERT_EQ(kernels.size(), 1u);
  Trace trace = kernels[0].spaces.front().Default();
  trace.decisions[0].value = 4;
  Put(kernels[0], target, trace, "kiln-0.0.1");
  Put(kernels[0], *ir::ParseTarget("x86_64-v4"), trace);
  EXPECT_EQ(ExpectCompiledMatchesInterpreter(onnx, false, target, "other records"),
            "0 of 1 tunable kernels from tuning records");
}

// A model's weights are the distinct constants its kernels take: one used by two kernels
// counts once.
TEST(WeightBytesTest, CountsEachConstantTheKernelsTakeOnce) {
  testing::OnnxBuilder b;
  b.Input("a", {"n", 45});
  b.FloatInitializer("w", {45, 45}, std::vector<float>(45 * 45, 0.5f));
  b.Node("MatMul", {"a", "w"}, {"p"});
  b.Node("Relu", {"p"}, {"r"});
  b.Node("MatMul", {"r", "w"}, {"y"});
  b.Output("y", {"n", 45});
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(module.ok()) << module.status();
  ir::PassContext context;
  context.target = *ir::ParseTarget("x86_64-v3");
  absl::StatusOr<ir::IRModule> fused =
      driver::RunPipeline(*std::move(module), nullptr, "fuse_ops", context);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_EQ(schedule::TunableKernels(*fused, context.target).size(), 2u);
  EXPECT_EQ(tune::WeightBytes(*fused), 45 * 45 * 4);
}

// kAlternating evicts the weights before the first run and every other one after it, so the
// runs a measurement times (after its warm-ups) come in both states.
TEST(WeightCacheTest, AlternatingEvictsBeforeEveryOtherRun) {
  for (int run = 0; run < 6; ++run) {
    EXPECT_FALSE(tune::EvictsWeightsBefore(tune::WeightCache::kWarm, run)) << run;
    EXPECT_TRUE(tune::EvictsWeightsBefore(tune::WeightCache::kEvicted, run)) << run;
    EXPECT_EQ(tune::EvictsWeightsBefore(tune::WeightCache::kAlternating, run), run % 2 == 0) << run;
  }
  EXPECT_GT(tune::LastLevelCacheBytes(), 0);
}

// An evicted run loads the activations after evicting the weights, so that they are warm as
// in a model; a warm run only loads.
TEST(WeightCacheTest, ActivationsLoadAfterTheWeightsAreEvicted) {
  using tune::CacheStep;
  const std::vector<CacheStep> evicted = {CacheStep::kEvictWeights, CacheStep::kLoadActivations};
  const std::vector<CacheStep> warm = {CacheStep::kLoadActivations};
  EXPECT_EQ(tune::CacheStepsBefore(tune::WeightCache::kEvicted, 3), evicted);
  EXPECT_EQ(tune::CacheStepsBefore(tune::WeightCache::kWarm, 0), warm);
  EXPECT_EQ(tune::CacheStepsBefore(tune::WeightCache::kAlternating, 0), evicted);
  EXPECT_EQ(tune::CacheStepsBefore(tune::WeightCache::kAlternating, 1), warm);
}

// TuneModel measures the kernel, records its best schedule, and the next compile uses it; a
// second TuneModel finds the record and measures nothing.
TEST_F(TuningDbTest, TuneModelRecordsTheBestAndASecondTuneMeasuresNothing) {
  absl::StatusOr<ir::Target> host = driver::ResolveTarget("host");
  ASSERT_TRUE(host.ok()) << host.status();
  const std::string onnx = MatmulModel(true);
  driver::TuneModelOptions options;
  options.tune.trials_per_kernel = 6;
  options.tune.symbol_values = {{"n", 64}};
  options.tune.measure.warmup = 1;
  options.tune.measure.repeats = 3;
  options.tune.confirm_rounds = 2;
  std::vector<tune::TuneProgress> progress;
  std::vector<std::string> infos;
  auto events = [&](const driver::CompileEvent& e) {
    if (e.kind == driver::CompileEvent::Kind::kTuning) progress.push_back(e.tuning);
    if (e.kind == driver::CompileEvent::Kind::kInfo) infos.push_back(e.message);
  };
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(onnx, *host, {}, options, *db_, events);
  ASSERT_TRUE(summary.ok()) << summary.status();
  // w and bias, fused into the one kernel.
  EXPECT_EQ(summary->weight_bytes, (70 * 45 + 45) * 4);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_THAT(infos[0], ::testing::StartsWith("timing kernels with the model's 0.0 MiB of weights "
                                              "evicted from the caches before every other run"));
  EXPECT_EQ(summary->kernels, 1);
  EXPECT_EQ(summary->already_tuned, 0);
  ASSERT_EQ(summary->results.size(), 1u);
  const tune::TuneResult& result = summary->results[0];
  EXPECT_EQ(summary->trials, 6);
  EXPECT_EQ(result.failed, 0);
  EXPECT_TRUE(result.default_measurement.ok);
  EXPECT_LE(result.best_measurement.median_ns, result.default_measurement.median_ns);
  // The fastest trials and the default ran again in turns; the times kept are from that.
  EXPECT_EQ(result.best_measurement.times_ns.size(), 2u * 3);
  EXPECT_EQ(result.default_measurement.times_ns.size(), 2u * 3);
  // Multiply-adds and the bias add; relu is a select, no arithmetic.
  EXPECT_DOUBLE_EQ(result.flops, 2.0 * 64 * 70 * 45 + 64 * 45);
  ASSERT_EQ(progress.size(), 6u);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].trials_done, static_cast<int>(i + 1));
    EXPECT_EQ(progress[i].trials_budget, 6);
    EXPECT_GT(progress[i].best_gflops, 0);
  }

  absl::StatusOr<cache::TuningStats> stats = db_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->records, 1);
  absl::StatusOr<std::optional<cache::TuningRecord>> best =
      db_->Best(driver::TuningKeyOf(result.kernel.workload, *host), driver::CompilerVersion());
  ASSERT_TRUE(best.ok() && *best);
  EXPECT_EQ((*best)->trace_json, result.best.ToJson());
  EXPECT_EQ((*best)->median_ns, result.best_measurement.median_ns);
  EXPECT_EQ((*best)->device, driver::HostDeviceName());

  EXPECT_EQ(ExpectCompiledMatchesInterpreter(onnx, false, *host, "tuned"),
            "1 of 1 tunable kernels from tuning records");

  progress.clear();
  infos.clear();
  summary = driver::TuneModel(onnx, *host, {}, options, *db_, events);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->already_tuned, 1);
  EXPECT_EQ(summary->trials, 0);
  EXPECT_TRUE(summary->results.empty());
  EXPECT_TRUE(progress.empty());
  EXPECT_TRUE(infos.empty());  // nothing timed, so nothing to say about how
}

// The search measures the default first and the space's seeds right after it.
TEST_F(TuningDbTest, TheSeedsRunRightAfterTheDefault) {
  absl::StatusOr<ir::Target> host = driver::ResolveTarget("host");
  ASSERT_TRUE(host.ok()) << host.status();
  if (host->VectorRegisters() < 32) GTEST_SKIP() << "the matmul space seeds only with 32 registers";
  driver::TuneModelOptions options;
  options.tune.trials_per_kernel = 4;
  options.tune.symbol_values = {{"n", 256}};
  options.tune.measure.warmup = 1;
  options.tune.measure.repeats = 2;
  options.tune.confirm_rounds = 0;
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(MatmulModel(false), *host, {}, options, *db_, nullptr);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->results.size(), 1u);
  const tune::TuneResult& result = summary->results[0];
  ASSERT_FALSE(result.kernel.spaces.empty());
  const schedule::SearchSpace& space = result.kernel.spaces.front();
  ASSERT_EQ(space.seeds.size(), 2u);
  ASSERT_EQ(result.tried.size(), 4u);
  EXPECT_EQ(result.tried[0], space.Default());
  EXPECT_EQ(result.tried[1], space.seeds[0]);
  EXPECT_EQ(result.tried[2], space.seeds[1]);
  EXPECT_EQ(result.failed, 0) << ::testing::PrintToString(result.failures);
}

// Candidates that run away are failed trials, each reported with its trace and why; a kernel
// none of whose candidates ran keeps no record.
TEST_F(TuningDbTest, EveryFailedTrialIsReportedWithItsTrace) {
  absl::StatusOr<ir::Target> host = driver::ResolveTarget("host");
  ASSERT_TRUE(host.ok()) << host.status();
  driver::TuneModelOptions options;
  options.tune.trials_per_kernel = 3;
  options.tune.symbol_values = {{"n", 64}};
  // The reference runs the kernel once; each candidate is timed a billion times and is killed
  // at its timeout (at least 4x the reference's compile and run).
  options.tune.measure.repeats = 1 << 30;
  options.tune.measure.timeout = std::chrono::milliseconds(100);
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(MatmulModel(true), *host, {}, options, *db_, nullptr);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->results.size(), 1u);
  const tune::TuneResult& result = summary->results[0];
  EXPECT_EQ(summary->trials, 3);
  EXPECT_EQ(summary->failed_trials, 3);
  EXPECT_EQ(result.failed, 3);
  EXPECT_FALSE(result.best_measurement.ok);
  ASSERT_EQ(result.failures.size(), 3u);
  std::set<std::string> traces;
  for (const std::string& failure : result.failures) {
    EXPECT_THAT(failure, ::testing::HasSubstr("timed out after")) << failure;
    const std::string trace_json = failure.substr(0, failure.find("}: ") + 1);
    EXPECT_TRUE(schedule::ParseTrace(trace_json).ok()) << failure;
    traces.insert(trace_json);
  }
  EXPECT_EQ(traces.size(), 3u) << "each failure names its own candidate";
  EXPECT_EQ(result.failures[0].substr(0, result.failures[0].find("}: ") + 1),
            result.kernel.spaces.front().Default().ToJson());
  EXPECT_EQ(db_->Stats()->records, 0);
}

// The kernel of `onnx` scheduled with the database's records, as text.
std::string ScheduledFromRecords(const std::string& onnx, const ir::Target& target,
                                 cache::TuningDb& db) {
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(onnx);
  ir::PassContext context;
  context.target = target;
  context.tuned_traces = [&](const std::string& workload) {
    return driver::TunedTraces(db, workload, target);
  };
  absl::StatusOr<ir::IRModule> scheduled =
      driver::RunPipeline(*std::move(module), nullptr, "schedule", context);
  EXPECT_TRUE(scheduled.ok()) << scheduled.status();
  EXPECT_EQ(context.tuned_kernels, 1);
  std::string text;
  for (const auto& [name, func] : scheduled->prim_funcs) {
    if (!func.is_host) text += ir::ToString(func);
  }
  return text;
}

// Records for buckets n <= 4 and n <= 16 and one for all n: the kernel dispatches on n, and
// rows in each bucket and past them compute what the interpreter does.
TEST_F(TuningDbTest, BucketRecordsBecomeSpecializationsDispatchedOnTheSymbol) {
  ir::Target target = *ir::ParseTarget("x86_64-v3");
  for (bool constant : {true, false}) {
    const std::string onnx = MatmulModel(constant);
    std::vector<schedule::TunableKernel> kernels = Tunable(onnx, target);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0].bucket_symbol, "n");
    const schedule::SearchSpace& space = kernels[0].spaces.front();
    Trace small = space.Default(), medium = space.Default(), rest = space.Default();
    small.decisions[0].value = 2;  // tile_rows
    medium.decisions[0].value = 4;
    rest.decisions[2].value = 64;  // block_depth
    Put(kernels[0], target, small, driver::CompilerVersion(), "4");
    Put(kernels[0], target, medium, driver::CompilerVersion(), "16");
    Put(kernels[0], target, rest);
    const std::string text = ScheduledFromRecords(onnx, target, *db_);
    EXPECT_THAT(text, HasSubstr("if n <= 4 {"));
    EXPECT_THAT(text, HasSubstr("if n <= 16 {"));
    EXPECT_LT(text.find("if n <= 4 {"), text.find("if n <= 16 {"));
    EXPECT_EQ(ExpectCompiledMatchesInterpreter(onnx, !constant, target, "buckets",
                                               {1, 3, 4, 5, 16, 17, 40}),
              "1 of 1 tunable kernels from tuning records");
    ASSERT_TRUE(db_->Retire("none").ok());
  }
}

// A bucket whose schedule packs the weights another way than the fallback cannot share the
// kernel's packed parameter: it is left out, and the kernel stays correct.
TEST_F(TuningDbTest, ABucketPackingWeightsOtherwiseIsLeftOut) {
  ir::Target target = *ir::ParseTarget("x86_64-v3");
  const std::string onnx = MatmulModel(true);
  std::vector<schedule::TunableKernel> kernels = Tunable(onnx, target);
  ASSERT_EQ(kernels.size(), 1u);
  Trace narrow = kernels[0].spaces.front().Default();
  narrow.decisions[1].value = 1;  // tile_vectors: panels of 8 columns instead of 16
  Put(kernels[0], target, narrow, driver::CompilerVersion(), "8");
  EXPECT_THAT(ScheduledFromRecords(onnx, target, *db_), Not(HasSubstr("if n <= 8 {")));
  EXPECT_EQ(ExpectCompiledMatchesInterpreter(onnx, false, target, "left out", {5, 20}),
            "1 of 1 tunable kernels from tuning records");
}

// TuneModel with buckets: a record per bucket value, used up to it; the next TuneModel
// measures nothing.
TEST_F(TuningDbTest, TuneModelTunesEachBucket) {
  absl::StatusOr<ir::Target> host = driver::ResolveTarget("host");
  ASSERT_TRUE(host.ok()) << host.status();
  const std::string onnx = MatmulModel(false);
  driver::TuneModelOptions options;
  options.tune.trials_per_kernel = 3;
  options.tune.bucket_values = {8, 32};
  options.tune.measure.warmup = 1;
  options.tune.measure.repeats = 3;
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(onnx, *host, {}, options, *db_, nullptr);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->results.size(), 2u);
  EXPECT_EQ(summary->results[0].bucket, "8");
  EXPECT_EQ(summary->results[1].bucket, "32");
  // The flops follow the bucket's value of n.
  EXPECT_DOUBLE_EQ(summary->results[0].flops * 4, summary->results[1].flops);
  const std::string workload = summary->results[0].kernel.workload;
  std::map<std::string, std::string> traces = driver::TunedTraces(*db_, workload, *host);
  EXPECT_EQ(traces.size(), 2u);
  EXPECT_TRUE(traces.count("8") && traces.count("32"));
  summary = driver::TuneModel(onnx, *host, {}, options, *db_, nullptr);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->kernels, 2);
  EXPECT_EQ(summary->already_tuned, 2);
  EXPECT_EQ(summary->trials, 0);
}

// Automatic buckets: the powers of two up to the symbol's bound, and the bound.
TEST_F(TuningDbTest, AutomaticBucketsArePowersOfTwoUpToTheBound) {
  absl::StatusOr<ir::Target> host = driver::ResolveTarget("host");
  ASSERT_TRUE(host.ok()) << host.status();
  driver::CompileOptions compile;
  compile.dim_bounds = {{"n", 6}};
  driver::TuneModelOptions options;
  options.tune.trials_per_kernel = 1;
  options.tune.auto_buckets = true;
  options.tune.measure.warmup = 0;
  options.tune.measure.repeats = 1;
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(MatmulModel(false), *host, compile, options, *db_, nullptr);
  ASSERT_TRUE(summary.ok()) << summary.status();
  std::vector<std::string> buckets;
  for (const tune::TuneResult& r : summary->results) buckets.push_back(r.bucket);
  EXPECT_EQ(buckets, (std::vector<std::string>{"1", "2", "4", "6"}));
}

TEST_F(TuningDbTest, TuningATargetThisMachineCannotRunIsAnError) {
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(MatmulModel(true), *ir::ParseTarget("aarch64"), {}, {}, *db_, nullptr);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(summary.status().message(), HasSubstr("cannot be tuned here"));
}

}  // namespace
}  // namespace kiln
