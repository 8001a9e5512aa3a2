#include "server/kilnd_flags.h"

#include <fstream>
#include <functional>
#include <map>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/upload.h"
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

absl::Status ParseLogFormat(const std::string& text, bool* json) {
  if (text != "text" && text != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format wants text or json, got \"", text, "\""));
  }
  *json = text == "json";
  return absl::OkStatus();
}

absl::Status ParseSeconds(const std::string& flag, const std::string& text, absl::Duration* out) {
  int64_t seconds = 0;
  if (absl::Status status = ParseNumber<int64_t>(flag, text, &seconds, 0); !status.ok()) {
    return status;
  }
  *out = absl::Seconds(seconds);
  return absl::OkStatus();
}

// 0 (no limit) or at least a chunk per second, so that one wait for the rate stays short.
absl::Status ParseUploadRate(const std::string& text, ServiceOptions* service) {
  int64_t rate = 0;
  if (!absl::SimpleAtoi(text, &rate) || (rate != 0 && rate < int64_t{kMaxChunkBytes})) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-upload-bytes-per-second wants 0 (no limit) or at least ",
                     kMaxChunkBytes, ", got \"", text, "\""));
  }
  service->max_upload_bytes_per_second = rate;
  return absl::OkStatus();
}

// 0 (no limit) or enough threads for gRPC's own pollers and a few calls.
absl::Status ParseMaxRpcs(const std::string& text, ServerOptions* server) {
  constexpr int kFewest = 4;
  int rpcs = 0;
  if (!absl::SimpleAtoi(text, &rpcs) || (rpcs != 0 && rpcs < kFewest)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-rpcs wants 0 (no limit) or at least ",
                                                   kFewest, ", got \"", text, "\""));
  }
  server->max_rpcs = rpcs;
  return absl::OkStatus();
}

using Setter = std::function<absl::Status(const std::string& value)>;

std::map<std::string, Setter> Setters(KilndFlags& flags) {
  ServiceOptions& service = flags.server.service;
  TlsOptions& tls = flags.server.tls;
  return {
      {"listen", [&](const std::string& v) { return SetText(v, &flags.server.listen_address); }},
      {"data-dir", [&](const std::string& v) { return SetText(v, &flags.server.data_dir); }},
      {"log-level", [&](const std::string& v) { return ParseLogLevel(v, &flags.log_level); }},
      {"log-format", [&](const std::string& v) { return ParseLogFormat(v, &flags.json_logs); }},
      {"token-file", [&](const std::string& v) { return SetText(v, &flags.server.token_file); }},
      {"metrics-listen",
       [&](const std::string& v) { return SetText(v, &flags.server.metrics_listen); }},
      {"postgres", [&](const std::string& v) { return SetText(v, &flags.server.postgres); }},
      {"fleet-lease-seconds",
       [&](const std::string& v) {
         absl::Status status =
             ParseSeconds("fleet-lease-seconds", v, &flags.server.fleet.lease_ttl);
         if (status.ok() && flags.server.fleet.lease_ttl <= absl::ZeroDuration()) {
           return absl::InvalidArgumentError("--fleet-lease-seconds must be at least 1");
         }
         return status;
       }},
      {"tls-cert", [&](const std::string& v) { return SetText(v, &tls.cert_file); }},
      {"tls-key", [&](const std::string& v) { return SetText(v, &tls.key_file); }},
      {"tls-client-ca", [&](const std::string& v) { return SetText(v, &tls.client_ca_file); }},
      {"max-cache-bytes",
       [&](const std::string& v) {
         return ParseNumber<uint64_t>("max-cache-bytes", v, &flags.server.max_cache_bytes, 0);
       }},
      {"drain-seconds",
       [&](const std::string& v) { return ParseSeconds("drain-seconds", v, &flags.server.drain); }},
      {"max-job-seconds",
       [&](const std::string& v) {
         return ParseNumber<int64_t>("max-job-seconds", v, &service.max_job_seconds, 0);
       }},
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
      {"job-memory-bytes",
       [&](const std::string& v) {
         return ParseNumber<int64_t>("job-memory-bytes", v, &service.job_memory_bytes, 0);
       }},
      {"max-upload-bytes-per-second",
       [&](const std::string& v) { return ParseUploadRate(v, &service); }},
      {"max-streams",
       [&](const std::string& v) {
         return ParseNumber("max-streams", v, &flags.server.max_streams_per_connection);
       }},
      {"max-rpcs", [&](const std::string& v) { return ParseMaxRpcs(v, &flags.server); }},
  };
}

// `name = value` lines, as "--name=value" arguments; blank lines and # comments skipped.
absl::StatusOr<std::vector<std::string>> ReadConfigFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat("--config: cannot read ", path));
  }
  std::vector<std::string> args;
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    const size_t equals = text.find('=');
    if (equals == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": expected `name = value`, got \"", text, "\""));
    }
    absl::string_view name = absl::StripAsciiWhitespace(text.substr(0, equals));
    absl::string_view value = absl::StripAsciiWhitespace(text.substr(equals + 1));
    if (name == "config") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": config files do not nest"));
    }
    args.push_back(absl::StrCat("--", name, "=", value));
  }
  return args;
}

// The config file's settings, then the command line's: a flag overrides the file.
absl::StatusOr<std::vector<std::string>> WithConfigFile(const std::vector<std::string>& args) {
  std::vector<std::string> merged;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
    } else if (args[i] == "--config" && i + 1 < args.size()) {
      path = args[i + 1];
    } else {
      continue;
    }
    absl::StatusOr<std::vector<std::string>> file = ReadConfigFile(path);
    if (!file.ok()) return file.status();
    merged.insert(merged.end(), file->begin(), file->end());
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--config=", 0) == 0) continue;
    if (args[i] == "--config") {
      ++i;
      continue;
    }
    merged.push_back(args[i]);
  }
  return merged;
}

}  // namespace

absl::StatusOr<KilndFlags> ParseKilndFlags(const std::vector<std::string>& command_line) {
  absl::StatusOr<std::vector<std::string>> merged = WithConfigFile(command_line);
  if (!merged.ok()) return merged.status();
  const std::vector<std::string>& args = *merged;
  KilndFlags flags;
  flags.server.service.job_memory_bytes = kDefaultJobMemoryBytes;
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
  const ServerOptions& server = defaults.server;
  const ServiceOptions& service = server.service;
  return absl::StrCat(
      "usage: kilnd [flags]\n",
      "  --config FILE            `name = value` lines of these flags; the command line wins\n",
      "  --listen HOST:PORT       address to serve on (default ", server.listen_address, ")\n",
      "  --data-dir DIR           cache directory, holds kiln.db (default ", server.data_dir, ")\n",
      "  --log-level LEVEL        trace|debug|info|warn|error|critical|off (default ",
      defaults.log_level, ")\n",
      "  --log-format FORMAT      text|json: json writes one object per line (default text)\n",
      "  --token-file FILE        lines `TOKEN TENANT ROLE[,ROLE]`; without it anyone is admin\n",
      "  --metrics-listen H:P     serve Prometheus metrics over HTTP at /metrics\n",
      "  --postgres CONNINFO      the fleet's shared tier (libpq conninfo; password: PGPASSWORD)\n",
      "  --fleet-lease-seconds N  a compile lease lapses N s after its replica died (default ",
      absl::ToInt64Seconds(server.fleet.lease_ttl), ")\n",
      "  --tls-cert FILE          PEM certificate chain; with --tls-key the port speaks TLS\n",
      "  --tls-key FILE           PEM private key\n",
      "  --tls-client-ca FILE     PEM CA bundle: clients must present a certificate it signed\n",
      "  --max-cache-bytes N      cache size cap, least recently used artifacts go first "
      "(default 0: none)\n",
      "  --max-model-bytes N      largest model accepted (default ", service.max_model_bytes, ")\n",
      "  --max-jobs N             jobs running at once (default 0: one per core)\n",
      "  --max-queued-jobs N      jobs waiting before RESOURCE_EXHAUSTED (default ",
      service.max_queued_jobs, ")\n",
      "  --max-job-seconds N      a job's time limit, DEADLINE_EXCEEDED after (default 0: none)\n",
      "  --job-memory-bytes N     each compile runs in a worker process with this much address\n"
      "                           space, more is RESOURCE_EXHAUSTED (default ",
      kDefaultJobMemoryBytes, ";\n",
      "                           0: compile inside kilnd, unprotected)\n",
      "  --max-upload-bytes-per-second N\n",
      "                           an upload is read no faster than this (default 0: no limit;\n",
      "                           else at least ", kMaxChunkBytes, ")\n",
      "  --max-streams N          concurrent calls per client connection (default ",
      server.max_streams_per_connection, ")\n",
      "  --max-rpcs N             calls served at once, more are RESOURCE_EXHAUSTED (default ",
      server.max_rpcs, ";\n", "                           0: no limit)\n",
      "  --drain-seconds N        on SIGTERM, how long jobs in flight may finish (default ",
      absl::ToInt64Seconds(server.drain), ")\n");
}

}  // namespace kiln::server
