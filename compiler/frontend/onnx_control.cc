// ONNX control flow: If, Loop, Scan.
#include "compiler/frontend/import_context.h"

namespace kiln::frontend {

void RegisterControlConverters(ConverterTable& table) {}

}  // namespace kiln::frontend
