#include "compiler/schedule/trace.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace kiln::schedule {

int64_t Trace::Get(std::string_view knob, int64_t fallback) const {
  for (const Decision& d : decisions) {
    if (d.knob == knob) return d.value;
  }
  return fallback;
}

std::string Trace::ToJson() const {
  // nlohmann::json keeps keys sorted: the canonical form the tuning database stores.
  nlohmann::json steps = nlohmann::json::array();
  for (const Decision& d : decisions) steps.push_back({{"knob", d.knob}, {"value", d.value}});
  nlohmann::json json = {{"rule", rule}, {"decisions", steps}};
  return json.dump();
}

absl::StatusOr<Trace> ParseTrace(std::string_view text) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule trace ", std::string(what), ": ", std::string(text)));
  };
  if (json.is_discarded()) return bad("is not JSON");
  if (!json.is_object() || !json.contains("rule") || !json["rule"].is_string()) {
    return bad("has no \"rule\" string");
  }
  if (!json.contains("decisions") || !json["decisions"].is_array()) {
    return bad("has no \"decisions\" array");
  }
  Trace trace{json["rule"].get<std::string>(), {}};
  for (const nlohmann::json& step : json["decisions"]) {
    if (!step.is_object() || !step.contains("knob") || !step["knob"].is_string() ||
        !step.contains("value") || !step["value"].is_number_integer()) {
      return bad("has a decision that is not {\"knob\": string, \"value\": integer}");
    }
    trace.decisions.push_back({step["knob"].get<std::string>(), step["value"].get<int64_t>()});
  }
  return trace;
}

Trace SearchSpace::Default() const {
  Trace trace{rule, {}};
  for (const Knob& knob : knobs) trace.decisions.push_back({knob.name, knob.choices.front()});
  return trace;
}

bool SearchSpace::Contains(const Trace& trace) const {
  if (trace.rule != rule || trace.decisions.size() != knobs.size()) return false;
  for (size_t i = 0; i < knobs.size(); ++i) {
    const Decision& d = trace.decisions[i];
    if (d.knob != knobs[i].name) return false;
    if (std::find(knobs[i].choices.begin(), knobs[i].choices.end(), d.value) ==
        knobs[i].choices.end()) {
      return false;
    }
  }
  return true;
}

int64_t SearchSpace::Size() const {
  int64_t size = 1;
  for (const Knob& knob : knobs) {
    int64_t n = static_cast<int64_t>(knob.choices.size());
    if (size > std::numeric_limits<int64_t>::max() / std::max<int64_t>(n, 1)) {
      return std::numeric_limits<int64_t>::max();
    }
    size *= n;
  }
  return size;
}

}  // namespace kiln::schedule
