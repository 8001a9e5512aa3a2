#include "compiler/driver/tuning.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "cache/digest.h"
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/pipeline.h"

namespace kiln::driver {

cache::TuningKey TuningKeyOf(const std::string& workload, const ir::Target& target,
                             const std::string& bucket) {
  return {cache::Sha256Hex(workload), target.Canonical(), kTuningSpaceVersion, bucket};
}

// A database error costs the tuned schedules only: the default ones are always right.
std::map<std::string, std::string> TunedTraces(cache::TuningDb& db, const std::string& workload,
                                               const ir::Target& target) {
  std::map<std::string, std::string> traces;
  absl::StatusOr<std::vector<std::string>> buckets =
      db.Buckets(TuningKeyOf(workload, target), CompilerVersion());
  if (!buckets.ok()) return traces;
  for (const std::string& bucket : *buckets) {
    absl::StatusOr<std::optional<cache::TuningRecord>> best =
        db.Best(TuningKeyOf(workload, target, bucket), CompilerVersion());
    if (best.ok() && *best) traces[bucket] = (*best)->trace_json;
  }
  return traces;
}

namespace {

bool HasRecord(cache::TuningDb& db, const std::string& workload, const ir::Target& target,
               const std::string& bucket) {
  absl::StatusOr<std::optional<cache::TuningRecord>> best =
      db.Best(TuningKeyOf(workload, target, bucket), CompilerVersion());
  return best.ok() && best->has_value();
}

}  // namespace

std::string HostDeviceName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "model name")) continue;
    size_t colon = rest.find(':');
    if (colon != absl::string_view::npos) {
      return std::string(absl::StripAsciiWhitespace(rest.substr(colon + 1)));
    }
  }
  absl::StatusOr<ir::Target> host = codegen::HostTarget();
  return host.ok() ? host->cpu : "unknown CPU";
}

namespace {

void Progress(const EventSink& events, const tune::TuneProgress& p) {
  if (!events) return;
  std::string message =
      absl::StrFormat("kernel %d/%d %s: trial %d/%d, best %.1f GFLOP/s", p.kernel_index, p.kernels,
                      p.kernel, p.trials_done, p.trials_budget, p.best_gflops);
  if (p.seconds_left >= 0) absl::StrAppendFormat(&message, ", about %.0f s left", p.seconds_left);
  CompileEvent event{CompileEvent::Kind::kTuning, "tune", std::move(message)};
  event.tuning = p;
  events(event);
}

void Message(const EventSink& events, std::string message) {
  if (events) events(CompileEvent{CompileEvent::Kind::kInfo, "tune", std::move(message)});
}

// The info event before the first measurement: how the weights are timed, and why.
std::string WeightCacheMessage(int64_t weight_bytes) {
  return absl::StrFormat(
      "timing kernels with the model's %.1f MiB of weights evicted from the caches before every "
      "other run: whether a model finds them cached depends on more than this machine reports",
      static_cast<double>(weight_bytes) / (1 << 20));
}

absl::Status Record(cache::TuningDb& db, const tune::TuneResult& result, const ir::Target& target) {
  cache::TuningRecord record;
  record.key = TuningKeyOf(result.kernel.workload, target, result.bucket);
  record.trace_json = result.best.ToJson();
  record.median_ns = static_cast<double>(result.best_measurement.median_ns);
  for (int64_t t : result.best_measurement.times_ns) record.times_ns.push_back(t);
  record.device = HostDeviceName();
  record.compiler_version = CompilerVersion();
  return db.Put(record);
}

}  // namespace

absl::StatusOr<TuneSummary> TuneModel(std::string_view onnx_bytes, const ir::Target& target,
                                      const CompileOptions& options,
                                      const TuneModelOptions& tune_options, cache::TuningDb& db,
                                      const EventSink& events) {
  KILN_ASSIGN_OR_RETURN(ir::Target host, codegen::HostTarget());
  if (target.IsGpu() || target.Arch() != host.Arch()) {
    return absl::InvalidArgumentError(
        absl::StrCat("target ", target.preset, " cannot be tuned here: tuning measures kernels on ",
                     "this machine, a ", host.Arch(), " CPU"));
  }
  KILN_ASSIGN_OR_RETURN(ir::IRModule module, ImportModel(onnx_bytes));
  ir::PassContext context;
  context.target = target;
  context.dim_bounds = options.dim_bounds;
  KILN_ASSIGN_OR_RETURN(module, RunPipeline(std::move(module), nullptr, "fuse_ops", context));

  TuneSummary summary;
  summary.weight_bytes = tune::WeightBytes(module);
  const std::string weights_message = WeightCacheMessage(summary.weight_bytes);
  auto skip = [&](const schedule::TunableKernel& kernel, const std::string& bucket) {
    ++summary.kernels;
    if (tune_options.retune || !HasRecord(db, kernel.workload, target, bucket)) {
      if (summary.kernels - summary.already_tuned == 1) Message(events, weights_message);
      return false;
    }
    ++summary.already_tuned;
    return true;
  };
  absl::Status write_status;
  auto on_result = [&](const tune::TuneResult& result) {
    write_status.Update(Record(db, result, target));
  };
  tune::TuneOptions tune = tune_options.tune;
  if (tune.symbol_bounds.empty()) tune.symbol_bounds = options.dim_bounds;
  if (tune.measure.target == std::nullopt) tune.measure.target = target;
  tune.measure.weights = tune::WeightCache::kAlternating;
  KILN_ASSIGN_OR_RETURN(
      summary.results, tune::TuneModule(module, target, tune, skip, on_result,
                                        [&](const tune::TuneProgress& p) { Progress(events, p); }));
  KILN_RETURN_IF_ERROR(write_status);
  for (const tune::TuneResult& r : summary.results) {
    summary.trials += r.trials;
    summary.failed_trials += r.failed;
  }
  return summary;
}

}  // namespace kiln::driver
