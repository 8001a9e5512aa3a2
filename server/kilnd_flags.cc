#include "server/kilnd_flags.h"

#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/common.h"

namespace kiln::server {
namespace {

template <typename T>
absl::Status ParseNumber(const std::string& flag, const std::string& text, T* out, T min = 1) {
  if (!absl::SimpleAtoi(text, out) || *out < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " wants a number of at least ", min, ", got \"", text, "\""));
  }
  return absl::OkStatus();
}

absl::Status ParseLogLevel(const std::string& text, std::string* out) {
  // spdlog maps unknown names to "off"; only accept "off" when it was asked for.
  if (spdlog::level::from_str(text) == spdlog::level::off && text != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level wants trace, debug, info, warn, error, critical or off, got \"", text, "\""));
  }
  *out = text;
  return absl::OkStatus();
}

absl::Status SetText(const std::string& text, std::string* out) {
  *out = text;
  return absl::OkStatus();
}

using Setter = std::function<absl::Status(const std::string& value)>;

std::map<std::string, Setter> Setters(KilndFlags& flags) {
  ServiceOptions& service = flags.server.service;
  return {
      {"listen", [&](const std::string& v) { return SetText(v, &flags.server.listen_address); }},
      {"data-dir", [&](const std::string& v) { return SetText(v, &flags.server.data_dir); }},
      {"log-level", [&](const std::string& v) { return ParseLogLevel(v, &flags.log_level); }},
      {"max-model-bytes",
       [&](const std::string& v) {
         return ParseNumber("max-model-bytes", v, &service.max_model_bytes);
       }},
      {"max-jobs",
       [&](const std::string& v) { return ParseNumber("max-jobs", v, &service.max_running_jobs); }},
      {"max-queued-jobs",
       [&](const std::string& v) {
         return ParseNumber("max-queued-jobs", v, &service.max_queued_jobs, 0);
       }},
  };
}

}  // namespace

absl::StatusOr<KilndFlags> ParseKilndFlags(const std::vector<std::string>& args) {
  KilndFlags flags;
  const std::map<std::string, Setter> setters = Setters(flags);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
    }
    const size_t equals = arg.find('=');
    const std::string name =
        equals == std::string::npos ? arg.substr(2) : arg.substr(2, equals - 2);
    auto setter = setters.find(name);
    if (setter == setters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, "\n", KilndUsage()));
    }
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    }
    if (absl::Status status = setter->second(value); !status.ok()) return status;
  }
  return flags;
}

std::string KilndUsage() {
  const KilndFlags defaults;
  const ServiceOptions& service = defaults.server.service;
  return absl::StrCat(
      "usage: kilnd [flags]\n", "  --listen HOST:PORT       address to serve on (default ",
      defaults.server.listen_address, ")\n",
      "  --data-dir DIR           cache directory, holds kiln.db (default ",
      defaults.server.data_dir, ")\n",
      "  --log-level LEVEL        trace|debug|info|warn|error|critical|off (default ",
      defaults.log_level, ")\n", "  --max-model-bytes N      largest model accepted (default ",
      service.max_model_bytes, ")\n",
      "  --max-jobs N             compile jobs running at once (default ", service.max_running_jobs,
      ")\n", "  --max-queued-jobs N      jobs waiting before RESOURCE_EXHAUSTED (default ",
      service.max_queued_jobs, ")\n");
}

}  // namespace kiln::server
