// Symbolic memory planning: which intermediate tensors may share storage.
//
// Host lowering lists every intermediate it needs (its byte size, symbolic, and the steps at
// which it is produced and last used); the planner gives each one a storage token, reusing a
// token whose tensor is dead when the token is provably big enough for every value of the
// shape variables. With user-supplied upper bounds (`kiln compile --dim-bound seq=4096`) a
// size becomes a constant capacity, so tensors of different symbolic sizes can share too.
// Tokens are laid out back to back in one workspace.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/arith/analyzer.h"

namespace kiln::transform {

struct Lifetime {
  arith::PrimExpr bytes;  // size of the tensor, in terms of the graph's shape variables
  size_t first = 0;       // step that produces it
  size_t last = 0;        // last step that reads it (>= first)
};

struct MemoryPlan {
  // Per token: its size (a constant when every variable it uses is bounded) and its offset in
  // the workspace (64-byte aligned).
  std::vector<arith::PrimExpr> token_bytes;
  std::vector<arith::PrimExpr> token_offset;
  std::vector<size_t> token_of;     // lifetime index -> token
  arith::PrimExpr workspace_bytes;  // the planned peak: every token, back to back
  arith::PrimExpr no_reuse_bytes;   // every tensor its own storage, for comparison
};

// Storage sizes are rounded up to this, so every token starts aligned.
inline constexpr int64_t kStorageAlignment = 64;

// `analyzer` knows the shape variables, with their upper bounds where the user gave them.
MemoryPlan PlanMemory(const std::vector<Lifetime>& lifetimes, const arith::Analyzer& analyzer);

}  // namespace kiln::transform
