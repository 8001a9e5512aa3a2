// `kiln bench`: run an artifact many times and report latency and memory, like trtexec and
// onnxruntime_perf_test do for their runtimes.
#include "client/bench.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/files.h"

namespace kiln::client {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

bool IsStaticDim(const std::string& dim, int64_t* value) {
  return !dim.empty() && std::all_of(dim.begin(), dim.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  }) && absl::SimpleAtoi(dim, value);
}

// A plain variable ("batch"), as opposed to an expression ("seq+past") or a number.
bool IsSymbolName(const std::string& dim) {
  if (dim.empty() || std::isdigit(static_cast<unsigned char>(dim[0]))) return false;
  return std::all_of(dim.begin(), dim.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Values of the symbols seen so far, and which input decided each.
struct SymbolValues {
  std::map<std::string, std::pair<int64_t, std::string>> values;
};

// Checks a given shape against the input's signature and records the symbols it decides.
// `source` says where the shape came from ("--shape x=2,3", "file 'x.npy'").
absl::Status BindShape(const runtime::TensorInfo& input, const std::vector<int64_t>& shape,
                       const std::string& source, SymbolValues* symbols) {
  if (shape.size() != input.dims.size()) {
    return Invalid(absl::StrCat(source, ": input '", input.name, "' has ", input.dims.size(),
                                " dimensions (", runtime::Describe(input), "), got ",
                                shape.size()));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    const std::string& dim = input.dims[d];
    int64_t fixed = 0;
    if (IsStaticDim(dim, &fixed) && fixed != shape[d]) {
      return Invalid(absl::StrCat(source, ": dimension ", d, " of input '", input.name,
                                  "' is fixed at ", fixed, " (", runtime::Describe(input),
                                  "), got ", shape[d]));
    }
    if (!IsSymbolName(dim)) continue;
    auto [it, inserted] = symbols->values.emplace(dim, std::make_pair(shape[d], input.name));
    if (!inserted && it->second.first != shape[d]) {
      return Invalid(absl::StrCat(source, ": dimension ", d, " of input '", input.name, "' (", dim,
                                  ") is ", shape[d], ", but input '", it->second.second, "' makes ",
                                  dim, " = ", it->second.first));
    }
  }
  return absl::OkStatus();
}

// The shape of an input that no file and no --shape gave, from its fixed dims and the symbols.
absl::StatusOr<std::vector<int64_t>> DeriveShape(const runtime::TensorInfo& input,
                                                 const SymbolValues& symbols) {
  std::vector<int64_t> shape;
  for (size_t d = 0; d < input.dims.size(); ++d) {
    const std::string& dim = input.dims[d];
    int64_t value = 0;
    if (auto it = symbols.values.find(dim); it != symbols.values.end()) {
      value = it->second.first;
    } else if (!IsStaticDim(dim, &value)) {
      return Invalid(absl::StrCat("dimension ", d, " (", dim, ") of input '", input.name, "' (",
                                  runtime::Describe(input), ") is not known: give --shape ",
                                  input.name, "=D0,... or --input ", input.name, "=FILE"));
    }
    shape.push_back(value);
  }
  return shape;
}

template <typename T>
void FillUniform(Tensor* tensor, std::mt19937_64& rng, T low, T high) {
  T* data = reinterpret_cast<T*>(tensor->data.data());
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(low, high);
    for (int64_t i = 0; i < tensor->NumElements(); ++i) data[i] = dist(rng);
  } else {
    std::uniform_int_distribution<int64_t> dist(low, high - 1);
    for (int64_t i = 0; i < tensor->NumElements(); ++i) data[i] = static_cast<T>(dist(rng));
  }
}

// Small non-negative integers are valid indices, token ids and masks in most models.
void FillRandom(Tensor* tensor, uint64_t seed) {
  std::mt19937_64 rng(seed);
  DLDataType t = tensor->dtype;
  if (t.code == kDLFloat && t.bits == 32) return FillUniform<float>(tensor, rng, -1, 1);
  if (t.code == kDLFloat && t.bits == 64) return FillUniform<double>(tensor, rng, -1, 1);
  if (t.code == KILN_DL_BOOL) return FillUniform<uint8_t>(tensor, rng, 0, 2);
  switch (t.bits) {
    case 8:
      return FillUniform<uint8_t>(tensor, rng, 0, 32);
    case 16:
      return FillUniform<uint16_t>(tensor, rng, 0, 32);
    case 32:
      return FillUniform<uint32_t>(tensor, rng, 0, 32);
    default:
      return FillUniform<uint64_t>(tensor, rng, 0, 32);
  }
}

constexpr uint64_t kSeed = 0x6b696c6e;  // "kiln"; input i uses kSeed + i

// Every name must be a model input, given at most once across --input and --shape.
absl::Status CheckInputNames(const BenchArgs& args,
                             const std::vector<runtime::TensorInfo>& expected) {
  std::set<std::string> seen;
  std::vector<std::string> names;
  for (const auto& [name, file] : args.inputs) names.push_back(name);
  for (const auto& [name, shape] : args.shapes) names.push_back(name);
  for (const std::string& name : names) {
    if (!seen.insert(name).second) {
      return Invalid(absl::StrCat("input '", name, "' given twice (--input and --shape)"));
    }
    bool known = std::any_of(expected.begin(), expected.end(),
                             [&](const runtime::TensorInfo& t) { return t.name == name; });
    if (!known) {
      return Invalid(absl::StrCat("unknown input '", name,
                                  "'; the model's inputs are: ", DescribeInputs(expected)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

LatencyStats SummarizeLatencies(std::vector<double> samples_ms) {
  LatencyStats stats;
  if (samples_ms.empty()) return stats;
  std::sort(samples_ms.begin(), samples_ms.end());
  size_t n = samples_ms.size();
  stats.count = static_cast<int64_t>(n);
  stats.min_ms = samples_ms.front();
  stats.max_ms = samples_ms.back();
  stats.median_ms =
      n % 2 == 1 ? samples_ms[n / 2] : (samples_ms[n / 2 - 1] + samples_ms[n / 2]) / 2;
  // Nearest rank: ceil(0.9 n), computed in integers so that n = 10 gives rank 9 exactly.
  size_t rank = (9 * n + 9) / 10;
  stats.p90_ms = samples_ms[rank - 1];
  stats.mean_ms = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / n;
  return stats;
}

absl::StatusOr<NamedTensors> MakeBenchInputs(const BenchArgs& args,
                                             const std::vector<runtime::TensorInfo>& expected) {
  if (absl::Status names = CheckInputNames(args, expected); !names.ok()) return names;
  std::map<std::string, const runtime::TensorInfo*> by_name;
  for (const auto& input : expected) by_name[input.name] = &input;
  std::map<std::string, Tensor> given;
  SymbolValues symbols;
  for (const auto& [name, file] : args.inputs) {
    absl::StatusOr<Tensor> tensor = ReadTensorFile(file);
    if (!tensor.ok()) return tensor.status();
    absl::Status bound =
        BindShape(*by_name[name], tensor->shape, absl::StrCat("file '", file, "'"), &symbols);
    if (!bound.ok()) return bound;
    given.emplace(name, *std::move(tensor));
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, shape] : args.shapes) {
    std::string source = absl::StrCat("--shape ", name, "=", absl::StrJoin(shape, ","));
    absl::Status bound = BindShape(*by_name[name], shape, source, &symbols);
    if (!bound.ok()) return bound;
    shapes[name] = shape;
  }
  NamedTensors tensors;
  for (size_t i = 0; i < expected.size(); ++i) {
    const runtime::TensorInfo& input = expected[i];
    if (auto it = given.find(input.name); it != given.end()) {
      tensors.emplace_back(input.name, std::move(it->second));
      continue;
    }
    absl::StatusOr<std::vector<int64_t>> shape =
        shapes.contains(input.name) ? shapes[input.name] : DeriveShape(input, symbols);
    if (!shape.ok()) return shape.status();
    absl::StatusOr<Tensor> tensor = MakeTensor(input.dtype, *shape);
    if (!tensor.ok()) return tensor.status();
    FillRandom(&*tensor, kSeed + i);
    tensors.emplace_back(input.name, *std::move(tensor));
  }
  return tensors;
}

MemoryReading ReadProcessMemory() {
  MemoryReading reading;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    int64_t kib = 0;
    std::string value = line.substr(line.find(':') + 1);
    absl::StripAsciiWhitespace(&value);
    if (value.ends_with(" kB")) value.resize(value.size() - 3);
    if (!absl::SimpleAtoi(value, &kib)) continue;
    if (line.starts_with("VmRSS:")) reading.rss_bytes = kib * 1024;
    if (line.starts_with("VmHWM:")) reading.peak_rss_bytes = kib * 1024;
  }
  return reading;
}

namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t SkipSpace(const std::string& s, size_t i) {
  while (i < s.size() && IsJsonSpace(s[i])) ++i;
  return i;
}

// The index just past the JSON value that starts at i.
size_t SkipJsonValue(const std::string& s, size_t i) {
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;  // the end of the enclosing object: a scalar ended here
      if (--depth == 0) return i + 1;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return i;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string ManifestWorkspaceFields(const std::string& manifest_json) {
  std::vector<std::string> fields;
  size_t i = SkipSpace(manifest_json, 0);
  if (i == manifest_json.size() || manifest_json[i] != '{') return "";
  for (i = SkipSpace(manifest_json, i + 1); i < manifest_json.size() && manifest_json[i] == '"';) {
    size_t key_end = SkipJsonValue(manifest_json, i);
    std::string key = manifest_json.substr(i, key_end - i);
    size_t colon = SkipSpace(manifest_json, key_end);
    if (colon == manifest_json.size() || manifest_json[colon] != ':') break;
    size_t value_begin = SkipSpace(manifest_json, colon + 1);
    size_t value_end = SkipJsonValue(manifest_json, value_begin);
    std::string value = manifest_json.substr(value_begin, value_end - value_begin);
    while (!value.empty() && IsJsonSpace(value.back())) value.pop_back();
    if (key.find("workspace") != std::string::npos) fields.push_back(key + ": " + value);
    i = SkipSpace(manifest_json, value_end);
    if (i < manifest_json.size() && manifest_json[i] == ',') i = SkipSpace(manifest_json, i + 1);
  }
  return absl::StrJoin(fields, ", ");
}

namespace {

// manifest.json beside the artifact, or "" when there is none.
std::string ReadManifest(const std::string& artifact_path) {
  std::filesystem::path manifest =
      std::filesystem::path(artifact_path).parent_path() / "manifest.json";
  absl::StatusOr<std::string> text = ReadFile(manifest.string());
  return text.ok() ? *text : "";
}

std::string DescribeBenchInputs(const BenchArgs& args, const NamedTensors& inputs) {
  std::map<std::string, std::string> files(args.inputs.begin(), args.inputs.end());
  std::vector<std::string> parts;
  for (const auto& [name, tensor] : inputs) {
    auto file = files.find(name);
    parts.push_back(absl::StrCat(name, " ", runtime::DTypeText(tensor.dtype),
                                 ShapeText(tensor.shape), " ",
                                 file == files.end() ? "random" : "from " + file->second));
  }
  return absl::StrJoin(parts, ", ");
}

// Warm-up runs, then `repeat` timed runs; each sample is one kiln_model_run in milliseconds.
absl::StatusOr<std::vector<double>> TimeRuns(const runtime::Model& model, const BenchArgs& args,
                                             NamedTensors& inputs, NamedTensors& outputs) {
  for (int64_t i = 0; i < args.warmup; ++i) {
    if (absl::Status status = RunModel(model, inputs, outputs); !status.ok()) return status;
  }
  std::vector<double> samples;
  for (int64_t i = 0; i < args.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    absl::Status status = RunModel(model, inputs, outputs);
    auto end = std::chrono::steady_clock::now();
    if (!status.ok()) return status;
    samples.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  return samples;
}

double MiB(int64_t bytes) { return bytes / (1024.0 * 1024.0); }

void PrintReport(const std::string& artifact, int32_t threads, const BenchArgs& args,
                 const std::vector<double>& samples, const MemoryReading& before,
                 const MemoryReading& after, const std::string& workspace, std::ostream& out) {
  LatencyStats stats = SummarizeLatencies(samples);
  std::vector<std::string> latencies;
  for (double ms : samples) latencies.push_back(absl::StrFormat("%.6f", ms));
  out << absl::StrFormat("threads: %d  warmup: %d  repeat: %d\n", threads, args.warmup,
                         args.repeat);
  out << absl::StrFormat("latency (ms): min %.4f  median %.4f  p90 %.4f  mean %.4f  max %.4f\n",
                         stats.min_ms, stats.median_ms, stats.p90_ms, stats.mean_ms, stats.max_ms);
  out << absl::StrFormat("memory: peak RSS %.1f MiB (RSS before the first run %.1f MiB)\n",
                         MiB(after.peak_rss_bytes), MiB(before.rss_bytes));
  if (!workspace.empty()) out << "workspace (manifest): " << workspace << "\n";
  out << absl::StrFormat(
      "kiln-bench {\"artifact\": %s, \"threads\": %d, \"warmup\": %d, \"repeat\": %d, "
      "\"min_ms\": %.6f, \"median_ms\": %.6f, \"p90_ms\": %.6f, \"mean_ms\": %.6f, "
      "\"max_ms\": %.6f, \"peak_rss_bytes\": %d, \"rss_before_runs_bytes\": %d%s, "
      "\"latencies_ms\": [%s]}\n",
      JsonString(artifact), threads, args.warmup, args.repeat, stats.min_ms, stats.median_ms,
      stats.p90_ms, stats.mean_ms, stats.max_ms, after.peak_rss_bytes, before.rss_bytes,
      workspace.empty() ? "" : ", \"workspace\": {" + workspace + "}",
      absl::StrJoin(latencies, ", "));
}

}  // namespace

absl::Status Bench(const BenchArgs& args, Console console) {
  if (args.repeat <= 0) return Invalid("--repeat must be positive");
  absl::StatusOr<std::string> path = FindArtifact(args.artifact_dir);
  if (!path.ok()) return path.status();
  std::string error;
  std::unique_ptr<runtime::Model> model = runtime::Model::Load(*path, &error);
  if (model == nullptr) return Invalid(error);
  if (args.threads >= 0 && !model->SetNumThreads(args.threads, &error)) return Invalid(error);
  absl::StatusOr<NamedTensors> inputs = MakeBenchInputs(args, model->inputs());
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<NamedTensors> outputs = AllocateOutputs(*model, *inputs);
  if (!outputs.ok()) return outputs.status();
  console.out << "artifact: " << *path << "\n";
  console.out << "inputs: " << DescribeBenchInputs(args, *inputs) << "\n";

  MemoryReading before = ReadProcessMemory();
  absl::StatusOr<std::vector<double>> samples = TimeRuns(*model, args, *inputs, *outputs);
  if (!samples.ok()) return samples.status();
  MemoryReading after = ReadProcessMemory();
  PrintReport(*path, model->num_threads(), args, *samples, before, after,
              ManifestWorkspaceFields(ReadManifest(*path)), console.out);
  return absl::OkStatus();
}

}  // namespace kiln::client
