// The tuner's measurement harness: a kernel compiled with the JIT, checked against a
// reference and timed, and a candidate that computes wrong values, crashes or never ends
// reported as a failed measurement while the test process carries on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/jit.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/ir/parser.h"
#include "compiler/tune/host_buffer.h"
#include "compiler/tune/measure.h"
#include "tests/support/onnx_builder.h"

namespace kiln::tune {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

ir::IRModule Parse(const std::string& text) {
  absl::StatusOr<ir::IRModule> module = ir::ParseModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? *std::move(module) : ir::IRModule{};
}

// `B = A * 2` over n elements, and variants of its body.
ir::IRModule Scale(const std::string& body) {
  return Parse(
      "prim_func @scale(A: f32[n], B: f32[n], n: i64) {\n  for i in range(0, n) serial {\n" + body +
      "\n  }\n}\n");
}
const char kScale[] = "    B[i] = A[i] * 2.0";

// [n, 64] x [64, 32] through the real pipeline up to scheduling, for the x86_64 preset.
ir::IRModule ScheduledMatmul(std::string* kernel) {
  kiln::testing::OnnxBuilder b;
  b.Input("a", {"n", 64});
  b.Input("w", {64, 32});
  b.Node("MatMul", {"a", "w"}, {"y"});
  b.Output("y", {"n", 32});
  absl::StatusOr<ir::IRModule> imported = driver::ImportModel(b.Serialize());
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (!imported.ok()) return {};
  ir::Target target = *ir::ParseTarget("x86_64");
  absl::StatusOr<ir::IRModule> scheduled =
      driver::RunPipeline(*std::move(imported), nullptr, "schedule", &target);
  EXPECT_TRUE(scheduled.ok()) << scheduled.status();
  if (!scheduled.ok()) return {};
  for (const auto& [name, func] : scheduled->prim_funcs) {
    if (!func.is_host && name.rfind("matmul", 0) == 0) *kernel = name;
  }
  EXPECT_FALSE(kernel->empty()) << ir::ToString(*scheduled);
  return *std::move(scheduled);
}

TEST(MeasureTest, AMatmulKernelMatchesItselfAndIsTimed) {
  std::string kernel;
  ir::IRModule module = ScheduledMatmul(&kernel);
  ASSERT_FALSE(kernel.empty());
  MeasureOptions options;
  options.warmup = 1;
  options.repeats = 7;
  for (bool isolated : {false, true}) {
    absl::StatusOr<Measurement> m =
        isolated ? MeasureKernelIsolated(module, module, kernel, {{"n", 48}}, options)
                 : MeasureKernel(module, module, kernel, {{"n", 48}}, options);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(m->ok) << m->failure;
    EXPECT_EQ(m->times_ns.size(), 7u);
    EXPECT_GT(m->median_ns, 0);
    EXPECT_GT(m->min_ns, 0);
    EXPECT_LE(m->min_ns, m->median_ns);
  }
}

// A target with threads=2: the matmul's parallel task loop runs on the runtime's pool of two
// threads, for the check and the timed runs, and still matches the reference.
TEST(MeasureTest, ATargetsThreadsRunTheParallelLoops) {
  std::string kernel;
  ir::IRModule module = ScheduledMatmul(&kernel);
  ASSERT_THAT(ir::ToString(module), HasSubstr("parallel"));
  MeasureOptions options;
  options.target = *ir::ParseTarget("triple=x86_64-unknown-linux-gnu;cpu=x86-64;threads=2");
  absl::StatusOr<Measurement> m =
      MeasureKernelIsolated(module, module, kernel, {{"n", 700}}, options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->ok) << m->failure;
  EXPECT_EQ(m->times_ns.size(), 5u);
}

TEST(MeasureTest, AWrongCandidateIsAMismatchNamingTheBuffer) {
  absl::StatusOr<Measurement> m = MeasureKernelIsolated(
      Scale("    B[i] = A[i] * 3.0"), Scale(kScale), "scale", {{"n", 100}}, MeasureOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->ok);
  EXPECT_THAT(m->failure, StartsWith("buffer B differs at element 0: "));
  EXPECT_TRUE(m->times_ns.empty());
}

// Sums in another order err in proportion to the terms, so an output that cancelled may
// differ from the reference by more than a relative bound allows: the tolerance grows with
// the buffer's largest magnitude. A candidate off by an amount small beside the buffer's
// values passes; one off by 1e-3 of them is still caught.
TEST(MeasureTest, TheToleranceScalesWithTheBuffersMagnitude) {
  EXPECT_TRUE(FloatsAgree(0.0056944, 0.0057078, 1.0));  // GPT's LM head, K = 512
  EXPECT_FALSE(FloatsAgree(0.0056944, 0.0057078, 0.0));
  EXPECT_FALSE(FloatsAgree(0.0067078, 0.0057078, 1.0));
  EXPECT_TRUE(FloatsAgree(INFINITY, INFINITY, 1.0));
  EXPECT_FALSE(FloatsAgree(-INFINITY, INFINITY, 1.0));
  EXPECT_TRUE(FloatsAgree(NAN, NAN, 1.0));
  EXPECT_FALSE(FloatsAgree(NAN, 0.0, 1.0));
  EXPECT_FALSE(FloatsAgree(0.0, NAN, 1.0));

  ir::IRModule reference = Scale(kScale);  // B = A * 2, A in [-1, 1]
  absl::StatusOr<Measurement> m = MeasureKernelIsolated(Scale("    B[i] = A[i] * 2.0 + 0.00005"),
                                                        reference, "scale", {{"n", 100}}, {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->ok) << m->failure;
  m = MeasureKernelIsolated(Scale("    B[i] = A[i] * 2.0 + 0.001"), reference, "scale",
                            {{"n", 100}}, {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->failure, StartsWith("buffer B differs at element 0: "));
}

// The reference run once (in a child) and handed to each measurement: a right candidate
// passes, a wrong one is caught, as when the reference runs with every candidate.
TEST(MeasureTest, AReferenceRunOnceChecksEveryCandidate) {
  ir::IRModule reference = Scale(kScale);
  absl::StatusOr<ReferenceResult> expected =
      RunReferenceIsolated(reference, "scale", {{"n", 100}}, MeasureOptions{});
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->buffers.size(), 2u);
  EXPECT_EQ(expected->buffers[1].size(), 100 * sizeof(float));
  float a0, b0;
  std::memcpy(&a0, expected->buffers[0].data(), 4);
  std::memcpy(&b0, expected->buffers[1].data(), 4);
  EXPECT_EQ(b0, a0 * 2);
  absl::StatusOr<Measurement> m = MeasureKernelIsolated(Scale("    B[i] = A[i] + A[i]"), reference,
                                                        "scale", {{"n", 100}}, {}, &*expected);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->ok) << m->failure;
  m = MeasureKernelIsolated(Scale("    B[i] = A[i] * 3.0"), reference, "scale", {{"n", 100}}, {},
                            &*expected);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->failure, StartsWith("buffer B differs at element 0: "));
  // A reference that crashes is an error, not a measurement.
  absl::StatusOr<ReferenceResult> crashed = RunReferenceIsolated(
      Scale("    B[i * 1099511627776] = A[i]"), "scale", {{"n", 100}}, MeasureOptions{});
  EXPECT_EQ(crashed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(crashed.status().message(), HasSubstr("killed by signal"));
}

TEST(MeasureTest, ACrashingCandidateIsContained) {
  // Element i * 2^40 of B lies terabytes away from it.
  absl::StatusOr<Measurement> m =
      MeasureKernelIsolated(Scale("    B[i * 1099511627776] = A[i]"), Scale(kScale), "scale",
                            {{"n", 100}}, MeasureOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->ok);
  EXPECT_THAT(m->failure, HasSubstr("killed by signal"));
}

TEST(MeasureTest, ACandidateThatNeverEndsIsKilledAfterTheTimeout) {
  MeasureOptions options;
  options.timeout = std::chrono::seconds(1);
  absl::StatusOr<Measurement> m = MeasureKernelIsolated(
      Scale("    for j in range(0, 1000000000000000) serial {\n      B[i] = B[i] + A[i]\n    }"),
      Scale(kScale), "scale", {{"n", 100}}, options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->ok);
  EXPECT_THAT(m->failure, HasSubstr("timed out after 1 s"));
}

// A candidate slow to compile (5000 sums unrolled: seconds of LLVM) is not a runaway: the timeout
// starts once it has compiled, and only compile_timeout bounds the compile.
TEST(MeasureTest, CompilingIsBoundedByTheCompileTimeoutOnly) {
  const ir::IRModule slow =
      Scale("    for j in range(0, 5000) unrolled {\n      B[i] = B[i] * 0.5 + A[i]\n    }");
  MeasureOptions options;
  options.compile_timeout = std::chrono::milliseconds(1);
  absl::StatusOr<Measurement> m = MeasureKernelIsolated(slow, slow, "scale", {{"n", 100}}, options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->ok);
  EXPECT_THAT(m->failure, HasSubstr("did not compile within 0.001 s"));

  options.compile_timeout = std::chrono::minutes(2);
  options.timeout = std::chrono::seconds(1);
  const auto start = std::chrono::steady_clock::now();
  m = MeasureKernelIsolated(slow, slow, "scale", {{"n", 100}}, options);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->ok) << m->failure;
  // Otherwise the test shows nothing: the compile alone must outlast the timeout.
  EXPECT_GT(took, 2 * options.timeout) << "compile the slow kernel longer";
}

// Candidates compared in turns: each gets rounds * repeats times, a candidate doing a thousand
// times the work compares slower, and a crash (all candidates run in one child) is an error
// rather than a measurement.
TEST(MeasureTest, CandidatesComparedInTurnsEachGetEveryRoundsTimes) {
  MeasureOptions options;
  options.warmup = 1;
  options.repeats = 4;
  const std::vector<ir::IRModule> candidates = {
      Scale(kScale),
      Scale("    for j in range(0, 1000) serial {\n      B[i] = A[i] * 2.0 + B[i] * 0.0\n    }")};
  for (bool isolated : {false, true}) {
    absl::StatusOr<std::vector<Measurement>> compared =
        isolated ? CompareKernelsIsolated(candidates, "scale", {{"n", 1000}}, options, 3)
                 : CompareKernels(candidates, "scale", {{"n", 1000}}, options, 3);
    ASSERT_TRUE(compared.ok()) << compared.status();
    ASSERT_EQ(compared->size(), 2u);
    for (const Measurement& m : *compared) {
      EXPECT_TRUE(m.ok) << m.failure;
      EXPECT_EQ(m.times_ns.size(), 12u);
      EXPECT_LE(m.min_ns, m.median_ns);
    }
    EXPECT_LT((*compared)[0].median_ns, (*compared)[1].median_ns);
  }
  absl::StatusOr<std::vector<Measurement>> crashed = CompareKernelsIsolated(
      {Scale(kScale), Scale("    B[i * 1099511627776] = A[i]")}, "scale", {{"n", 100}}, options, 2);
  EXPECT_EQ(crashed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(crashed.status().message(), HasSubstr("killed by signal"));
  EXPECT_THAT(crashed.status().message(), HasSubstr("kernel scale"));
}

// The runtime's tensors and an artifact's constants start on a 64-byte line; a kernel measured
// on buffers that do not would split its vector accesses across lines.
TEST(MeasureTest, BuffersStartOnA64ByteLine) {
  for (int64_t elements : {1, 3, 1000, 100000, 1000003}) {
    HostBuffer buffer{"b", arith::DataType::Float(32), elements};
    ASSERT_TRUE(buffer.Allocate());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 64, 0u) << elements;
    EXPECT_GE(buffer.bytes, static_cast<size_t>(elements * 4));
    EXPECT_EQ(buffer.bytes % 64, 0u);
    const char* bytes = static_cast<const char*>(buffer.data());
    EXPECT_EQ(std::count(bytes, bytes + buffer.bytes, 0), static_cast<long>(buffer.bytes));
  }
}

TEST(MeasureTest, BadRequestsAreErrors) {
  ir::IRModule scale = Scale(kScale);
  absl::StatusOr<Measurement> m = MeasureKernelIsolated(scale, scale, "scale", {}, {});
  EXPECT_THAT(m.status().message(), HasSubstr("no value for scalar n"));
  m = MeasureKernel(scale, scale, "nope", {{"n", 4}}, {});
  EXPECT_THAT(m.status().message(), HasSubstr("no kernel named nope"));
  MeasureOptions options;
  options.target = *ir::ParseTarget("aarch64");
  m = MeasureKernel(scale, scale, "scale", {{"n", 4}}, options);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("target aarch64"));
}

TEST(JitTest, RunsAKernelThroughItsEntry) {
  ir::IRModule scale = Scale(kScale);
  absl::StatusOr<std::unique_ptr<codegen::JitKernel>> jit =
      codegen::JitCompileKernel(scale, "scale", *ir::ParseTarget("x86_64"));
  ASSERT_TRUE(jit.ok()) << jit.status();
  float a[3] = {1, 2, 3}, b[3] = {0, 0, 0};
  void* buffers[] = {a, b};
  int64_t scalars[] = {3};
  KilnEnv env{};
  (*jit)->Run(&env, buffers, scalars);
  EXPECT_EQ(b[0], 2);
  EXPECT_EQ(b[2], 6);
}

}  // namespace
}  // namespace kiln::tune
