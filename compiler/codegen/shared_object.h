// Shared objects: linking an object file into one with ld.lld (or a wasm object into a wasm
// module with wasm-ld), and reading back what a shared object exports and imports (the driver
// and tests check that an artifact imports nothing).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::codegen {

// Links the ELF relocatable `object` into a shared object named `soname`, with no undefined
// symbols allowed, by running ld.lld (KILN_LD_LLD, or the KILN_LD_LLD environment variable) in
// a private temporary directory. A link failure is INTERNAL with lld's output.
// Each of `needed` becomes a DT_NEEDED entry and provides the symbols it defines.
struct NeededLibrary {
  std::string soname;  // "libopenblas.so.0"
  // An ELF relocatable for the same target defining the library's functions (stubs suffice:
  // only their names and the soname go into the artifact).
  std::string stub_object;
};
absl::StatusOr<std::string> LinkSharedObject(std::string_view object, const std::string& soname,
                                             const std::vector<NeededLibrary>& needed = {});

// Links the wasm relocatable `object` into a wasm module (no entry point, a growable exported
// memory, the stack first so an overflow traps instead of overwriting data) exporting the
// artifact ABI's four functions, kiln_wasm_env and __heap_base (where the host's heap may
// start). Undefined symbols are an error except the "kiln" imports (wasm_module.h). Runs
// wasm-ld (KILN_WASM_LD, or the KILN_WASM_LD environment variable); a failure is INTERNAL.
absl::StatusOr<std::string> LinkWasmModule(std::string_view object);

struct DynamicSymbol {
  std::string name;
  bool undefined = false;  // imported from elsewhere, rather than defined by the object
};

// The dynamic symbol table of an ELF shared object (the null symbol left out).
absl::StatusOr<std::vector<DynamicSymbol>> ListDynamicSymbols(std::string_view shared_object);

}  // namespace kiln::codegen
