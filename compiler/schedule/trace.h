// A schedule as the tuner records it and replays it: the rule that built the kernel and the
// decisions the rule took (a knob each: tile sizes, vector widths, parallel grain). A rule
// given the same trace builds the same kernel, so a trace is all the tuning database keeps.
// JSON: {"decisions":[{"knob":"tile_rows","value":6},...],"rule":"matmul"} (keys sorted, so
// the text is canonical), knobs in the order the rule takes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::schedule {

struct Decision {
  std::string knob;
  int64_t value = 0;
  bool operator==(const Decision&) const = default;
};

struct Trace {
  std::string rule;
  std::vector<Decision> decisions;

  // The value decided for `knob`, or `fallback` when the trace does not decide it.
  int64_t Get(std::string_view knob, int64_t fallback) const;
  std::string ToJson() const;
  bool operator==(const Trace&) const = default;
};

// A trace from ToJson's text; INVALID_ARGUMENT naming what is malformed.
absl::StatusOr<Trace> ParseTrace(std::string_view json);

// A knob and the values a rule accepts for it; the first is the default rule's choice.
struct Knob {
  std::string name;
  std::vector<int64_t> choices;
};

// Every schedule a rule can build for one kernel: the product of its knobs' choices.
struct SearchSpace {
  std::string rule;
  std::vector<Knob> knobs;
  // Traces of this space that the tuner measures right after the defaults, before its search:
  // schedules the rule expects to beat its default on some machines, which a short random
  // search could miss because several knobs must change together.
  std::vector<Trace> seeds;

  // The default rule's decisions: every knob's first choice.
  Trace Default() const;
  // Whether `trace` is of this rule and decides every knob with one of its choices (and
  // nothing else), so that replaying it builds a valid kernel.
  bool Contains(const Trace& trace) const;
  // How many schedules the space holds (saturates at INT64_MAX).
  int64_t Size() const;
};

}  // namespace kiln::schedule
