// TEMPORARY (ir text helper): round trip + verify over the ONNX test data. Will be deleted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/structural.h"
#include "compiler/ir/verifier.h"
#include "compiler/transform/legalize.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

std::string Check(const ir::IRModule& m) {
  std::string out;
  absl::Status v = ir::VerifyModule(m);
  if (!v.ok()) out += "VERIFY: " + std::string(v.message()).substr(0, 400) + "\n";
  std::string text = ir::ToString(m);
  auto p = ir::ParseModule(text);
  if (!p.ok()) return out + "PARSE: " + std::string(p.status().message()) + "\n";
  std::string mm = ir::StructuralMismatch(m, *p);
  if (!mm.empty()) out += "MISMATCH: " + mm + "\n";
  if (ir::StructuralHash(m) != ir::StructuralHash(*p)) out += "HASH\n";
  if (ir::ToString(*p) != text) out += "REPRINT\n";
  return out;
}

bool Legalizable(const ir::IRModule& m) {
  static const std::set<std::string> ops = {"add", "subtract", "multiply", "divide", "relu", "sigmoid", "tanh", "exp", "copy", "matmul", "softmax", "transpose", "reshape"};
  for (const auto& [n, f] : m.functions) {
    for (const auto& p : f.params) if (!p->struct_info.is_tensor() || !p->struct_info.shape) return false;
    for (const auto& b : f.blocks) for (const auto& x : b.bindings) {
      if (x.value->kind != ir::ExprKind::kCall || !ops.count(x.value->name) || !x.var->struct_info.is_tensor() || !x.var->struct_info.shape) return false;
      for (const auto& a : x.value->args) if (!a->struct_info.is_tensor() || !a->struct_info.shape) return false;
    }
    if (f.result->kind != ir::ExprKind::kVar) return false;
  }
  return true;
}

TEST(TmpIrText, AllModels) {
  int n = 0, bad = 0;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path dir = fs::path("/usr/share/libonnx-testdata/data") / suite;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      fs::path model = e.path() / "model.onnx";
      if (!fs::exists(model)) continue;
      std::ifstream f(model, std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      auto m = driver::ImportModel(ss.str());
      if (!m.ok()) continue;
      ++n;
      std::string r = Check(*m);
      if (!Legalizable(*m)) {
        if (!r.empty()) { ++bad; std::cout << suite << "/" << e.path().filename().string() << ": " << r; }
        continue;
      }
      auto lowered = transform::Legalize(*m);
      if (lowered.ok()) {
        std::string r2 = Check(*lowered);
        if (!r2.empty()) r += "[legalized] " + r2;
        auto host = driver::RunPipeline(*std::move(lowered), nullptr);
        if (host.ok()) {
          std::string r3 = Check(*host);
          if (!r3.empty()) r += "[pipeline] " + r3;
        }
      }
      if (!r.empty()) {
        ++bad;
        std::cout << suite << "/" << e.path().filename().string() << ": " << r;
      }
    }
  }
  std::cout << "models " << n << " bad " << bad << "\n";
}

}  // namespace
}  // namespace kiln
