#include "compiler/ir/target.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/arith/check.h"

namespace kiln::ir {
namespace {

// What differs between the architectures Kiln compiles for, beyond LLVM's own knowledge.
struct Arch {
  const char* name;         // the triple's first component
  const char* default_cpu;  // LLVM's baseline cpu for the arch
  const char* artifact_file;
};

constexpr Arch kArchs[] = {
    {"x86_64", "x86-64", "model.so"},        {"aarch64", "generic", "model.so"},
    {"riscv64", "generic-rv64", "model.so"}, {"wasm32", "generic", "model.wasm"},
    {"nvptx64", "sm_80", "model.so"},
};

const Arch* FindArch(std::string_view name) {
  for (const Arch& arch : kArchs) {
    if (name == arch.name) return &arch;
  }
  return nullptr;
}

std::string SupportedArchs() {
  std::vector<std::string> names;
  for (const Arch& arch : kArchs) names.push_back(arch.name);
  return absl::StrJoin(names, ", ");
}

// LLVM's vendor names (llvm::Triple::VendorType); a triple whose second component is none of
// these has no vendor, and LLVM's normalization inserts "unknown" there.
bool IsLLVMVendor(const std::string& name) {
  static const char* const kVendors[] = {"unknown", "apple", "pc",   "scei", "sie",
                                         "fsl",     "ibm",   "img",  "mti",  "nvidia",
                                         "csr",     "amd",   "mesa", "suse", "oe"};
  return std::find(std::begin(kVendors), std::end(kVendors), name) != std::end(kVendors);
}

// The triple as llvm::Triple::normalize writes it, for the triples of the supported archs:
// "x86_64-linux-gnu" -> "x86_64-unknown-linux-gnu". (The ir layer does not link LLVM;
// codegen::CheckTarget rejects a triple that LLVM would normalize differently.)
absl::StatusOr<std::string> NormalizeTriple(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '-');
  if (parts.empty() || parts[0].empty()) {
    return absl::InvalidArgumentError(absl::StrCat("target triple '", text, "' has no arch"));
  }
  if (!FindArch(parts[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat("target triple '", text, "': arch '", parts[0],
                     "' is not supported; supported archs: ", SupportedArchs()));
  }
  if (parts.size() >= 2 && !parts[1].empty() && !IsLLVMVendor(parts[1])) {
    parts.insert(parts.begin() + 1, "unknown");
  }
  for (std::string& part : parts) {
    if (part.empty()) part = "unknown";
  }
  return absl::StrJoin(parts, "-");
}

// "+fma,+avx2,+fma" -> "+avx2,+fma". Each feature is "+name" or "-name".
absl::StatusOr<std::string> NormalizeFeatures(const std::string& text) {
  std::map<std::string, char> signs;  // name -> '+' or '-'
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string feature(absl::StripAsciiWhitespace(piece));
    if (feature.size() < 2 || (feature[0] != '+' && feature[0] != '-')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target feature '", feature, "' must be '+name' (enable) or '-name' (disable)"));
    }
    std::string name = feature.substr(1);
    auto [it, inserted] = signs.emplace(name, feature[0]);
    if (!inserted && it->second != feature[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("target feature '", name, "' is both enabled and disabled"));
    }
  }
  std::vector<std::string> sorted;
  for (const auto& [name, sign] : signs) sorted.push_back(std::string(1, sign) + name);
  return absl::StrJoin(sorted, ",");
}

// Only enabled features count: on x86_64 "+avx512f" is 512-bit vectors, "+avx2" or "+avx"
// 256. NEON, SVE (at its minimum length), RVV (its minimum VLEN, Zvl128b) and wasm SIMD128
// are 128.
int DefaultVectorBits(const Arch& arch, const std::string& features) {
  if (std::string_view(arch.name) != "x86_64") return 128;
  auto has = [&](const char* name) {
    for (absl::string_view f : absl::StrSplit(features, ',')) {
      if (f == absl::StrCat("+", name)) return true;
    }
    return false;
  };
  if (has("avx512f")) return 512;
  if (has("avx2") || has("avx")) return 256;
  return 128;
}

// FNV-1a, 32 bits: a stable short hash for display names (the ir layer cannot use cache/'s
// SHA-256). Collisions only make two names alike; cache keys use the whole canonical form.
uint32_t Fnv1a32(const std::string& text) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

// threads: how many threads a CPU artifact starts with. wasm32 modules run on one thread (no
// shared memory between workers), and a GPU's are threads_per_block.
absl::Status ParseThreads(const std::string& text, std::map<std::string, std::string>& values,
                          Target& target) {
  auto it = values.find("threads");
  if (it == values.end()) return absl::OkStatus();
  if (target.IsGpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("target description '", text,
                     "': threads is for CPU targets; a GPU's block size is "
                     "threads_per_block"));
  }
  const int max = target.Arch() == "wasm32" ? 1 : 1024;
  if (!absl::SimpleAtoi(it->second, &target.threads) || target.threads < 1 ||
      target.threads > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target description '", text, "': threads '", it->second, "' must be from 1 to ", max,
        max == 1 ? " (wasm32 modules run on one thread)" : ""));
  }
  return absl::OkStatus();
}

// threads_per_block and shared_memory: for GPU targets only, where they default to 256
// threads and 48 KiB (what every CUDA GPU since sm_20 gives a block without opting in).
absl::Status ParseGpuKeys(const std::string& text, std::map<std::string, std::string>& values,
                          Target& target) {
  const bool gpu = target.IsGpu();
  for (const char* key : {"threads_per_block", "shared_memory"}) {
    if (values.count(key) && !gpu) {
      return absl::InvalidArgumentError(absl::StrCat("target description '", text, "': ", key,
                                                     " applies to GPU targets (nvptx64) only"));
    }
  }
  if (!gpu) return absl::OkStatus();
  target.threads_per_block = 256;
  target.shared_memory = 48 * 1024;
  if (auto it = values.find("threads_per_block"); it != values.end()) {
    int threads;
    if (!absl::SimpleAtoi(it->second, &threads) || threads < 32 || threads > 1024 ||
        threads % 32 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("target description '", text, "': threads_per_block '", it->second,
                       "' must be a multiple of 32 (a warp) from 32 to 1024"));
    }
    target.threads_per_block = threads;
  }
  if (auto it = values.find("shared_memory"); it != values.end()) {
    int64_t bytes;
    if (!absl::SimpleAtoi(it->second, &bytes) || bytes < 0 || bytes > 228 * 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("target description '", text, "': shared_memory '", it->second,
                       "' must be a byte count from 0 to 233472 (228 KiB, sm_90's most)"));
    }
    target.shared_memory = bytes;
  }
  return absl::OkStatus();
}

// libraries: names from ExternLibraries, each available on the target's arch; sorted and
// deduplicated, as features are, so the canonical form does not depend on the spelling.
absl::Status ParseLibraries(const std::string& text, std::map<std::string, std::string>& values,
                            Target& target) {
  auto it = values.find("libraries");
  if (it == values.end()) return absl::OkStatus();
  std::set<std::string> names;
  for (absl::string_view piece : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
    std::string name(absl::StripAsciiWhitespace(piece));
    const ExternLibrary* library = nullptr;
    std::vector<std::string> known;
    for (const ExternLibrary& l : ExternLibraries()) {
      if (name == l.name) library = &l;
      known.push_back(l.name);
    }
    if (!library) {
      return absl::InvalidArgumentError(
          absl::StrCat("target description '", text, "': unknown library '", name,
                       "'; known libraries: ", absl::StrJoin(known, ", ")));
    }
    const std::string arch = target.Arch();
    if (std::find(library->archs.begin(), library->archs.end(), arch) == library->archs.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target description '", text, "': library '", name, "' is not available for ", arch,
          "; it is for ", absl::StrJoin(library->archs, ", ")));
    }
    names.insert(name);
  }
  target.libraries.assign(names.begin(), names.end());
  return absl::OkStatus();
}

absl::StatusOr<Target> ParseDescription(const std::string& text) {
  std::map<std::string, std::string> values;
  for (absl::string_view pair : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    std::vector<absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv[0]));
    if (kv.size() != 2 || key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("target description '", text, "': malformed pair '", pair,
                       "'; expected key=value with keys triple, cpu, features, vector_bits"));
    }
    if (key != "triple" && key != "cpu" && key != "features" && key != "vector_bits" &&
        key != "threads" && key != "threads_per_block" && key != "shared_memory" &&
        key != "libraries") {
      return absl::InvalidArgumentError(
          absl::StrCat("target description '", text, "': unknown key '", key,
                       "'; known keys: triple, cpu, features, vector_bits, threads, "
                       "threads_per_block, shared_memory, libraries"));
    }
    if (!values.emplace(key, absl::StripAsciiWhitespace(kv[1])).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("target description '", text, "': key '", key, "' given twice"));
    }
  }
  auto triple = values.find("triple");
  if (triple == values.end() || triple->second.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("target description '", text, "' has no triple (triple=x86_64-linux-gnu)"));
  }
  Target target;
  absl::StatusOr<std::string> normalized = NormalizeTriple(triple->second);
  if (!normalized.ok()) return normalized.status();
  target.triple = *std::move(normalized);
  const Arch& arch = *FindArch(target.triple.substr(0, target.triple.find('-')));
  target.cpu = values["cpu"].empty() ? arch.default_cpu : values["cpu"];
  target.artifact_file = arch.artifact_file;
  absl::StatusOr<std::string> features = NormalizeFeatures(values["features"]);
  if (!features.ok()) return features.status();
  target.features = *std::move(features);
  target.vector_bits = DefaultVectorBits(arch, target.features);
  if (auto bits = values.find("vector_bits"); bits != values.end()) {
    if (!absl::SimpleAtoi(bits->second, &target.vector_bits) ||
        (target.vector_bits != 128 && target.vector_bits != 256 && target.vector_bits != 512)) {
      return absl::InvalidArgumentError(absl::StrCat("target description '", text,
                                                     "': vector_bits '", bits->second,
                                                     "' is not supported; use 128, 256 or 512"));
    }
  }
  KILN_RETURN_IF_ERROR(ParseThreads(text, values, target));
  KILN_RETURN_IF_ERROR(ParseGpuKeys(text, values, target));
  KILN_RETURN_IF_ERROR(ParseLibraries(text, values, target));
  target.preset = absl::StrFormat("%s-custom-%08x", arch.name, Fnv1a32(target.Canonical()));
  return target;
}

}  // namespace

std::string Target::Canonical() const {
  absl::StatusOr<std::string> sorted = NormalizeFeatures(features);
  std::string text =
      absl::StrCat("triple=", triple, ";cpu=", cpu, ";features=", sorted.ok() ? *sorted : features,
                   ";vector_bits=", vector_bits);
  if (threads > 0) absl::StrAppend(&text, ";threads=", threads);
  if (IsGpu()) {
    absl::StrAppend(&text, ";threads_per_block=", threads_per_block,
                    ";shared_memory=", shared_memory);
  }
  // Only when named, so the keys of targets without libraries stay as they were.
  if (!libraries.empty()) absl::StrAppend(&text, ";libraries=", absl::StrJoin(libraries, ","));
  return text;
}

bool Target::HasLibrary(std::string_view library) const {
  return std::find(libraries.begin(), libraries.end(), library) != libraries.end();
}

const std::vector<ExternLibrary>& ExternLibraries() {
  // cblas_sgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc).
  // Debian builds OpenBLAS for these three archs (libopenblas0-pthread).
  static const auto* libraries = new std::vector<ExternLibrary>{
      {"openblas",
       "libopenblas.so.0",
       {{"cblas_sgemm", "iiiiiifpipifpi"}, {"openblas_set_num_threads", "i"}},
       {"x86_64", "aarch64", "riscv64"}},
      // dnnl_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), row-major,
      // 'N'/'T' flags and int64_t dimensions (dnnl_dim_t). omp_set_num_threads is libgomp's,
      // which libdnnl.so.2 needs (Debian's oneDNN is built for OpenMP). Debian builds libdnnl2
      // for x86_64, aarch64 and ppc64el; Kiln has no ppc64el backend.
      {"dnnl",
       "libdnnl.so.2",
       {{"dnnl_sgemm", "cclllfplplfpl"}, {"omp_set_num_threads", "i"}},
       {"x86_64", "aarch64"}},
  };
  return *libraries;
}

const ExternLibrary* LibraryOfFunction(std::string_view name) {
  for (const ExternLibrary& library : ExternLibraries()) {
    for (const ExternFunction& f : library.functions) {
      if (name == f.name) return &library;
    }
  }
  return nullptr;
}

const ExternFunction* FindExternFunction(std::string_view name) {
  for (const ExternLibrary& library : ExternLibraries()) {
    for (const ExternFunction& f : library.functions) {
      if (name == f.name) return &f;
    }
  }
  return nullptr;
}

bool Target::IsGpu() const { return Arch() == "nvptx64"; }

std::string Target::Arch() const { return triple.substr(0, triple.find('-')); }

int Target::VectorRegisters() const {
  const std::string arch = Arch();
  if (arch == "aarch64" || arch == "riscv64") return 32;
  return arch == "x86_64" && vector_bits >= 512 ? 32 : 16;
}

// CUDA GPUs: Ampere (A100, sm_80) and Hopper (H100, sm_90), PTX ISA 7.8 (CUDA 11.8), which
// both accept. The artifact is an x86_64 shared object (the server beside the GPU) carrying
// the kernels' PTX, which the runtime loads through the CUDA driver.
static std::vector<Target> GpuPresetTargets() {
  Target sm80{"cuda-sm80", "nvptx64-nvidia-cuda", "sm_80", "+ptx78", 128, "model.so"};
  sm80.threads_per_block = 256;
  sm80.shared_memory = 48 * 1024;
  Target sm90 = sm80;
  sm90.preset = "cuda-sm90";
  sm90.cpu = "sm_90";
  return {sm80, sm90};
}

std::vector<Target> ListPresetTargets() {
  // x86_64 is the baseline every x86-64 server runs (SSE2); x86_64-v3 is the level of
  // Haswell (2013) and later: AVX2 and FMA, 256-bit vectors; x86_64-v4 adds AVX-512 (Skylake-SP,
  // Zen 4 and later): 512-bit vectors and 32 vector registers. aarch64 is ARMv8-A with NEON
  // (every 64-bit Arm phone and board); aarch64-sve adds SVE, used by LLVM where it helps at
  // the 128-bit minimum length, so the artifact runs on any SVE vector length. riscv64 is
  // RV64GC with the V extension (RVV 1.0, VLEN >= 128). wasm32 is WebAssembly 1.0 for browsers
  // and Node.js; wasm32-simd adds SIMD128. Features are listed sorted, as in the canonical
  // form.
  std::vector<Target> presets = {
      Target{"x86_64", "x86_64-unknown-linux-gnu", "x86-64", "", 128, "model.so"},
      Target{"x86_64-v3", "x86_64-unknown-linux-gnu", "x86-64-v3", "+avx2,+fma", 256, "model.so"},
      Target{"x86_64-v4", "x86_64-unknown-linux-gnu", "x86-64-v4",
             "+avx2,+avx512bw,+avx512dq,+avx512f,+avx512vl,+evex512,+fma", 512, "model.so"},
      Target{"aarch64", "aarch64-unknown-linux-gnu", "generic", "+neon", 128, "model.so"},
      Target{"aarch64-sve", "aarch64-unknown-linux-gnu", "generic", "+neon,+sve", 128, "model.so"},
      Target{"riscv64", "riscv64-unknown-linux-gnu", "generic-rv64", "+a,+c,+d,+f,+m,+v", 128,
             "model.so"},
      Target{"wasm32", "wasm32-unknown-unknown", "generic", "", 128, "model.wasm"},
      Target{"wasm32-simd", "wasm32-unknown-unknown", "generic", "+simd128", 128, "model.wasm"},
  };
  for (Target& gpu : GpuPresetTargets()) presets.push_back(std::move(gpu));
  return presets;
}

absl::StatusOr<Target> ParseTarget(std::string_view text) {
  if (text.find('=') != std::string_view::npos) return ParseDescription(std::string(text));
  std::vector<std::string> names;
  for (const Target& t : ListPresetTargets()) {
    if (t.preset == text) return t;
    names.push_back(t.preset);
  }
  if (text == "host") {
    return absl::InvalidArgumentError(
        "target 'host' names the compiling machine; driver::ResolveTarget resolves it");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown target '", std::string(text), "'; known targets: ", absl::StrJoin(names, ", "),
      ", host, or a description triple=T;cpu=C;features=+a,+b;vector_bits=N"));
}

}  // namespace kiln::ir
