// The reduce family's converters live in several files; onnx_reduce.cc registers them all.
#pragma once

#include "compiler/frontend/import_context.h"

namespace kiln::frontend {

void RegisterRecurrentConverters(ConverterTable& table);  // frontend/onnx_reduce_rnn.cc
void RegisterSignalConverters(ConverterTable& table);     // frontend/onnx_reduce_signal.cc

}  // namespace kiln::frontend
