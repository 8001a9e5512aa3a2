// Target descriptions: what a backend compiles for. The canonical form is what cache keys
// use, so two spellings of one target share an entry.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::ir {

struct Target {
  std::string preset;    // "x86_64", ...
  std::string triple;    // LLVM triple
  std::string cpu;       // LLVM cpu name
  std::string features;  // LLVM feature string, "+avx2,+fma"
  int vector_bits = 128;
  std::string artifact_file = "model.so";

  // "preset=x86_64;triple=...;cpu=...;features=...;vector_bits=..."
  std::string Canonical() const;
};

// Resolves a preset name. Unknown presets are INVALID_ARGUMENT naming the preset and the
// known ones.
absl::StatusOr<Target> ParseTarget(std::string_view text);
std::vector<Target> ListPresetTargets();

}  // namespace kiln::ir
