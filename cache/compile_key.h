// The cache key of one compilation: equal keys promise byte-identical artifacts, so a hit
// may skip the compiler. The cache knows no IR: callers pass the canonical texts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::cache {

// What a compilation depends on. The store keeps the parts beside the key, so that a miss
// can say which of them differs from the nearest entry (Store::ExplainMiss).
struct CompileKeyParts {
  std::string model_digest;      // "sha256:<hex>" of the ONNX bytes
  std::string target;            // ir::Target::Canonical()
  std::string options;           // driver::CompileOptions::Canonical()
  std::string compiler_version;  // driver::CompilerVersion()
  // The TuningDb::Revision for the target when the compile read a tuning database, so that
  // new records make the next compile a miss; nullopt when it read none.
  std::optional<int64_t> tuning_revision;

  // The text that is hashed, one field per line:
  // "model=<digest>\ntarget=<canonical>\noptions=<canonical options>\ncompiler=<version>",
  // then "\ntuning=<revision>" when there is a revision. Exposed so logs and tests can show
  // what a key stands for.
  std::string Text() const;
  // "sha256:<hex>" of Text().
  std::string Key() const;
};

// CompileKeyParts{...}.Text() and .Key(), for callers that hold the fields separately.
std::string CompileKeyText(std::string_view model_digest, std::string_view canonical_target,
                           std::string_view canonical_options, std::string_view compiler_version,
                           std::optional<int64_t> tuning_revision = std::nullopt);
std::string CompileKey(std::string_view model_digest, std::string_view canonical_target,
                       std::string_view canonical_options, std::string_view compiler_version,
                       std::optional<int64_t> tuning_revision = std::nullopt);

}  // namespace kiln::cache
