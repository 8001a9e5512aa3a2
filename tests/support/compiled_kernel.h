// For legalization tests: runs a model through import and the whole pass pipeline and
// returns one kernel's printed loop-level IR as legalize made it (before fusion and
// scheduling reshape it), to check what loops it got.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"

namespace kiln::testing {

// The printed kernel whose name starts with `prefix`, after the whole pipeline; records a
// test failure and returns "" when the model does not get that far.
inline std::string CompiledKernel(const std::string& onnx, const std::string& prefix) {
  auto m = driver::ImportModel(onnx);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  ir::IRModule legalized;
  auto keep_legalized = [&](const std::string& pass, const ir::IRModule& module) {
    if (pass == "legalize") legalized = module;
  };
  auto lowered = driver::RunPipeline(*std::move(m), keep_legalized);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  if (!lowered.ok()) return "";
  for (const auto& [name, func] : legalized.prim_funcs) {
    if (name.rfind(prefix, 0) == 0) return ir::ToString(func);
  }
  ADD_FAILURE() << "no kernel " << prefix << " in " << ir::ToString(legalized);
  return "";
}

}  // namespace kiln::testing
