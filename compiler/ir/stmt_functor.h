// Generic walks over loop-level statements: visit every statement or expression, and rebuild
// a statement with its expressions and buffers rewritten. Passes that read or rewrite kernels
// (classification, fusion) use these instead of a switch over StmtKind each.
#pragma once

#include <functional>

#include "compiler/ir/loop.h"

namespace kiln::ir {

using ExprFn = std::function<PrimExpr(const PrimExpr&)>;
using BufferFn = std::function<Buffer(const Buffer&)>;

// Calls `fn` on `stmt` and every statement nested in it, outer before inner, in order.
void VisitStmts(const Stmt& stmt, const std::function<void(const StmtNode&)>& fn);

// Calls `fn` on every expression of `stmt` and its nested statements and on every
// sub-expression of those (loads' indices included), outer before inner. Loop and let
// variables count as expressions.
void VisitExprs(const Stmt& stmt, const std::function<void(const PrimExpr&)>& fn);
void VisitExprs(const PrimExpr& expr, const std::function<void(const PrimExpr&)>& fn);

// Rebuilds `stmt` bottom-up. Every buffer stored to, loaded from or allocated becomes
// `buffer_fn(buffer)` (nullptr keeps it); then every expression is rewritten as
// arith::Substitute(e, expr_fn) does, loop and let variables included, so `expr_fn` sees
// loads with their buffers already replaced.
Stmt SubstituteStmt(const Stmt& stmt, const ExprFn& expr_fn, const BufferFn& buffer_fn = nullptr);

// `e` with the buffers of its loads replaced by `buffer_fn` (nullptr keeps one).
PrimExpr SubstituteBuffers(const PrimExpr& e, const BufferFn& buffer_fn);

}  // namespace kiln::ir
