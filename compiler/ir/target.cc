#include "compiler/ir/target.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {

std::string Target::Canonical() const {
  return absl::StrCat("preset=", preset, ";triple=", triple, ";cpu=", cpu, ";features=", features,
                      ";vector_bits=", vector_bits);
}

std::vector<Target> ListPresetTargets() {
  // x86_64 is the baseline every x86-64 server runs (SSE2); x86_64-v3 is the level of
  // Haswell (2013) and later: AVX2 and FMA, 256-bit vectors; x86_64-v4 adds AVX-512 (Skylake-SP,
  // Zen 4 and later): 512-bit vectors and 32 vector registers.
  return {
      Target{"x86_64", "x86_64-unknown-linux-gnu", "x86-64", "", 128, "model.so"},
      Target{"x86_64-v3", "x86_64-unknown-linux-gnu", "x86-64-v3", "+avx2,+fma", 256, "model.so"},
      Target{"x86_64-v4", "x86_64-unknown-linux-gnu", "x86-64-v4",
             "+avx2,+fma,+avx512f,+avx512bw,+avx512dq,+avx512vl,+evex512", 512, "model.so"},
  };
}

absl::StatusOr<Target> ParseTarget(std::string_view text) {
  std::vector<std::string> names;
  for (const Target& t : ListPresetTargets()) {
    if (t.preset == text) return t;
    names.push_back(t.preset);
  }
  if (text == "host") return ListPresetTargets().front();
  return absl::InvalidArgumentError(absl::StrCat("unknown target '", std::string(text),
                                                 "'; known targets: ", absl::StrJoin(names, ", "),
                                                 ", host"));
}

}  // namespace kiln::ir
