// The GPU rules (rules.h, ScheduleForGpu): matmuls tiled in shared memory
// (gpu_matmul_rule.cc), rows that reduce a block each (gpu_reduce_rule.cc), else one thread
// per iteration of a kernel's outer data-parallel loops.
#include <algorithm>
#include <vector>

#include "compiler/arith/analyzer.h"
#include "compiler/schedule/conv_rule.h"
#include "compiler/schedule/rules.h"
#include "compiler/schedule/schedule_util.h"

namespace kiln::schedule {
namespace {

using arith::PrimExpr;

bool UsesAny(const PrimExpr& e, const std::vector<Axis>& axes) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    for (const Axis& axis : axes) {
      if (IsVar(v, axis.var)) return true;
    }
  }
  return false;
}

// The whole body in thread 0 of block 0: always correct, for kernels whose loops must run in
// order (a running sum, several loop nests in sequence).
ir::Stmt OneThread(const ir::Stmt& body) {
  return Loop(arith::MakeVar("gpu_b"), I(1), ir::ForKind::kGpuBlock,
              Loop(arith::MakeVar("gpu_t"), I(1), ir::ForKind::kGpuThread, body));
}

}  // namespace

ir::Stmt ScheduleForGpu(const ir::Stmt& body, const ir::Target& target) {
  std::optional<Matmul> matmul = MatchMatmul(body);
  if (!matmul) matmul = MatchConvAsMatmul(body);
  if (matmul) {
    if (std::optional<ir::Stmt> tiled = ScheduleMatmulForGpu(*matmul, target)) return *tiled;
  }
  // The perfectly nested loops whose iterations are independent, outermost first; an inner
  // extent may not depend on an outer loop (the fused index assumes a box).
  std::vector<Axis> axes;
  std::vector<PrimExpr> mins;
  ir::Stmt inner = body;
  // A loop of one iteration counts as independent (it writes what it writes once).
  while (inner->kind == ir::StmtKind::kFor &&
         (inner->extent->is_const_int(1) || IterationsAreIndependent(inner->var, inner->body)) &&
         !UsesAny(inner->min, axes) && !UsesAny(inner->extent, axes)) {
    axes.push_back({inner->var, inner->extent});
    mins.push_back(inner->min);
    inner = inner->body;
  }
  if (axes.empty()) return OneThread(body);
  if (std::optional<ir::Stmt> rows = ScheduleRowsForGpu(axes, mins, inner, target)) return *rows;

  // One fused index over the box, fused = b * T + t; each loop variable is its digit in the
  // mixed radix of the extents, innermost fastest, so neighbouring threads touch neighbouring
  // elements (coalesced).
  arith::Analyzer analyzer;
  PrimExpr total = analyzer.Simplify(axes[0].extent);
  for (size_t k = 1; k < axes.size(); ++k) total = analyzer.Simplify(total * axes[k].extent);
  // A box smaller than a block is one block of just enough threads (an empty box, no block:
  // the launch code skips launches of zero blocks).
  int64_t threads = target.threads_per_block > 0 ? target.threads_per_block : 256;
  if (total->kind == arith::ExprKind::kIntImm) {
    threads = std::clamp<int64_t>(total->int_value, 1, threads);
  }
  PrimExpr b = arith::MakeVar("gpu_b"), t = arith::MakeVar("gpu_t");
  PrimExpr fused = arith::MakeVar("gpu_i");
  ir::Stmt element = inner;
  PrimExpr stride = I(1);
  for (size_t k = axes.size(); k-- > 0;) {
    PrimExpr digit = arith::FloorMod(arith::FloorDiv(fused, stride), axes[k].extent);
    element = ir::Let(axes[k].var, analyzer.Simplify(mins[k] + digit), element);
    stride = analyzer.Simplify(stride * axes[k].extent);
  }
  ir::Stmt guarded = ir::IfThenElse(Lt(fused, total), element);
  ir::Stmt thread = ir::Let(fused, b * I(threads) + t, guarded);
  return Loop(b, analyzer.Simplify(CeilDiv(total, threads)), ir::ForKind::kGpuBlock,
              Loop(t, I(threads), ir::ForKind::kGpuThread, thread));
}

}  // namespace kiln::schedule
