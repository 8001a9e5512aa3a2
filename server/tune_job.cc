#include "server/tune_job.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
#include "server/catch_exceptions.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// Bounds a client may ask for; far beyond any useful search, they only keep the arithmetic
// of the budget (int trials) safe.
constexpr int64_t kMaxTrials = 1'000'000;
constexpr int kMaxBuckets = 64;
constexpr int64_t kMaxSeconds = 30 * 24 * 3600;

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t max) {
  if (value >= 0 && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tune: ", field, " = ", value, "; must be between 0 and ", max));
}

// A dim may be measured at 0 (an empty KV cache), but an upper bound of 0 bounds nothing.
absl::Status CheckDims(absl::string_view field,
                       const google::protobuf::Map<std::string, int64_t>& dims, int64_t least) {
  for (const auto& [dim, value] : dims) {
    if (dim.empty() || value < least) {
      return absl::InvalidArgumentError(absl::StrCat("tune: ", field, "[\"", dim, "\"] = ", value,
                                                     "; needs a dim name and must be >= ", least));
    }
  }
  return absl::OkStatus();
}

std::string TargetText(const v1::TuneRequest& request) {
  return request.target().empty() ? "host" : request.target();
}

double Gflops(const tune::Measurement& m, double flops) {
  return m.ok && m.median_ns > 0 ? flops / static_cast<double>(m.median_ns) : 0;
}

}  // namespace

absl::StatusOr<driver::TuneSummary> TuneForJob(
    std::string_view onnx_bytes, const ir::Target& target, const driver::CompileOptions& options,
    driver::TuneModelOptions tune_options, const TuningSetup& tuning,
    const driver::EventSink& events, const std::function<absl::Status()>& interrupted) {
  if (tuning.db == nullptr) {
    return absl::FailedPreconditionError("tune: this server has no tuning database");
  }
  tune_options.tune.measure = tuning.measure;
  tune_options.tune.cancelled = [&interrupted] { return !interrupted().ok(); };
  return CatchExceptions("tuner", [&] {
    return driver::TuneModel(onnx_bytes, target, options, tune_options, *tuning.db, events);
  });
}

v1::TuneProgress ToProto(const tune::TuneProgress& progress) {
  v1::TuneProgress proto;
  proto.set_kernel(progress.kernel);
  proto.set_kernel_index(progress.kernel_index);
  proto.set_kernels(progress.kernels);
  proto.set_trials_done(progress.trials_done);
  proto.set_trials_budget(progress.trials_budget);
  proto.set_best_gflops(progress.best_gflops);
  proto.set_seconds_left(progress.seconds_left);
  return proto;
}

v1::TuneSummary ToProto(const driver::TuneSummary& summary, const ir::Target& target) {
  v1::TuneSummary proto;
  proto.set_target(target.Canonical());
  proto.set_kernels(summary.kernels);
  proto.set_already_tuned(summary.already_tuned);
  proto.set_trials(summary.trials);
  proto.set_failed_trials(summary.failed_trials);
  for (const tune::TuneResult& r : summary.results) {
    v1::KernelTuneResult* result = proto.add_results();
    result->set_kernel(tune::DisplayName(r));
    result->set_default_gflops(Gflops(r.default_measurement, r.flops));
    result->set_best_gflops(Gflops(r.best_measurement, r.flops));
    result->set_trials(r.trials);
    result->set_failed(r.failed);
    for (const std::string& failure : r.failures) result->add_failures(failure);
    if (!r.failures.empty()) result->set_first_failure(r.failures.front());
  }
  return proto;
}

absl::Status TuneJob::Validate(const v1::TuneRequest& request) {
  if (tuning_.db == nullptr) {
    return absl::FailedPreconditionError("tune: this server has no tuning database");
  }
  if (!cache::IsValidDigest(request.model_digest())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tune: model_digest must be \"sha256:\" followed by 64 lowercase hex digits, got \"",
        request.model_digest(), "\""));
  }
  for (absl::Status status :
       {CheckRange("trials", request.trials(), kMaxTrials),
        CheckRange("trials_per_kernel", request.trials_per_kernel(), kMaxTrials),
        CheckRange("seconds", request.seconds(), kMaxSeconds),
        CheckDims("dim_values", request.dim_values(), 0),
        CheckDims("dim_bounds", request.dim_bounds(), 1)}) {
    if (!status.ok()) return status;
  }
  if (request.bucket_values_size() > kMaxBuckets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tune: at most ", kMaxBuckets, " bucket_values, got ", request.bucket_values_size()));
  }
  for (int64_t value : request.bucket_values()) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tune: bucket_values must be positive, got ", value));
    }
  }
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(TargetText(request));
  if (!target.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tune: target \"", TargetText(request), "\": ", target.status().message()));
  }
  absl::StatusOr<bool> present = store_.HasBlob(request.model_digest());
  if (!present.ok()) return present.status();
  if (!*present) {
    return absl::NotFoundError(
        absl::StrCat("tune: model ", request.model_digest(), " not found; upload it first"));
  }
  return absl::OkStatus();
}

absl::Status TuneJob::Run(const v1::TuneRequest& request) {
  if (absl::Status status = Validate(request); !status.ok()) return status;
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(TargetText(request));
  if (!target.ok()) return target.status();
  absl::StatusOr<std::optional<std::string>> model = store_.GetBlob(request.model_digest());
  if (!model.ok()) return model.status();
  if (!model->has_value()) {
    // Present a moment ago, so its bytes were corrupt and the cache dropped them.
    return absl::NotFoundError(absl::StrCat("tune: model ", request.model_digest(),
                                            " is no longer in the cache; upload it again"));
  }

  driver::CompileOptions options;
  for (const auto& [dim, bound] : request.dim_bounds()) options.dim_bounds[dim] = bound;
  driver::TuneModelOptions tune_options;
  tune_options.retune = request.retune();
  tune_options.tune.trials = static_cast<int>(request.trials());
  if (request.trials_per_kernel() > 0) {
    tune_options.tune.trials_per_kernel = static_cast<int>(request.trials_per_kernel());
  }
  tune_options.tune.time_limit = std::chrono::seconds(request.seconds());
  for (const auto& [dim, value] : request.dim_values()) {
    tune_options.tune.symbol_values[dim] = value;
  }
  tune_options.tune.bucket_values.assign(request.bucket_values().begin(),
                                         request.bucket_values().end());
  tune_options.tune.auto_buckets = request.auto_buckets();
  auto events = [this](const driver::CompileEvent& event) {
    v1::TuneEvent proto;
    if (event.kind == driver::CompileEvent::Kind::kTuning) {
      *proto.mutable_progress() = ToProto(event.tuning);
    }
    proto.set_message(event.message);
    emit_(proto);
  };
  absl::StatusOr<driver::TuneSummary> summary =
      TuneForJob(**model, *target, options, tune_options, tuning_, events, interrupted_);
  if (!summary.ok()) return summary.status();
  spdlog::info("tune {} for {}: {} kernels, {} tuned now in {} trials, {} had records",
               request.model_digest(), target->preset, summary->kernels, summary->results.size(),
               summary->trials, summary->already_tuned);
  v1::TuneEvent last;
  *last.mutable_summary() = ToProto(*summary, *target);
  emit_(last);
  return interrupted_();
}

}  // namespace kiln::server
