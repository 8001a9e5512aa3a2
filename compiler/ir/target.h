// Target descriptions: what a backend compiles for. The canonical form is what cache keys
// use, so two spellings of one target share an entry.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::ir {

struct Target {
  // Display name: a preset's name ("x86_64"), or for a description "x86_64-custom-" and 8 hex
  // digits of a hash of the canonical form. Safe as one path component (artifact folders).
  std::string preset;
  std::string triple;    // LLVM triple, normalized ("x86_64-unknown-linux-gnu")
  std::string cpu;       // LLVM cpu name
  std::string features;  // LLVM feature string, sorted and deduplicated: "+avx2,+fma"
  int vector_bits = 128;
  std::string artifact_file = "model.so";
  // CPU targets: the thread count the artifact starts with (the runtime's default otherwise
  // is one); 0 when the description does not say.
  int threads = 0;
  // GPU targets only (0 elsewhere): threads per block and shared memory per block, in bytes.
  int threads_per_block = 0;
  int64_t shared_memory = 0;
  // Libraries the machine has, which kernels may call instead of generated loops
  // (ExternLibrary below: "openblas", "dnnl"); sorted, each once.
  std::vector<std::string> libraries;

  // "triple=...;cpu=...;features=...;vector_bits=...": names no preset, so a preset and a
  // description of the same target are equal.
  std::string Canonical() const;
  // The triple's first component: "x86_64", "aarch64", "riscv64", "wasm32" or "nvptx64".
  std::string Arch() const;
  // An NVIDIA GPU (nvptx64): kernels are launched over blocks and threads.
  bool IsGpu() const;
  // Vector registers the schedules may plan with: 32 on aarch64, riscv64 and AVX-512, else 16.
  int VectorRegisters() const;
  // Whether `library` is one of `libraries`.
  bool HasLibrary(std::string_view library) const;
};

// A function of an external library, as kernels call it: an arith Call whose name is the
// function's. `params` has a letter per argument: 'c' an i8 value (a C char), 'i' an i32
// value, 'l' an i64 value, 'f' an f32 value, 'p' a pointer, written as a load of a buffer element
// whose address is passed (the function may read and write the buffer from that element on). The
// function returns nothing.
struct ExternFunction {
  const char* name;
  const char* params;
};

// A library a target description may name with libraries=NAME. Artifacts that call it need
// it (DT_NEEDED `soname`) and name it in their manifest.
struct ExternLibrary {
  const char* name;
  const char* soname;
  std::vector<ExternFunction> functions;
  std::vector<const char*> archs;  // where the library exists
};
// "openblas": OpenBLAS's CBLAS (cblas_sgemm) and openblas_set_num_threads, 32-bit integers
// (Debian's libopenblas0, not the 64-bit-index libopenblas64).
// "dnnl": oneDNN's dnnl_sgemm (Debian's libdnnl2) and OpenMP's omp_set_num_threads.
const std::vector<ExternLibrary>& ExternLibraries();
// The library that defines the function `name`, or null for any other call.
const ExternLibrary* LibraryOfFunction(std::string_view name);
const ExternFunction* FindExternFunction(std::string_view name);

// Resolves a preset name (see ListPresetTargets) or a description
// "triple=T;cpu=C;features=+a,-b;vector_bits=N" (keys in any order; all but triple optional:
// cpu defaults to the arch's baseline, "x86-64", "generic" or "generic-rv64"; vector_bits on
// x86_64 to 512 with +avx512f, 256 with +avx2 or +avx, else 128, and to 128 elsewhere). The
// triple's arch must be x86_64, aarch64, riscv64 or wasm32. libraries=a,b names the
// libraries the target has (ExternLibraries); each must exist for the arch. "host" is resolved by
// driver::ResolveTarget, which asks LLVM what this machine is.
// Unknown presets, keys, malformed pairs and unsupported values are INVALID_ARGUMENT naming
// them. Whether LLVM knows the cpu and features is checked by codegen::CheckTarget.
absl::StatusOr<Target> ParseTarget(std::string_view text);
std::vector<Target> ListPresetTargets();

}  // namespace kiln::ir
