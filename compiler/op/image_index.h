// The index half of the image family (sorting, searching, scans, boxes, n-grams); image.cc
// adds these to ImageOps().
#pragma once

#include <optional>
#include <vector>

#include "compiler/op/op_def.h"

namespace kiln::op {

// top_k, arg_max, arg_min, cum_sum, reverse_sequence, unique, non_max_suppression,
// tf_idf_vectorizer.
std::vector<OpDef> ImageIndexOps();

// The integer elements of `arg` when they are known before run time: a constant, or a
// ShapeExpr (symbolic values).
std::optional<std::vector<arith::PrimExpr>> KnownIntValues(const ir::Expr& arg);

}  // namespace kiln::op
