// For tests of the schedule rules: a model's scheduled kernels as text, the model compiled
// for a target (with its default schedules or with one trace for every tunable kernel) and run
// on a chosen number of threads, to compare with the reference interpreter; random inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/codegen.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/manifest.h"
#include "compiler/driver/pipeline.h"
#include "compiler/ir/verifier.h"
#include "compiler/schedule/schedule.h"
#include "tests/support/artifact.h"

namespace kiln::testing {

// The x86-64 presets the schedule tests compile for and run: the baseline, AVX2 and, where
// this machine runs AVX-512 (its kernels would stop on an illegal instruction elsewhere),
// x86_64-v4 with 512-bit vectors and 32 registers, which the rules tile differently.
inline std::vector<std::string> CpuTestTargets() {
  std::vector<std::string> targets = {"x86_64", "x86_64-v3"};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    targets.push_back("x86_64-v4");
  }
  return targets;
}

// The whole pipeline's kernels for `target`, printed.
inline std::string ScheduledKernels(const std::string& onnx, const std::string& target) {
  auto m = driver::ImportModel(onnx);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  ir::Target t = *ir::ParseTarget(target);
  auto lowered = driver::RunPipeline(*std::move(m), nullptr, "", &t);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  return lowered.ok() ? ir::ToString(*lowered) : "";
}

// The whole pipeline's module for `target` as LLVM IR text, after LLVM's optimizations.
inline std::string KernelsLLVMText(const std::string& onnx, const std::string& target) {
  auto m = driver::ImportModel(onnx);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  ir::Target t = *ir::ParseTarget(target);
  auto lowered = driver::RunPipeline(*std::move(m), nullptr, "", &t);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  if (!lowered.ok()) return "";
  auto text = codegen::EmitLLVMText(*lowered, "", t);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// A one-output f32 model compiled for a target and loaded.
class Compiled {
 public:
  Compiled(const std::string& onnx, const std::string& target)
      : model_(CompileAndLoad(onnx, target)) {}

  // Runs on `threads` threads; one output of `out_shape`.
  ir::NDArray Run(std::vector<ir::NDArray> inputs, std::vector<int64_t> out_shape, int threads) {
    ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(out_shape));
    if (!model_) return out;
    std::string error;
    EXPECT_TRUE(model_->SetNumThreads(threads, &error)) << error;
    return RunModel(*model_, std::move(inputs), {std::move(out)})[0];
  }

 private:
  std::unique_ptr<runtime::Model> model_;
};

// Expects `actual` to equal `expected` within 1e-4 relative to max(1, |expected|): the
// interpreter sums in f64 in loop order, compiled kernels in f32 (with FMA, which rounds once
// instead of twice). Reports the first five bad elements.
inline void ExpectClose(const ir::NDArray& actual, const ir::NDArray& expected,
                        const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  int bad = 0;
  for (int64_t i = 0; i < expected.num_elements() && bad < 5; ++i) {
    double a = actual.GetDouble(i), e = expected.GetDouble(i);
    if (std::fabs(a - e) > 1e-4 * std::max(1.0, std::fabs(e))) {
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e;
      ++bad;
    }
  }
}

// The model after fusion: its kernels as the schedule pass gets them.
inline ir::IRModule Fused(const std::string& onnx, const ir::Target& target) {
  auto module = driver::ImportModel(onnx);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  auto fused = driver::RunPipeline(*std::move(module), nullptr, "fuse_ops", &target);
  EXPECT_TRUE(fused.ok()) << fused.status();
  return fused.ok() ? *std::move(fused) : ir::IRModule{};
}

// `count` floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> RandomValues(int64_t count, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(count);
  for (float& f : v) f = dist(rng);
  return v;
}

// An f32 array of `shape` filled with RandomValues.
inline ir::NDArray RandomArray(std::vector<int64_t> shape, int seed) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  std::vector<float> v = RandomValues(a.num_elements(), seed);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.SetDouble(i, v[i]);
  return a;
}

inline ir::Target ResolvedTarget(const std::string& name) {
  auto target = driver::ResolveTarget(name);
  EXPECT_TRUE(target.ok()) << target.status();
  return target.ok() ? *target : ir::Target{};
}

// A model compiled with every tunable kernel built by one trace (nullopt: the default
// schedules): the kernels as scheduled, and the artifact loaded.
struct TracedModel {
  std::string kernels;
  std::unique_ptr<runtime::Model> model;
};

inline TracedModel CompileWithTrace(const std::string& onnx, const ir::Target& target,
                                    const std::optional<schedule::Trace>& trace) {
  TracedModel out;
  auto imported = driver::ImportModel(onnx);
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (!imported.ok()) return out;
  const ir::Function main = imported->functions.at("main");
  ir::IRModule module = *std::move(imported);
  ir::PassContext context;
  context.target = target;
  auto choose = [&](const schedule::TunableKernel&) { return trace; };
  for (const driver::Pass& pass : driver::Pipeline()) {
    auto next = pass.name == "schedule" ? schedule::Schedule(std::move(module), target, choose)
                                        : pass.run(std::move(module), context);
    EXPECT_TRUE(next.ok()) << pass.name << ": " << next.status();
    if (!next.ok()) return out;
    module = *std::move(next);
    absl::Status verified = ir::VerifyModule(module);
    EXPECT_TRUE(verified.ok()) << pass.name << ": " << verified;
    if (pass.name == "schedule") out.kernels = ir::ToString(module);
  }
  auto so = codegen::BuildSharedObject(module, driver::SignatureText(main), target);
  EXPECT_TRUE(so.ok()) << so.status();
  if (!so.ok()) return out;
  driver::Artifact artifact;
  artifact.bytes = *std::move(so);
  out.model = LoadArtifact(artifact);
  return out;
}

}  // namespace kiln::testing
