#include "cache/compile_key.h"

#include "cache/digest.h"

namespace kiln::cache {

std::string CompileKeyParts::Text() const {
  std::string text = std::string("model=")
                         .append(model_digest)
                         .append("\ntarget=")
                         .append(target)
                         .append("\noptions=")
                         .append(options)
                         .append("\ncompiler=")
                         .append(compiler_version);
  if (tuning_revision.has_value())
    text.append("\ntuning=").append(std::to_string(*tuning_revision));
  return text;
}

std::string CompileKeyParts::Key() const { return Sha256Digest(Text()); }

std::string CompileKeyText(std::string_view model_digest, std::string_view canonical_target,
                           std::string_view canonical_options, std::string_view compiler_version,
                           std::optional<int64_t> tuning_revision) {
  return CompileKeyParts{std::string(model_digest), std::string(canonical_target),
                         std::string(canonical_options), std::string(compiler_version),
                         tuning_revision}
      .Text();
}

std::string CompileKey(std::string_view model_digest, std::string_view canonical_target,
                       std::string_view canonical_options, std::string_view compiler_version,
                       std::optional<int64_t> tuning_revision) {
  return Sha256Digest(CompileKeyText(model_digest, canonical_target, canonical_options,
                                     compiler_version, tuning_revision));
}

}  // namespace kiln::cache
