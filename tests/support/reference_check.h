// For tests of compiled kernels: runs a model through the reference interpreter and through
// an x86_64 artifact compiled from it, on the same inputs, and compares the outputs element
// by element (the interpreter is the oracle; see DESIGN.md).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/artifact.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"

namespace kiln::testing {

// Expects the compiled artifact's outputs to equal the reference interpreter's within
// `tolerance` (absolute plus relative); returns the reference outputs for further checks.
inline std::vector<ir::NDArray> ExpectCompiledMatchesReference(const std::string& model,
                                                               std::vector<ir::NDArray> inputs,
                                                               double tolerance = 1e-5) {
  auto module = driver::ImportModel(model);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  auto want = interp::Run(*module, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!want.ok()) return {};
  std::unique_ptr<runtime::Model> loaded = CompileAndLoad(model);
  if (!loaded) return {};
  std::vector<ir::NDArray> got;
  for (const ir::NDArray& w : *want) got.push_back(ir::NDArray::Zeros(w.dtype, w.shape));
  got = RunModel(*loaded, std::move(inputs), std::move(got));
  for (size_t o = 0; o < got.size(); ++o) {
    for (int64_t i = 0; i < got[o].num_elements(); ++i) {
      double g = got[o].GetDouble(i), w = (*want)[o].GetDouble(i);
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << "output " << o << " element " << i << ": got " << g;
        continue;
      }
      EXPECT_NEAR(g, w, tolerance * (1 + std::fabs(w))) << "output " << o << " element " << i;
    }
  }
  return *std::move(want);
}

// For models whose output shapes depend on input values: expects the shapes `model` (the
// artifact compiled from `module`) computes for `inputs`, and its outputs, to equal the
// reference interpreter's: shapes exactly, values within `tolerance` (absolute plus relative;
// exactly by default). Returns the reference outputs for further checks.
inline std::vector<ir::NDArray> ExpectSameAsReference(const runtime::Model& model,
                                                      const ir::IRModule& module,
                                                      std::vector<ir::NDArray> inputs,
                                                      double tolerance = 0) {
  auto want = interp::Run(module, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!want.ok()) return {};
  auto shapes = CompiledOutputShapes(model, inputs);
  EXPECT_TRUE(shapes.ok()) << shapes.status();
  if (!shapes.ok()) return {};
  std::vector<ir::NDArray> got;
  for (size_t o = 0; o < want->size(); ++o) {
    EXPECT_EQ((*shapes)[o], (*want)[o].shape) << "output " << o;
    got.push_back(ir::NDArray::Zeros((*want)[o].dtype, (*want)[o].shape));
  }
  got = RunModel(model, std::move(inputs), std::move(got));
  for (size_t o = 0; o < got.size(); ++o) {
    for (int64_t i = 0; i < got[o].num_elements(); ++i) {
      double g = got[o].GetDouble(i), w = (*want)[o].GetDouble(i);
      EXPECT_NEAR(g, w, tolerance * (1 + std::fabs(w))) << "output " << o << " at " << i;
    }
  }
  return *std::move(want);
}

// A model compiled once and imported once, to run at several inputs.
struct CompiledModel {
  explicit CompiledModel(const std::string& onnx) : model(CompileAndLoad(onnx)) {
    auto imported = driver::ImportModel(onnx);
    EXPECT_TRUE(imported.ok()) << imported.status();
    if (imported.ok()) module = *std::move(imported);
  }
  explicit CompiledModel(const OnnxBuilder& b) : CompiledModel(b.Serialize()) {}
  // Runs both and compares within `tolerance` (relative, plus as much absolute).
  void ExpectMatches(std::vector<ir::NDArray> inputs, double tolerance = 1e-6) const {
    ExpectSameAsReference(*model, module, std::move(inputs), tolerance);
  }
  // The compiled call fails with exactly `message` (a run-time check in a kernel or host
  // code), and the interpreter rejects the inputs too. Outputs are f32, sized from the
  // signature's static shapes.
  void ExpectCallFails(std::vector<ir::NDArray> inputs, const std::string& message) const {
    EXPECT_FALSE(interp::Run(module, inputs).ok()) << message;
    std::vector<ir::NDArray> outputs;
    for (const runtime::TensorInfo& info : model->outputs()) {
      std::vector<int64_t> shape;
      for (const std::string& d : info.dims) shape.push_back(std::stoll(d));
      outputs.push_back(ir::NDArray::Zeros(arith::DataType::Float(32), shape));
    }
    std::vector<DLTensor> in, out;
    for (ir::NDArray& a : inputs) in.push_back(ViewOf(a));
    for (ir::NDArray& a : outputs) out.push_back(ViewOf(a));
    std::string error;
    EXPECT_FALSE(model->Run(in, &out, &error)) << message;
    EXPECT_EQ(error, message);
  }
  // Runs both and compares; returns the shape of the first reference output.
  std::vector<int64_t> ExpectSame(std::vector<ir::NDArray> inputs) const {
    auto want = ExpectSameAsReference(*model, module, std::move(inputs));
    return want.empty() ? std::vector<int64_t>{} : want[0].shape;
  }
  // Values that break a constraint: compiled code reports `input` as holding values that do
  // not fit, and the interpreter fails too.
  void ExpectRejected(const std::vector<ir::NDArray>& inputs, const std::string& input) const {
    auto shapes = CompiledOutputShapes(*model, inputs);
    ASSERT_FALSE(shapes.ok());
    EXPECT_NE(shapes.status().message().find("'" + input + "' holds values that do not fit"),
              std::string::npos)
        << shapes.status();
    EXPECT_FALSE(interp::Run(module, inputs).ok());
  }
  std::unique_ptr<runtime::Model> model;
  ir::IRModule module;
};

}  // namespace kiln::testing
