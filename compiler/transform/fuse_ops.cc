#include "compiler/transform/fuse_ops.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/transform/merge_kernels.h"

namespace kiln::transform {

namespace {

// How often each graph variable is referenced anywhere in `func`: binding values, the result,
// and subgraphs (which may use the variables around them).
void CountUses(const ir::Expr& e, std::map<const ir::ExprNode*, int>& uses) {
  if (!e) return;
  if (e->kind == ir::ExprKind::kVar) {
    ++uses[e.get()];
    return;
  }
  for (const ir::Expr& arg : e->args) CountUses(arg, uses);
  for (const auto& sub : e->subgraphs) {
    for (const ir::BindingBlock& block : sub->blocks) {
      for (const ir::Binding& b : block.bindings) CountUses(b.value, uses);
    }
    CountUses(sub->result, uses);
  }
}

std::map<const ir::ExprNode*, int> CountUses(const ir::Function& func) {
  std::map<const ir::ExprNode*, int> uses;
  for (const ir::BindingBlock& block : func.blocks) {
    for (const ir::Binding& b : block.bindings) CountUses(b.value, uses);
  }
  CountUses(func.result, uses);
  return uses;
}

void CollectCallees(const ir::Expr& e, std::set<std::string>& callees) {
  if (!e) return;
  if (e->kind == ir::ExprKind::kCall && e->name == "call_tir") callees.insert(e->callee);
  for (const ir::Expr& arg : e->args) CollectCallees(arg, callees);
  for (const auto& sub : e->subgraphs) {
    for (const ir::BindingBlock& block : sub->blocks) {
      for (const ir::Binding& b : block.bindings) CollectCallees(b.value, callees);
    }
  }
}

bool HasKnownShape(const ir::Expr& e) { return e->struct_info.is_tensor() && e->struct_info.shape; }

// "matmul_0" -> "matmul", "fused_add_relu_3" -> "add_relu": what a fused name is made of.
std::string OpsOf(std::string kernel) {
  if (absl::StartsWith(kernel, "fused_")) kernel = kernel.substr(6);
  size_t cut = kernel.rfind('_');
  if (cut == std::string::npos || cut + 1 == kernel.size()) return kernel;
  for (size_t i = cut + 1; i < kernel.size(); ++i) {
    if (!absl::ascii_isdigit(kernel[i])) return kernel;
  }
  return kernel.substr(0, cut);
}

class Fuser {
 public:
  explicit Fuser(ir::IRModule& module) : module_(module) {}

  void Run(ir::Function& func) {
    for (ir::BindingBlock& block : func.blocks) {
      while (FuseOnePair(func, block)) {
      }
    }
  }

  // Kernels that fusion replaced and that nothing calls any more.
  void RemoveDeadKernels() {
    std::set<std::string> called;
    for (const auto& [name, func] : module_.functions) {
      for (const ir::BindingBlock& block : func.blocks) {
        for (const ir::Binding& b : block.bindings) CollectCallees(b.value, called);
      }
    }
    for (const std::string& name : replaced_) {
      if (!called.count(name)) module_.prim_funcs.erase(name);
    }
  }

 private:
  // A plain kernel call on tensors of known shape (not a tuple-producing one).
  const ir::PrimFunc* KernelOf(const ir::Binding& b) const {
    const ir::Expr& call = b.value;
    if (b.match_cast || call->kind != ir::ExprKind::kCall || call->name != "call_tir") {
      return nullptr;
    }
    if (!HasKnownShape(b.var) || !HasKnownShape(call)) return nullptr;
    for (const ir::Expr& arg : call->args) {
      if (!HasKnownShape(arg)) return nullptr;
    }
    auto it = module_.prim_funcs.find(call->callee);
    if (it == module_.prim_funcs.end() || it->second.is_host) return nullptr;
    return &it->second;
  }

  // Merges the first producer/consumer pair of `block` that can merge; false if none can.
  bool FuseOnePair(const ir::Function& func, ir::BindingBlock& block) {
    std::map<const ir::ExprNode*, int> uses = CountUses(func);
    std::map<const ir::ExprNode*, size_t> producer_at;
    for (size_t i = 0; i < block.bindings.size(); ++i) {
      const ir::PrimFunc* kernel = KernelOf(block.bindings[i]);
      if (!kernel) continue;
      const std::vector<ir::Expr>& args = block.bindings[i].value->args;
      for (const ir::Expr& arg : args) {
        auto at = producer_at.find(arg.get());
        // The intermediate must have no use but this consumer (no graph output either).
        if (at == producer_at.end() ||
            uses[arg.get()] != std::count(args.begin(), args.end(), arg) ||
            unmergeable_.count({block.bindings[at->second].value, block.bindings[i].value})) {
          continue;
        }
        if (Merge(block, at->second, i)) return true;
        unmergeable_.insert({block.bindings[at->second].value, block.bindings[i].value});
      }
      producer_at[block.bindings[i].var.get()] = i;
    }
    return false;
  }

  bool Merge(ir::BindingBlock& block, size_t producer_index, size_t consumer_index) {
    const ir::Binding& p = block.bindings[producer_index];
    const ir::Binding& c = block.bindings[consumer_index];
    KernelCall producer{KernelOf(p), p.value->args, p.var};
    KernelCall consumer{KernelOf(c), c.value->args, c.var};
    std::optional<MergedKernel> merged = MergeKernels(producer, consumer);
    if (!merged) return false;
    merged->kernel.name = FreshName(p.value->callee, c.value->callee);
    replaced_.insert(p.value->callee);
    replaced_.insert(c.value->callee);
    std::string name = merged->kernel.name;
    module_.prim_funcs.emplace(name, std::move(merged->kernel));
    block.bindings[consumer_index].value =
        ir::MakeCallTIR(name, std::move(merged->args), c.value->struct_info);
    block.bindings.erase(block.bindings.begin() + producer_index);
    return true;
  }

  std::string FreshName(const std::string& producer, const std::string& consumer) {
    std::string base = absl::StrCat("fused_", OpsOf(producer), "_", OpsOf(consumer));
    std::string name;
    do {
      name = absl::StrCat(base, "_", counts_[base]++);
    } while (module_.prim_funcs.count(name));
    return name;
  }

  ir::IRModule& module_;
  std::map<std::string, int> counts_;
  std::set<std::string> replaced_;
  // Producer and consumer calls that did not merge. The same two calls fail the same way
  // again, and each merge starts the search over, so without this a long chain retried every
  // failed pair after every merge: 500 elementwise ops took 25 s to fuse. The calls are held,
  // so no new call reuses their addresses.
  std::set<std::pair<ir::Expr, ir::Expr>> unmergeable_;
};

}  // namespace

absl::StatusOr<ir::IRModule> FuseOps(ir::IRModule module) {
  Fuser fuser(module);
  for (auto& [name, func] : module.functions) fuser.Run(func);
  fuser.RemoveDeadKernels();
  return module;
}

}  // namespace kiln::transform
