// ONNX image and index operators: Resize, GridSample, RoiAlign, NonMaxSuppression, TopK...
#include "compiler/frontend/import_context.h"

namespace kiln::frontend {

void RegisterImageConverters(ConverterTable& table) {}

}  // namespace kiln::frontend
