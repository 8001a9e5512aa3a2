#include "compiler/ir/target.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {

std::string Target::Canonical() const {
  return absl::StrCat("preset=", preset, ";triple=", triple, ";cpu=", cpu, ";features=", features,
                      ";vector_bits=", vector_bits);
}

std::vector<Target> ListPresetTargets() {
  // x86_64 is the baseline every x86-64 server runs (SSE2); later presets add levels.
  return {
      Target{"x86_64", "x86_64-unknown-linux-gnu", "x86-64", "", 128, "model.so"},
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
