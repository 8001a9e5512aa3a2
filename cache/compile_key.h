// The cache key of one compilation: equal keys promise byte-identical artifacts, so a hit
// may skip the compiler. The cache knows no IR: callers pass the canonical texts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::cache {

// The text that is hashed, one field per line:
// "model=<digest>\ntarget=<canonical>\noptions=<canonical options>\ncompiler=<version>",
// then "\ntuning=<revision>" when the compile read a tuning database: its
// TuningDb::Revision for the target, so that new records make the next compile a miss.
// Exposed so logs and tests can show what a key stands for.
std::string CompileKeyText(std::string_view model_digest, std::string_view canonical_target,
                           std::string_view canonical_options, std::string_view compiler_version,
                           std::optional<int64_t> tuning_revision = std::nullopt);

// "sha256:<hex>" of CompileKeyText(...).
std::string CompileKey(std::string_view model_digest, std::string_view canonical_target,
                       std::string_view canonical_options, std::string_view compiler_version,
                       std::optional<int64_t> tuning_revision = std::nullopt);

}  // namespace kiln::cache
