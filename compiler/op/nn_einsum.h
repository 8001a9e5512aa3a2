// The einsum equation, parsed once for struct-info inference and the reference kernel.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::op {

// Every dim of every operand and of the output carries a label id. Letters are labels
// 0..51; the dims an ellipsis stands for are labels kEllipsisLabel + j, aligned from the
// right across operands (numpy broadcasting), so operands with fewer such dims share the
// trailing ones.
struct EinsumSpec {
  static constexpr int kEllipsisLabel = 52;
  std::vector<std::vector<int>> inputs;  // labels of each operand's dims
  std::vector<int> output;               // labels of the output's dims
  int num_labels = kEllipsisLabel;       // every label id is below this
};

// Parses `equation` ("ij,jk->ik", "...ii->...i", "i,i" with an implicit output) for operands
// of the given ranks; INVALID_ARGUMENT naming the problem when it does not fit them.
absl::StatusOr<EinsumSpec> ParseEinsum(const ir::ExprNode& call, const std::string& equation,
                                       const std::vector<int64_t>& ranks);

}  // namespace kiln::op
