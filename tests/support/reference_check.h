// For tests of compiled kernels: runs a model through the reference interpreter and through
// an x86_64 artifact compiled from it, on the same inputs, and compares the outputs element
// by element (the interpreter is the oracle; see DESIGN.md).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "kiln/runtime.hpp"

namespace kiln::testing {

inline DLTensor ViewOf(ir::NDArray& a) {
  DLTensor t{};
  t.data = a.bytes.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.shape.size());
  t.dtype = {a.dtype.code, a.dtype.bits, 1};
  t.shape = a.shape.data();
  return t;
}

// An array of `dtype` and `shape` holding `values` (converted from double).
inline ir::NDArray ArrayOf(arith::DataType dtype, std::vector<int64_t> shape,
                           const std::vector<double>& values) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), a.num_elements());
  for (int64_t i = 0; i < a.num_elements() && i < static_cast<int64_t>(values.size()); ++i) {
    a.SetDouble(i, values[i]);
  }
  return a;
}

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
  auto target = ir::ParseTarget("x86_64");
  EXPECT_TRUE(target.ok());
  auto artifact = driver::CompileModel(model, *target, {}, nullptr);
  EXPECT_TRUE(artifact.ok()) << artifact.status();
  if (!artifact.ok()) return {};
  std::string path = ::testing::TempDir() + "/kiln_reference_check_" +
                     std::to_string(reinterpret_cast<uintptr_t>(&model)) + ".so";
  std::ofstream(path, std::ios::binary) << artifact->bytes;
  std::string error;
  auto loaded = runtime::Model::Load(path, &error);
  std::remove(path.c_str());
  EXPECT_TRUE(loaded) << error;
  if (!loaded) return {};
  std::vector<ir::NDArray> got;
  for (const ir::NDArray& w : *want) got.push_back(ir::NDArray::Zeros(w.dtype, w.shape));
  std::vector<DLTensor> in, out;
  for (ir::NDArray& a : inputs) in.push_back(ViewOf(a));
  for (ir::NDArray& a : got) out.push_back(ViewOf(a));
  EXPECT_TRUE(loaded->Run(in, &out, &error)) << error;
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

}  // namespace kiln::testing
