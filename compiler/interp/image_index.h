// The image family's kernels beyond resize and block rearrangement, registered by
// RegisterImageKernels (image.cc).
#pragma once

#include "compiler/interp/kernels.h"

namespace kiln::interp {

void RegisterImageSamplingKernels(KernelTable& table);  // image_sampling.cc: grid_sample, roi_align
void RegisterImageIndexKernels(KernelTable& table);     // image_index.cc: top_k, arg_max, ...
void RegisterImageBoxKernels(KernelTable& table);  // image_boxes.cc: non_max_suppression, tf_idf

}  // namespace kiln::interp
