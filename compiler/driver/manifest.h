// What an artifact says about itself: the signature text the runtime reads from the shared
// object, and manifest.json for people and tools. Both come from the imported `main`.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"

namespace kiln::driver {

// The kiln_signature() text of runtime/include/kiln/artifact_abi.h.
std::string SignatureText(const ir::Function& main);

struct ManifestInfo {
  std::string artifact_file;
  std::string artifact_sha256;  // "sha256:<hex>"
  std::string options;          // canonical compile options
  // Memory planning's workspace per run and the no-reuse size, in the inputs' symbolic dims.
  arith::PrimExpr workspace_bytes, no_reuse_bytes;
  // "cuda" or "emulated" for a device artifact (ABI version 4), else empty.
  std::string device;
  // Libraries the kernels call (codegen::LibrariesCalled), which the loading machine needs.
  std::vector<std::string> libraries;
};
std::string ManifestJson(const ir::Function& main, const ir::Target& target,
                         const ManifestInfo& info);

}  // namespace kiln::driver
