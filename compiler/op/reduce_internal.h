// Pieces of the reduce family's op definitions shared between its files.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/op/op_def.h"

namespace kiln::op {

// Which of `rank` dims a reduction with these axes reduces: all when `axes` is empty, unless
// the call's noop_with_empty_axes is set. INVALID_ARGUMENT for an axis out of range or repeated.
absl::StatusOr<std::vector<bool>> ReducedAxes(const ir::ExprNode& call,
                                              const std::vector<int64_t>& axes, int64_t rank);

std::vector<OpDef> LossOps();       // op/reduce_loss.cc: NLL and softmax cross-entropy
std::vector<OpDef> RecurrentOps();  // op/reduce_rnn.cc: rnn, gru, lstm
std::vector<OpDef> SignalOps();     // op/reduce_signal.cc: det, dft, stft, windows, mel

}  // namespace kiln::op
