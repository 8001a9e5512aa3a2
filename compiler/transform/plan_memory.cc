#include "compiler/transform/plan_memory.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "compiler/arith/check.h"

namespace kiln::transform {

using arith::PrimExpr;

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

PrimExpr AlignUp(const PrimExpr& bytes, const arith::Analyzer& analyzer) {
  PrimExpr a = arith::IntImm(kStorageAlignment);
  return analyzer.Simplify(arith::FloorDiv(bytes + (a - arith::IntImm(1)), a) * a);
}

// What a tensor needs from a token: its exact size, or, when the user bounded every variable
// it uses, the largest size it can take, which lets tensors of different shapes share.
PrimExpr Capacity(const PrimExpr& bytes, const arith::Analyzer& analyzer) {
  arith::IntBounds bounds = analyzer.ConstBounds(bytes);
  if (bounds.max != kUnbounded) return arith::IntImm(bounds.max);
  return analyzer.Simplify(bytes);
}

bool IsConst(const PrimExpr& e) { return e->kind == arith::ExprKind::kIntImm; }

class Planner {
 public:
  Planner(const std::vector<Lifetime>& lifetimes, const arith::Analyzer& analyzer)
      : lifetimes_(lifetimes), analyzer_(analyzer) {}

  MemoryPlan Run() {
    plan_.token_of.assign(lifetimes_.size(), 0);
    std::vector<size_t> order(lifetimes_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return lifetimes_[a].first < lifetimes_[b].first; });
    for (size_t i : order) {
      KILN_CHECK(lifetimes_[i].last >= lifetimes_[i].first) << "lifetime ends before it begins";
      plan_.token_of[i] = Assign(i);
    }
    LayOut();
    return plan_;
  }

 private:
  // A token is free for lifetime i when everything it held died strictly before i is
  // produced: a kernel may not write its output over one of its own inputs.
  bool IsFree(size_t token, size_t i) const { return busy_until_[token] < lifetimes_[i].first; }

  size_t Assign(size_t i) {
    PrimExpr need = Capacity(lifetimes_[i].bytes, analyzer_);
    if (auto token = BestFit(i, need)) return Occupy(*token, i);
    if (IsConst(need)) {
      if (auto token = LargestFreeConstant(i)) {
        plan_.token_bytes[*token] = need;  // grows: no free token was big enough
        return Occupy(*token, i);
      }
    }
    plan_.token_bytes.push_back(need);
    busy_until_.push_back(0);
    return Occupy(plan_.token_bytes.size() - 1, i);
  }

  // The free token that is provably big enough and wastes least (by its largest size).
  std::optional<size_t> BestFit(size_t i, const PrimExpr& need) const {
    std::optional<size_t> best;
    int64_t best_size = kUnbounded;
    for (size_t t = 0; t < plan_.token_bytes.size(); ++t) {
      if (!IsFree(t, i) || !analyzer_.ProveGE(plan_.token_bytes[t], need)) continue;
      int64_t size = analyzer_.ConstBounds(plan_.token_bytes[t]).max;
      if (!best || size < best_size) best = t, best_size = size;
    }
    return best;
  }

  std::optional<size_t> LargestFreeConstant(size_t i) const {
    std::optional<size_t> best;
    for (size_t t = 0; t < plan_.token_bytes.size(); ++t) {
      if (!IsFree(t, i) || !IsConst(plan_.token_bytes[t])) continue;
      if (!best || plan_.token_bytes[t]->int_value > plan_.token_bytes[*best]->int_value) best = t;
    }
    return best;
  }

  size_t Occupy(size_t token, size_t i) {
    busy_until_[token] = lifetimes_[i].last;
    return token;
  }

  void LayOut() {
    PrimExpr offset = arith::IntImm(0);
    for (const PrimExpr& bytes : plan_.token_bytes) {
      plan_.token_offset.push_back(offset);
      offset = analyzer_.Simplify(offset + AlignUp(bytes, analyzer_));
    }
    plan_.workspace_bytes = offset;
    PrimExpr total = arith::IntImm(0);
    for (const Lifetime& l : lifetimes_) total = total + AlignUp(l.bytes, analyzer_);
    plan_.no_reuse_bytes = analyzer_.Simplify(total);
  }

  const std::vector<Lifetime>& lifetimes_;
  const arith::Analyzer& analyzer_;
  MemoryPlan plan_;
  std::vector<size_t> busy_until_;  // per token: last step of its latest occupant
};

}  // namespace

MemoryPlan PlanMemory(const std::vector<Lifetime>& lifetimes, const arith::Analyzer& analyzer) {
  return Planner(lifetimes, analyzer).Run();
}

}  // namespace kiln::transform
