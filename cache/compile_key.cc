#include "cache/compile_key.h"

#include "cache/digest.h"

namespace kiln::cache {

std::string CompileKeyText(std::string_view model_digest, std::string_view canonical_target,
                           std::string_view canonical_options, std::string_view compiler_version) {
  return std::string("model=")
      .append(model_digest)
      .append("\ntarget=")
      .append(canonical_target)
      .append("\noptions=")
      .append(canonical_options)
      .append("\ncompiler=")
      .append(compiler_version);
}

std::string CompileKey(std::string_view model_digest, std::string_view canonical_target,
                       std::string_view canonical_options, std::string_view compiler_version) {
  return Sha256Digest(
      CompileKeyText(model_digest, canonical_target, canonical_options, compiler_version));
}

}  // namespace kiln::cache
