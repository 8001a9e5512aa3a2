// ONNX reductions, recurrent networks, losses and signal processing.
#include "compiler/frontend/import_context.h"

namespace kiln::frontend {

void RegisterReduceConverters(ConverterTable& table) {}

}  // namespace kiln::frontend
