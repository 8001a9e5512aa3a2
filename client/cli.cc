#include "client/cli.h"

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln::client {
namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  kiln compile MODEL.onnx --target T [--target T ...] --out DIR [--server HOST:PORT]\n"
    "               [--dim-bound NAME=N ...] [--timeout SECONDS]\n"
    "               [--tune-trials N] [--tune-time SECONDS]   (with --server, or with --cache)\n"
    "               [--cache DIR]   (in-process: the tuning database's folder)\n"
    "  kiln run ARTIFACT_DIR --input NAME=FILE ... --out DIR\n"
    "  kiln run MODEL.onnx --reference --input NAME=FILE ... --out DIR\n"
    "  kiln bench ARTIFACT_DIR [--input NAME=FILE | --shape NAME=D0,D1,... ...] [--threads N]\n"
    "             [--repeat N] [--warmup N]\n"
    "  kiln inspect MODEL.onnx [--after PASS|llvm] [--target T] [--cache DIR]\n"
    "            (--cache: kernels scheduled from the tuning records there, as compile does)\n"
    "  kiln targets [--server HOST:PORT] [--timeout SECONDS]\n"
    "  kiln tune MODEL.onnx [--target T] [--trials N] [--trials-per-kernel N] [--time SECONDS]\n"
    "            [--dim NAME=N ...] [--buckets N,N,...|auto] [--dim-bound NAME=N ...] [--retune]\n"
    "            [--cache DIR | --server HOST:PORT [--timeout SECONDS]]\n"
    "            (--buckets: kernels with a symbolic extent are tuned at each value; auto:\n"
    "            at the powers of two up to its --dim-bound)\n"
    "  kiln tuning export [--cache DIR]        tuning records as JSON lines\n"
    "  kiln tuning import FILE [--cache DIR]   adds the records of FILE (JSON lines)\n"
    "  kiln tuning stats [--cache DIR]\n"
    "    (--cache: the folder holding kiln.db, as kilnd's --data-dir; default ./var)\n"
    "  kiln jobs [list] --server HOST:PORT            kilnd's jobs, one per line\n"
    "  kiln jobs get|cancel ID --server HOST:PORT\n"
    "  kiln jobs watch ID [--from N] --server HOST:PORT   events until the job ends\n"
    "  kiln cache stats [--cache DIR | --server HOST:PORT]\n"
    "  kiln cache evict --all|--to-bytes N|--artifact DIGEST [--cache DIR | --server HOST:PORT]\n"
    "    (models and tuning records are never evicted; through kilnd: the admin role)\n"
    "With --server, the environment says how to reach kilnd: KILN_TOKEN (or KILN_TOKEN_FILE)\n"
    "sends a bearer token; KILN_TLS_CA turns TLS on, KILN_TLS_CERT and KILN_TLS_KEY add a\n"
    "client certificate.\n"
    "Results go to stdout, progress and errors to stderr.\n";

struct FlagSpec {
  std::string name;
  bool repeated = false;
  bool takes_value = true;  // false: a switch such as --reference
};

struct ParsedWords {
  std::vector<std::string> positionals;
  std::map<std::string, std::vector<std::string>> flags;

  std::string Get(const std::string& name) const {
    auto it = flags.find(name);
    return it == flags.end() ? "" : it->second.front();
  }
  std::vector<std::string> GetAll(const std::string& name) const {
    auto it = flags.find(name);
    return it == flags.end() ? std::vector<std::string>{} : it->second;
  }
};

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<ParsedWords> SplitWords(const std::vector<std::string>& words,
                                       const std::vector<FlagSpec>& specs) {
  ParsedWords parsed;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.size() < 2 || word[0] != '-') {
      parsed.positionals.push_back(word);
      continue;
    }
    std::string name = word == "-t" ? "target" : word.substr(2);
    std::string value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos && word.starts_with("--")) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) spec = s.name == name ? &s : spec;
    if (spec == nullptr || (word != "-t" && !word.starts_with("--"))) {
      return Invalid(absl::StrCat("unknown flag '", word, "'"));
    }
    if (!spec->takes_value) {
      if (inline_value) return Invalid(absl::StrCat("--", name, " takes no value"));
      parsed.flags[name].push_back("true");
      continue;
    }
    if (!inline_value && ++i == words.size()) {
      return Invalid(absl::StrCat("--", name, " needs a value"));
    }
    if (!inline_value) value = words[i];
    std::vector<std::string>& values = parsed.flags[name];
    if (!spec->repeated && !values.empty())
      return Invalid(absl::StrCat("--", name, " given twice"));
    values.push_back(value);
  }
  return parsed;
}

absl::StatusOr<std::string> OnePositional(const ParsedWords& parsed, const std::string& what) {
  if (parsed.positionals.size() != 1) {
    return Invalid(absl::StrCat("expected one ", what, ", got ", parsed.positionals.size(),
                                " positional arguments"));
  }
  return parsed.positionals[0];
}

// "NAME=VALUE" with both parts non-empty.
absl::StatusOr<std::pair<std::string, std::string>> SplitAssignment(const std::string& flag,
                                                                    const std::string& text) {
  std::pair<std::string, std::string> parts = absl::StrSplit(text, absl::MaxSplits('=', 1));
  if (parts.first.empty() || parts.second.empty()) {
    return Invalid(absl::StrCat("--", flag, " expects NAME=VALUE, got '", text, "'"));
  }
  return parts;
}

absl::StatusOr<int64_t> PositiveInt(const std::string& flag, const std::string& text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    return Invalid(absl::StrCat("--", flag, " expects a positive integer, got '", text, "'"));
  }
  return value;
}

absl::StatusOr<int64_t> NonNegativeInt(const std::string& flag, const std::string& text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return Invalid(absl::StrCat("--", flag, " expects a non-negative integer, got '", text, "'"));
  }
  return value;
}

// "NAME=D0,D1,..." with non-negative integer dims.
absl::StatusOr<std::pair<std::string, std::vector<int64_t>>> ShapeAssignment(
    const std::string& text) {
  auto assignment = SplitAssignment("shape", text);
  if (!assignment.ok()) return assignment.status();
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(assignment->second, ',')) {
    int64_t dim = 0;
    if (!absl::SimpleAtoi(part, &dim) || dim < 0) {
      return Invalid(
          absl::StrCat("--shape ", text, ": dimension '", part, "' is not a non-negative integer"));
    }
    dims.push_back(dim);
  }
  return std::make_pair(assignment->first, dims);
}

absl::StatusOr<int64_t> TimeoutSeconds(const ParsedWords& parsed) {
  std::string text = parsed.Get("timeout");
  if (text.empty()) return 600;
  return PositiveInt("timeout", text);
}

absl::Status DimBounds(const ParsedWords& parsed, std::map<std::string, int64_t>* bounds) {
  for (const std::string& text : parsed.GetAll("dim-bound")) {
    auto assignment = SplitAssignment("dim-bound", text);
    if (!assignment.ok()) return assignment.status();
    absl::StatusOr<int64_t> bound = PositiveInt("dim-bound", assignment->second);
    if (!bound.ok()) return bound.status();
    (*bounds)[assignment->first] = *bound;
  }
  return absl::OkStatus();
}

// --NAME N as a count (0 allowed) into `value`, when given.
absl::Status OptionalCount(const ParsedWords& parsed, const std::string& name, int64_t* value) {
  std::string text = parsed.Get(name);
  if (text.empty()) return absl::OkStatus();
  absl::StatusOr<int64_t> n = NonNegativeInt(name, text);
  if (!n.ok()) return n.status();
  *value = *n;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompileArgs> ParseCompileArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(words, {{"target", true},
                                   {"server"},
                                   {"out"},
                                   {"dim-bound", true},
                                   {"timeout"},
                                   {"cache"},
                                   {"tune-trials"},
                                   {"tune-time"}});
  if (!parsed.ok()) return parsed.status();
  CompileArgs args;
  absl::StatusOr<std::string> model = OnePositional(*parsed, "model file");
  if (!model.ok()) return model.status();
  args.model_path = *model;
  args.targets = parsed->GetAll("target");
  args.server = parsed->Get("server");
  args.out_dir = parsed->Get("out");
  if (args.targets.empty()) return Invalid("at least one --target is needed");
  if (args.out_dir.empty()) return Invalid("--out DIR is needed");
  absl::Status bounds = DimBounds(*parsed, &args.dim_bounds);
  if (!bounds.ok()) return bounds;
  absl::StatusOr<int64_t> timeout = TimeoutSeconds(*parsed);
  if (!timeout.ok()) return timeout.status();
  args.timeout_s = *timeout;
  args.cache_dir = parsed->Get("cache");
  if (absl::Status s = OptionalCount(*parsed, "tune-trials", &args.tune_trials); !s.ok()) return s;
  if (absl::Status s = OptionalCount(*parsed, "tune-time", &args.tune_seconds); !s.ok()) return s;
  if (!args.server.empty() && !args.cache_dir.empty()) {
    return Invalid("--cache is for in-process compiles; kilnd uses its own data dir");
  }
  if ((args.tune_trials > 0 || args.tune_seconds > 0) && args.cache_dir.empty() &&
      args.server.empty()) {
    return Invalid(
        "--tune-trials and --tune-time need --cache DIR to keep the records in, or --server");
  }
  return args;
}

absl::StatusOr<TuneArgs> ParseTuneArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(words, {{"target"},
                                   {"trials"},
                                   {"trials-per-kernel"},
                                   {"time"},
                                   {"dim", true},
                                   {"buckets"},
                                   {"dim-bound", true},
                                   {"retune", false, false},
                                   {"cache"},
                                   {"server"},
                                   {"timeout"}});
  if (!parsed.ok()) return parsed.status();
  TuneArgs args;
  args.server = parsed->Get("server");
  if (!args.server.empty() && !parsed->Get("cache").empty()) {
    return Invalid("--cache is for tuning in-process; kilnd keeps records in its own data dir");
  }
  if (args.server.empty() && !parsed->Get("timeout").empty()) {
    return Invalid("--timeout is for --server");
  }
  absl::StatusOr<int64_t> timeout = TimeoutSeconds(*parsed);
  if (!timeout.ok()) return timeout.status();
  args.timeout_s = *timeout;
  absl::StatusOr<std::string> model = OnePositional(*parsed, "model file");
  if (!model.ok()) return model.status();
  args.model_path = *model;
  if (!parsed->Get("target").empty()) args.target = parsed->Get("target");
  if (!parsed->Get("cache").empty()) args.cache_dir = parsed->Get("cache");
  args.retune = !parsed->Get("retune").empty();
  if (absl::Status s = OptionalCount(*parsed, "trials", &args.trials); !s.ok()) return s;
  if (absl::Status s = OptionalCount(*parsed, "time", &args.seconds); !s.ok()) return s;
  if (std::string text = parsed->Get("trials-per-kernel"); !text.empty()) {
    absl::StatusOr<int64_t> n = PositiveInt("trials-per-kernel", text);
    if (!n.ok()) return n.status();
    args.trials_per_kernel = *n;
  }
  for (const std::string& text : parsed->GetAll("dim")) {
    auto assignment = SplitAssignment("dim", text);
    if (!assignment.ok()) return assignment.status();
    absl::StatusOr<int64_t> value = NonNegativeInt("dim", assignment->second);
    if (!value.ok()) return value.status();
    args.dim_values[assignment->first] = *value;
  }
  if (std::string text = parsed->Get("buckets"); text == "auto") {
    args.auto_buckets = true;
  } else if (!text.empty()) {
    for (absl::string_view word : absl::StrSplit(text, ',')) {
      absl::StatusOr<int64_t> value = PositiveInt("buckets", std::string(word));
      if (!value.ok()) return value.status();
      args.buckets.push_back(*value);
    }
  }
  absl::Status bounds = DimBounds(*parsed, &args.dim_bounds);
  if (!bounds.ok()) return bounds;
  return args;
}

absl::StatusOr<RunArgs> ParseRunArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(words, {{"input", true}, {"out"}, {"reference", false, false}});
  if (!parsed.ok()) return parsed.status();
  RunArgs args;
  args.reference = !parsed->Get("reference").empty();
  absl::StatusOr<std::string> dir =
      OnePositional(*parsed, args.reference ? "model file" : "artifact folder");
  if (!dir.ok()) return dir.status();
  args.artifact_dir = *dir;
  args.out_dir = parsed->Get("out");
  if (args.out_dir.empty()) return Invalid("--out DIR is needed");
  for (const std::string& text : parsed->GetAll("input")) {
    auto assignment = SplitAssignment("input", text);
    if (!assignment.ok()) return assignment.status();
    args.inputs.push_back(*assignment);
  }
  return args;
}

absl::StatusOr<BenchArgs> ParseBenchArgs(const std::vector<std::string>& words) {
  auto parsed =
      SplitWords(words, {{"input", true}, {"shape", true}, {"threads"}, {"repeat"}, {"warmup"}});
  if (!parsed.ok()) return parsed.status();
  BenchArgs args;
  absl::StatusOr<std::string> dir = OnePositional(*parsed, "artifact folder");
  if (!dir.ok()) return dir.status();
  args.artifact_dir = *dir;
  for (const std::string& text : parsed->GetAll("input")) {
    auto assignment = SplitAssignment("input", text);
    if (!assignment.ok()) return assignment.status();
    args.inputs.push_back(*assignment);
  }
  for (const std::string& text : parsed->GetAll("shape")) {
    auto assignment = ShapeAssignment(text);
    if (!assignment.ok()) return assignment.status();
    args.shapes.push_back(*assignment);
  }
  if (std::string text = parsed->Get("threads"); !text.empty()) {
    absl::StatusOr<int64_t> threads = NonNegativeInt("threads", text);
    if (!threads.ok()) return threads.status();
    if (*threads > 1024) return Invalid(absl::StrCat("--threads ", text, " is over 1024"));
    args.threads = static_cast<int32_t>(*threads);
  }
  if (std::string text = parsed->Get("repeat"); !text.empty()) {
    absl::StatusOr<int64_t> repeat = PositiveInt("repeat", text);
    if (!repeat.ok()) return repeat.status();
    args.repeat = *repeat;
  }
  if (std::string text = parsed->Get("warmup"); !text.empty()) {
    absl::StatusOr<int64_t> warmup = NonNegativeInt("warmup", text);
    if (!warmup.ok()) return warmup.status();
    args.warmup = *warmup;
  }
  return args;
}

absl::StatusOr<InspectArgs> ParseInspectArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(words, {{"after"}, {"target"}, {"cache"}});
  if (!parsed.ok()) return parsed.status();
  InspectArgs args;
  absl::StatusOr<std::string> model = OnePositional(*parsed, "model file");
  if (!model.ok()) return model.status();
  args.model_path = *model;
  args.after = parsed->Get("after");
  if (!parsed->Get("target").empty()) args.target = parsed->Get("target");
  args.cache_dir = parsed->Get("cache");
  return args;
}

absl::StatusOr<TargetsArgs> ParseTargetsArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(words, {{"server"}, {"timeout"}});
  if (!parsed.ok()) return parsed.status();
  if (!parsed->positionals.empty()) {
    return Invalid(absl::StrCat("unexpected argument '", parsed->positionals[0], "'"));
  }
  TargetsArgs args;
  args.server = parsed->Get("server");
  absl::StatusOr<int64_t> timeout = TimeoutSeconds(*parsed);
  if (!timeout.ok()) return timeout.status();
  args.timeout_s = *timeout;
  return args;
}

absl::StatusOr<TuningArgs> ParseTuningArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(words, {{"cache"}});
  if (!parsed.ok()) return parsed.status();
  std::vector<std::string> positionals = parsed->positionals;
  if (positionals.empty()) return Invalid("expected export, import FILE or stats");
  TuningArgs args;
  args.action = positionals[0];
  positionals.erase(positionals.begin());
  if (args.action != "export" && args.action != "import" && args.action != "stats") {
    return Invalid(absl::StrCat("unknown action '", args.action, "'"));
  }
  if (args.action == "import") {
    if (positionals.size() != 1) return Invalid("import expects one FILE");
    args.file = positionals[0];
  } else if (!positionals.empty()) {
    return Invalid(absl::StrCat("unexpected argument '", positionals[0], "'"));
  }
  if (!parsed->Get("cache").empty()) args.cache_dir = parsed->Get("cache");
  return args;
}

absl::StatusOr<JobsArgs> ParseJobsArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(words, {{"server"}, {"timeout"}, {"from"}});
  if (!parsed.ok()) return parsed.status();
  JobsArgs args;
  const std::vector<std::string>& positionals = parsed->positionals;
  if (!positionals.empty()) args.action = positionals[0];
  if (args.action != "list" && args.action != "get" && args.action != "watch" &&
      args.action != "cancel") {
    return Invalid(absl::StrCat("unknown action '", args.action, "'"));
  }
  const size_t wanted = args.action == "list" ? 1 : 2;
  if (positionals.size() > wanted) {
    return Invalid(absl::StrCat("unexpected argument '", positionals[wanted], "'"));
  }
  if (wanted == 2) {
    if (positionals.size() < 2) return Invalid(absl::StrCat(args.action, " expects a job ID"));
    args.job_id = positionals[1];
  }
  args.server = parsed->Get("server");
  if (args.server.empty()) return Invalid("jobs live in kilnd: give --server HOST:PORT");
  if (!parsed->Get("from").empty() &&
      (!absl::SimpleAtoi(parsed->Get("from"), &args.from_event) || args.from_event < 0)) {
    return Invalid(
        absl::StrCat("--from wants an event index >= 0, got '", parsed->Get("from"), "'"));
  }
  absl::StatusOr<int64_t> timeout = TimeoutSeconds(*parsed);
  if (!timeout.ok()) return timeout.status();
  args.timeout_s = *timeout;
  return args;
}

absl::StatusOr<CacheArgs> ParseCacheArgs(const std::vector<std::string>& words) {
  auto parsed = SplitWords(
      words,
      {{"server"}, {"timeout"}, {"cache"}, {"all", false, false}, {"to-bytes"}, {"artifact"}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positionals.size() != 1 ||
      (parsed->positionals[0] != "stats" && parsed->positionals[0] != "evict")) {
    return Invalid("expected stats or evict");
  }
  CacheArgs args;
  args.action = parsed->positionals[0];
  args.server = parsed->Get("server");
  if (!parsed->Get("cache").empty()) {
    if (!args.server.empty()) return Invalid("give --cache DIR or --server HOST:PORT, not both");
    args.cache_dir = parsed->Get("cache");
  }
  args.all_artifacts = parsed->flags.contains("all");
  args.artifact_digest = parsed->Get("artifact");
  const std::string to_bytes = parsed->Get("to-bytes");
  if (!to_bytes.empty() && (!absl::SimpleAtoi(to_bytes, &args.to_bytes) || args.to_bytes < 0)) {
    return Invalid(absl::StrCat("--to-bytes wants a number >= 0, got '", to_bytes, "'"));
  }
  const int chosen = args.all_artifacts + !args.artifact_digest.empty() + !to_bytes.empty();
  if (args.action == "evict" && chosen != 1) {
    return Invalid("evict wants exactly one of --all, --to-bytes N, --artifact DIGEST");
  }
  if (args.action == "stats" && chosen != 0) return Invalid("stats takes no eviction flags");
  absl::StatusOr<int64_t> timeout = TimeoutSeconds(*parsed);
  if (!timeout.ok()) return timeout.status();
  args.timeout_s = *timeout;
  return args;
}

namespace {

// Parses the words for one command and runs it; 2 for bad usage.
template <typename Args>
int Dispatch(const std::string& command, const std::vector<std::string>& words,
             absl::StatusOr<Args> (*parse)(const std::vector<std::string>&),
             absl::Status (*run)(const Args&, Console), Console console) {
  absl::StatusOr<Args> args = parse(words);
  if (!args.ok()) {
    console.err << "kiln " << command << ": " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  absl::Status status = run(*args, console);
  if (status.ok()) return 0;
  console.err << "error: " << status << "\n";
  return 1;
}

}  // namespace

int RunCli(const std::vector<std::string>& words, std::ostream& out, std::ostream& err) {
  Console console{out, err};
  if (words.empty()) {
    err << kUsage;
    return 2;
  }
  const std::string& command = words[0];
  std::vector<std::string> rest(words.begin() + 1, words.end());
  if (command == "-h" || command == "--help" || command == "help") {
    out << kUsage;
    return 0;
  }
  if (command == "compile") return Dispatch(command, rest, &ParseCompileArgs, &Compile, console);
  if (command == "run") return Dispatch(command, rest, &ParseRunArgs, &Run, console);
  if (command == "bench") return Dispatch(command, rest, &ParseBenchArgs, &Bench, console);
  if (command == "inspect") return Dispatch(command, rest, &ParseInspectArgs, &Inspect, console);
  if (command == "targets")
    return Dispatch(command, rest, &ParseTargetsArgs, &ListTargets, console);
  if (command == "tune") return Dispatch(command, rest, &ParseTuneArgs, &Tune, console);
  if (command == "tuning") return Dispatch(command, rest, &ParseTuningArgs, &Tuning, console);
  if (command == "jobs") return Dispatch(command, rest, &ParseJobsArgs, &Jobs, console);
  if (command == "cache") return Dispatch(command, rest, &ParseCacheArgs, &Cache, console);
  err << "kiln: unknown command '" << command << "'\n" << kUsage;
  return 2;
}

}  // namespace kiln::client
