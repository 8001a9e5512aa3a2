// For tests of the schedule rules: a model's scheduled kernels as text, and the model compiled
// for a target and run on a chosen number of threads, to compare with the reference
// interpreter.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "tests/support/artifact.h"

namespace kiln::testing {

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

}  // namespace kiln::testing
