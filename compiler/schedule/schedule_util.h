// Expression and loop builders the matmul, conv and pool rules share.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/ir/loop.h"

namespace kiln::schedule {

arith::PrimExpr I(int64_t v);
arith::PrimExpr Lt(arith::PrimExpr a, arith::PrimExpr b);
arith::PrimExpr CeilDiv(arith::PrimExpr a, int64_t b);
bool IsVar(const arith::PrimExpr& e, const arith::PrimExpr& var);

// `e` with each variable in `from` replaced by the expression at the same place in `to`.
arith::PrimExpr Replace(const arith::PrimExpr& e, const std::vector<arith::PrimExpr>& from,
                        const std::vector<arith::PrimExpr>& to);

// An input row (column) index of a window op, out * stride + tap * dilation + base, with
// constants stride >= 1, dilation >= 1 and base; nullopt for an index of another form.
struct AffineAxis {
  int64_t stride, dilation, base;
};
std::optional<AffineAxis> AffineAxisOf(const arith::PrimExpr& index, const arith::PrimExpr& out,
                                       const arith::PrimExpr& tap);

// A hint to bring the cache line of `load`'s element in ahead of its use
// (ir::intrinsic::kPrefetch).
ir::Stmt Prefetch(arith::PrimExpr load);

// f32 elements per cache line (64 bytes on the CPUs Kiln targets).
inline constexpr int64_t kLineFloats = 16;

// for var in [0, extent) of `kind`.
ir::Stmt Loop(const arith::PrimExpr& var, arith::PrimExpr extent, ir::ForKind kind, ir::Stmt body);

}  // namespace kiln::schedule
