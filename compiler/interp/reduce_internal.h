// The reduce family's kernels live in several files; reduce.cc registers them all.
#pragma once

#include "compiler/interp/kernels.h"

namespace kiln::interp {

void RegisterLossKernels(KernelTable& table);       // interp/reduce_loss.cc
void RegisterRecurrentKernels(KernelTable& table);  // interp/reduce_rnn.cc
void RegisterSignalKernels(KernelTable& table);     // interp/reduce_signal.cc

}  // namespace kiln::interp
