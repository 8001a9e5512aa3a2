// The pipe protocol of kiln-runner: how a test on the build machine runs an artifact built
// for another machine (under qemu-user, or in Node.js for wasm32) and gets its outputs back.
//
//   kiln-runner ARTIFACT [--threads N]          (runtime/tools/kiln_runner.cc, per arch)
//   node runtime/js/kiln-runner.mjs ARTIFACT    (wasm32; same protocol)
//
// The runner loads ARTIFACT once, then answers requests on stdin with responses on stdout,
// one at a time, until stdin ends (exit status 0). When the artifact cannot be loaded it
// writes the reason to stderr and exits with status 2 before reading anything. Integers are
// little-endian (every arch Kiln targets is).
//
//   request  := u32 num_inputs, tensor[num_inputs]
//   response := i32 status, then
//                 status == 0: u32 num_outputs, tensor[num_outputs]
//                 otherwise:   u32 length, message[length]  (the runtime's error, UTF-8)
//   tensor   := u8 dtype_code (DLDataTypeCode), u8 bits, u16 zero, u32 ndim, i64 shape[ndim],
//               u64 num_bytes, u8 data[num_bytes]   (dense, row-major)
//
// Output shapes come from the artifact (kiln_model_output_shapes), as a user would get them.
#pragma once

#include <cstdint>

namespace kiln::runner {

constexpr int kLoadFailedExitStatus = 2;
constexpr int32_t kStatusOk = 0;
constexpr int32_t kStatusFailed = 1;

}  // namespace kiln::runner
