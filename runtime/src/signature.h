// The artifact's signature (kiln_signature() text, see kiln/artifact_abi.h), parsed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlpack/dlpack.h"

namespace kiln::runtime {

struct TensorSpec {
  std::string name;
  DLDataType dtype{};
  std::vector<std::string> dims;     // as written: "784", "batch", "n*2"
  std::vector<int64_t> static_dims;  // the value of each integer dim, -1 where symbolic
};

struct Signature {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// Parses signature text. Returns "" on success, else what is wrong and on which line.
std::string ParseSignature(std::string_view text, Signature* out);

// Signature dtype names: f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool.
bool ParseDType(std::string_view name, DLDataType* out);
// The signature name, or nullptr when the dtype has none.
const char* DTypeName(DLDataType dtype);

}  // namespace kiln::runtime
