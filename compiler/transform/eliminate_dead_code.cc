#include "compiler/transform/eliminate_dead_code.h"

#include <set>

namespace kiln::transform {
namespace {

using Live = std::set<const ir::ExprNode*>;

void MarkUsed(const ir::Expr& e, Live& live);

void MarkUsed(const ir::Function& f, Live& live) {
  MarkUsed(f.result, live);
  for (const ir::BindingBlock& block : f.blocks) {
    for (const ir::Binding& b : block.bindings) MarkUsed(b.value, live);
  }
}

// Every variable `e` reads, including those its subgraphs read from enclosing scopes.
void MarkUsed(const ir::Expr& e, Live& live) {
  if (e->kind == ir::ExprKind::kVar) {
    live.insert(e.get());
    return;
  }
  for (const ir::Expr& arg : e->args) MarkUsed(arg, live);
  for (const auto& sub : e->subgraphs) MarkUsed(*sub, live);
}

ir::Function Eliminate(ir::Function func) {
  Live live;
  MarkUsed(func.result, live);
  for (size_t b = func.blocks.size(); b-- > 0;) {
    std::vector<ir::Binding>& bindings = func.blocks[b].bindings;
    std::vector<ir::Binding> kept;
    for (size_t i = bindings.size(); i-- > 0;) {
      const ir::Binding& binding = bindings[i];
      // A non-dataflow block may hold effects, and a match_cast checks shapes: keep both.
      bool needed = live.count(binding.var.get()) || !func.blocks[b].dataflow ||
                    binding.match_cast;
      if (!needed) continue;
      MarkUsed(binding.value, live);
      kept.push_back(binding);
    }
    bindings.assign(kept.rbegin(), kept.rend());
  }
  return func;
}

}  // namespace

absl::StatusOr<ir::IRModule> EliminateDeadCode(ir::IRModule module) {
  for (auto& [name, func] : module.functions) func = Eliminate(std::move(func));
  return module;
}

}  // namespace kiln::transform
