#include "compiler/schedule/schedule.h"

#include <algorithm>
#include <map>

#include "compiler/ir/stmt_functor.h"
#include "compiler/schedule/conv_rule.h"
#include "compiler/schedule/pool_rule.h"
#include "compiler/schedule/reduce_rule.h"
#include "compiler/schedule/rules.h"
#include "compiler/schedule/simplify_indices.h"
#include "compiler/schedule/winograd_rule.h"

namespace kiln::schedule {
namespace {

// A call_tir binding in a function of the module.
struct CallSite {
  ir::Function* func = nullptr;
  size_t block = 0, binding = 0;
  const ir::ExprNode& call() const { return *func->blocks[block].bindings[binding].value; }
};

// How often each kernel is called anywhere (subgraphs included).
void CountCalls(const ir::Expr& e, std::map<std::string, int>& counts) {
  if (!e) return;
  if (e->kind == ir::ExprKind::kCall && e->name == "call_tir") ++counts[e->callee];
  for (const ir::Expr& arg : e->args) CountCalls(arg, counts);
  for (const auto& sub : e->subgraphs) {
    for (const ir::BindingBlock& block : sub->blocks) {
      for (const ir::Binding& b : block.bindings) CountCalls(b.value, counts);
    }
    CountCalls(sub->result, counts);
  }
}

// The call site of every kernel called exactly once, directly by a binding of a module-level
// function: only there may the kernel's parameters change along with its caller's arguments.
std::map<std::string, CallSite> SingleCallSites(ir::IRModule& module) {
  std::map<std::string, int> counts;
  std::map<std::string, CallSite> sites;
  for (auto& [name, func] : module.functions) {
    for (size_t i = 0; i < func.blocks.size(); ++i) {
      for (size_t j = 0; j < func.blocks[i].bindings.size(); ++j) {
        const ir::Expr& value = func.blocks[i].bindings[j].value;
        CountCalls(value, counts);
        if (value->kind == ir::ExprKind::kCall && value->name == "call_tir") {
          sites[value->callee] = {&func, i, j};
        }
      }
    }
    CountCalls(func.result, counts);
  }
  std::erase_if(sites, [&](const auto& site) { return counts[site.first] != 1; });
  return sites;
}

// The position of `buffer` among the kernel's parameters.
std::optional<size_t> ParamIndex(const ir::PrimFunc& func, const arith::Buffer& buffer) {
  for (size_t i = 0; i < func.buffers.size(); ++i) {
    if (func.buffers[i] == buffer) return i;
  }
  return std::nullopt;
}

// The kernel now reads `packed.packed` for parameter `packed.weights`; its caller passes the
// packed constant.
void UsePackedWeights(ir::PrimFunc& func, const CallSite& site, PackedWeights packed) {
  size_t index = *ParamIndex(func, packed.weights);
  func.buffers[index] = packed.packed;
  ir::ExprNode call = site.call();
  call.args[index] = ir::MakeConstant(std::move(packed.data));
  site.func->blocks[site.block].bindings[site.binding].value =
      std::make_shared<const ir::ExprNode>(std::move(call));
}

// The constant a parameter of `func` is bound to at its only call site, if any.
ConstantOf ConstantsAt(const ir::PrimFunc& func, const std::map<std::string, CallSite>& sites) {
  auto site = sites.find(func.name);
  if (site == sites.end()) return [](const arith::Buffer&) { return nullptr; };
  const CallSite call_site = site->second;
  return [&func, call_site](const arith::Buffer& buffer) -> const ir::NDArray* {
    std::optional<size_t> index = ParamIndex(func, buffer);
    if (!index || *index >= call_site.call().args.size()) return nullptr;
    const ir::Expr& arg = call_site.call().args[*index];
    return arg->kind == ir::ExprKind::kConstant ? arg->data.get() : nullptr;
  };
}

// The rules with knobs that can build `body`, the default's first; empty when it has none.
std::vector<SearchSpace> SpacesFor(const ir::Stmt& body, const ir::Target& target,
                                   const ConstantOf& constant_of) {
  if (std::optional<Matmul> m = MatchMatmul(body)) {
    const arith::PrimExpr& rows = m->i.extent;
    const bool one_row = rows->kind != arith::ExprKind::kIntImm || rows->is_const_int(1);
    std::optional<int64_t> constant_rows, constant_depth;
    if (rows->kind == arith::ExprKind::kIntImm) constant_rows = rows->int_value;
    if (m->depth->kind == arith::ExprKind::kIntImm) constant_depth = m->depth->int_value;
    std::vector<SearchSpace> spaces = {MatmulSpace(
        target, one_row && !constant_of(m->b_load->buffer), false, constant_rows, constant_depth)};
    for (SearchSpace& library : LibrarySpaces(body, target)) spaces.push_back(std::move(library));
    return spaces;
  }
  if (std::vector<SearchSpace> spaces = ConvSpaces(body, target, constant_of); !spaces.empty()) {
    for (SearchSpace& wino : WinogradSpaces(body, target, constant_of)) {
      spaces.push_back(std::move(wino));
    }
    for (SearchSpace& library : LibrarySpaces(body, target)) spaces.push_back(std::move(library));
    return spaces;
  }
  if (std::optional<SearchSpace> rows = RowsSpace(body, target)) return {*std::move(rows)};
  return {};
}

std::string Workload(const ir::PrimFunc& func, const ConstantOf& constant_of) {
  std::string text = ir::CanonicalText(func);
  text += "constant parameters:";
  for (size_t i = 0; i < func.buffers.size(); ++i) {
    if (constant_of(func.buffers[i])) text += " " + std::to_string(i);
  }
  return text + "\n";
}

// `func` as the tuner sees it, when a rule with knobs can build its body `simplified`
// (SimplifyIndices). The workload is the kernel as fusion left it: simplification only
// canonicalizes, and keyed on its text every record made before it would be lost.
std::optional<TunableKernel> Tunable(const ir::PrimFunc& func, const ir::Stmt& simplified,
                                     const ir::Target& target, const ConstantOf& constant_of) {
  std::vector<SearchSpace> spaces = SpacesFor(simplified, target, constant_of);
  if (spaces.empty()) return std::nullopt;
  return TunableKernel{func.name, Workload(func, constant_of), std::move(spaces),
                       func.scalars.empty() ? "" : func.scalars.front()->name};
}

// The trace `choose` picks for `kernel` when it lies in one of its spaces, else the default.
Trace ChosenTrace(const TunableKernel& kernel, const ChooseTrace& choose) {
  std::optional<Trace> chosen = choose ? choose(kernel) : std::nullopt;
  if (chosen) {
    for (const SearchSpace& space : kernel.spaces) {
      if (space.Contains(*chosen)) return *chosen;
    }
  }
  return kernel.spaces.front().Default();
}

// The kernel built by the rule `trace` names, or by the default rules for an empty trace.
ScheduledKernel Build(const ir::PrimFunc& func, const ir::Target& target,
                      const ConstantOf& constant_of, const Trace& trace) {
  std::optional<ScheduledKernel> rule;
  if (trace.rule == "matmul") rule = ScheduleMatmul(func.body, target, constant_of, trace);
  if (trace.rule == "rows") rule = ScheduleRows(func.body, target, trace);
  if (IsWinogradRule(trace.rule)) rule = ScheduleWinograd(func.body, target, constant_of, trace);
  if (!trace.rule.empty() && !rule) rule = ScheduleAsLibraryCall(func.body, target, trace.rule);
  // A conv's own trace, or the matmul rule's for a pointwise conv.
  if (!rule && (trace.rule == "conv" || trace.rule == "matmul")) {
    rule = ScheduleConv(func.body, target, constant_of, trace);
  }
  if (!rule) rule = ScheduleMatmul(func.body, target, constant_of);
  if (!rule) rule = ScheduleConv(func.body, target, constant_of);
  if (!rule) rule = SchedulePool(func.body, target);
  if (!rule) rule = ScheduleRows(func.body, target);
  if (!rule) rule = ScheduledKernel{ScheduleLoopNests(func.body), std::nullopt};
  return *rule;
}

// Whether two rules packed the same weights the same way (or neither packed any).
bool SamePacking(const std::optional<PackedWeights>& a, const std::optional<PackedWeights>& b) {
  if (!a || !b) return !a && !b;
  return a->weights == b->weights && a->data.shape == b->data.shape &&
         a->data.bytes == b->data.bytes;
}

// `fallback` behind the buckets' specializations: if (symbol <= up_to) { bucket } else ...
// A bucket whose rule packs the weights otherwise than the fallback cannot share its
// parameter and is left out.
ScheduledKernel WithBuckets(const ir::PrimFunc& func, const ir::Target& target,
                            const ConstantOf& constant_of, const TunableKernel& kernel,
                            ScheduledKernel fallback, std::vector<Bucket> buckets) {
  const arith::PrimExpr* symbol = nullptr;
  for (const arith::PrimExpr& s : func.scalars) {
    if (s->name == kernel.bucket_symbol) symbol = &s;
  }
  if (!symbol) return fallback;
  std::sort(buckets.begin(), buckets.end(),
            [](const Bucket& a, const Bucket& b) { return a.up_to > b.up_to; });
  for (const Bucket& bucket : buckets) {
    if (std::none_of(kernel.spaces.begin(), kernel.spaces.end(),
                     [&](const SearchSpace& space) { return space.Contains(bucket.trace); })) {
      continue;
    }
    ScheduledKernel special = Build(func, target, constant_of, bucket.trace);
    if (!SamePacking(special.packed, fallback.packed)) continue;
    ir::Stmt body = special.body;
    if (special.packed) {
      const arith::Buffer from = special.packed->packed, to = fallback.packed->packed;
      body = ir::SubstituteStmt(
          body, [](const arith::PrimExpr&) -> arith::PrimExpr { return nullptr; },
          [&](const arith::Buffer& b) { return b == from ? to : b; });
    }
    fallback.body =
        ir::IfThenElse(arith::Binary(arith::ExprKind::kLE, *symbol, arith::IntImm(bucket.up_to)),
                       body, fallback.body);
  }
  return fallback;
}

}  // namespace

absl::StatusOr<ir::IRModule> Schedule(ir::IRModule module, const ir::Target& target,
                                      const ChooseTrace& choose, const ChooseBuckets& buckets) {
  std::map<std::string, CallSite> sites = SingleCallSites(module);
  for (auto& [name, func] : module.prim_funcs) {
    if (func.is_host || !func.body) continue;
    const ir::Stmt simplified = SimplifyIndices(func.body);
    if (target.IsGpu()) {
      func.body = ScheduleForGpu(simplified, target);
      continue;
    }
    ConstantOf constant_of = ConstantsAt(func, sites);
    std::optional<TunableKernel> tunable = Tunable(func, simplified, target, constant_of);
    func.body = simplified;
    Trace trace = tunable ? ChosenTrace(*tunable, choose) : Trace{};
    ScheduledKernel rule = Build(func, target, constant_of, trace);
    if (tunable && buckets) {
      rule = WithBuckets(func, target, constant_of, *tunable, std::move(rule), buckets(*tunable));
    }
    if (rule.packed) UsePackedWeights(func, sites.at(name), *std::move(rule.packed));
    func.body = rule.body;
  }
  return module;
}

std::vector<TunableKernel> TunableKernels(const ir::IRModule& module, const ir::Target& target) {
  if (target.IsGpu()) return {};
  ir::IRModule copy = module;
  std::map<std::string, CallSite> sites = SingleCallSites(copy);
  std::vector<TunableKernel> kernels;
  for (const auto& [name, func] : copy.prim_funcs) {
    if (func.is_host || !func.body) continue;
    if (auto tunable =
            Tunable(func, SimplifyIndices(func.body), target, ConstantsAt(func, sites))) {
      kernels.push_back(*std::move(tunable));
    }
  }
  return kernels;
}

}  // namespace kiln::schedule
