// Index simplification under the loops around each access. Legalize and fusion write a
// reshape as its flat index split again by the output's extents, simplified with no loop in
// view: BERT's transposed keys read A[floormod(floordiv(floordiv(h * 64 + d, 512) + s +
// b * seq, seq), batch), ...] where the loops bound it to A[b, s, h * 64 + d]. Every element
// paid two divisions by seq, and the rules saw no contiguous access to vectorize.
#pragma once

#include "compiler/ir/loop.h"

namespace kiln::schedule {

// `body` with the indices of every load and store, and the integer parts of every other
// expression (conditions, lets, values), simplified by an analyzer that knows each enclosing
// loop's range: constant bounds, or [0, extent) for a symbolic extent (which is then at least
// 1 inside the loop).
ir::Stmt SimplifyIndices(const ir::Stmt& body);

}  // namespace kiln::schedule
