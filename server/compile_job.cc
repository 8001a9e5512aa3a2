#include "server/compile_job.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/compile_key.h"
#include "cache/digest.h"
#include "cache/tuning_db.h"
#include "server/catch_exceptions.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

using Kind = v1::CompileEvent::Kind;

// Beyond any useful budget; keeps the tuner's int arithmetic safe.
constexpr int64_t kMaxTuneBudget = 1'000'000;

absl::Status ValidateRequest(const v1::CompileRequest& request) {
  if (!cache::IsValidDigest(request.model_digest())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compile: model_digest must be \"sha256:\" followed by 64 lowercase hex digits, got \"",
        request.model_digest(), "\""));
  }
  if (request.targets().empty()) {
    return absl::InvalidArgumentError("compile: no targets requested");
  }
  for (const auto& [dim, bound] : request.dim_bounds()) {
    if (dim.empty() || bound <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("compile: dim_bounds[\"", dim, "\"] = ", bound,
                                                     "; a bound needs a dim name and must be > 0"));
    }
  }
  for (auto [field, value] : {std::pair("tune_trials", request.tune_trials()),
                              std::pair("tune_seconds", request.tune_seconds())}) {
    if (value < 0 || value > kMaxTuneBudget) {
      return absl::InvalidArgumentError(absl::StrCat("compile: ", field, " = ", value,
                                                     "; must be between 0 and ", kMaxTuneBudget));
    }
  }
  return absl::OkStatus();
}

bool HasTuneBudget(const v1::CompileRequest& request) {
  return request.tune_trials() > 0 || request.tune_seconds() > 0;
}

driver::CompileOptions OptionsOf(const v1::CompileRequest& request) {
  driver::CompileOptions options;
  for (const auto& [dim, bound] : request.dim_bounds()) options.dim_bounds[dim] = bound;
  return options;
}

Kind KindOf(driver::CompileEvent::Kind kind) {
  switch (kind) {
    case driver::CompileEvent::Kind::kStage:
      return v1::CompileEvent::STAGE;
    case driver::CompileEvent::Kind::kPass:
      return v1::CompileEvent::PASS;
    case driver::CompileEvent::Kind::kTuning:
      return v1::CompileEvent::TUNING;
    case driver::CompileEvent::Kind::kInfo:
      break;
  }
  return v1::CompileEvent::INFO;
}

}  // namespace

void CompileJob::TargetEvents::Emit(Kind kind, std::string name, std::string message) const {
  v1::CompileEvent event = base;
  event.set_kind(kind);
  event.set_name(std::move(name));
  event.set_message(std::move(message));
  job->emit_(event);
}

void CompileJob::TargetEvents::Forward(const driver::CompileEvent& event) const {
  v1::CompileEvent proto = base;
  proto.set_kind(KindOf(event.kind));
  proto.set_name(event.name);
  proto.set_message(event.message);
  if (event.kind == driver::CompileEvent::Kind::kTuning) {
    *proto.mutable_tuning() = ToProto(event.tuning);
  }
  job->emit_(proto);
}

void CompileJob::TargetEvents::Done(const cache::CompileResult& result) const {
  v1::CompileEvent event = base;
  event.set_kind(v1::CompileEvent::TARGET_DONE);
  event.set_artifact_digest(result.artifact_digest);
  event.set_artifact_file_name(result.file_name);
  event.set_artifact_size(result.artifact_size);
  job->emit_(event);
}

void CompileJob::TargetEvents::Error(const absl::Status& status) const {
  v1::CompileEvent event = base;
  event.set_kind(v1::CompileEvent::TARGET_ERROR);
  event.set_error_code(static_cast<int32_t>(status.code()));  // same numbering as grpc
  event.set_message(std::string(status.message()));
  job->emit_(event);
}

absl::Status CompileJob::Validate(cache::Store& store, const v1::CompileRequest& request) {
  if (absl::Status status = ValidateRequest(request); !status.ok()) return status;
  absl::StatusOr<bool> present = store.HasBlob(request.model_digest());
  if (!present.ok()) return present.status();
  if (!*present) {
    return absl::NotFoundError(
        absl::StrCat("compile: model ", request.model_digest(), " not found; upload it first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<cache::CompileKeyParts> CompileJob::KeyOf(const std::string& model_digest,
                                                         const ir::Target& target,
                                                         const driver::CompileOptions& options) {
  std::optional<int64_t> tuning_revision;
  if (options.tuning_db != nullptr) {
    absl::StatusOr<int64_t> revision = options.tuning_db->Revision(target.Canonical());
    if (!revision.ok()) return revision.status();
    tuning_revision = *revision;
  }
  return cache::CompileKeyParts{.model_digest = model_digest,
                                .target = target.Canonical(),
                                .options = options.Canonical(),
                                .compiler_version = driver::CompilerVersion(),
                                .tuning_revision = tuning_revision};
}

bool CompileJob::AllTargetsCached(const v1::CompileRequest& request) {
  if (HasTuneBudget(request)) return false;
  driver::CompileOptions options = OptionsOf(request);
  options.tuning_db = tuning_.db;
  for (const std::string& preset : request.targets()) {
    absl::StatusOr<ir::Target> target = driver::ResolveTarget(preset);
    if (!target.ok()) return false;
    absl::StatusOr<cache::CompileKeyParts> parts = KeyOf(request.model_digest(), *target, options);
    if (!parts.ok()) return false;
    absl::StatusOr<bool> cached = store_.HasCompileResult(parts->Key());
    if (!cached.ok() || !*cached) return false;
  }
  return true;
}

absl::Status CompileJob::Run(const v1::CompileRequest& request) {
  if (absl::Status status = Validate(store_, request); !status.ok()) return status;
  model_digest_ = request.model_digest();
  driver::CompileOptions options = OptionsOf(request);
  options.tuning_db = tuning_.db;
  options.interrupted = interrupted_;  // checked by the compiler between passes
  if (fleet_ != nullptr && tuning_.db != nullptr) fleet_->PullTuning(*tuning_.db);
  absl::Status first_failure;
  for (const std::string& preset : request.targets()) {
    if (absl::Status status = interrupted_(); !status.ok()) return status;
    absl::Status status = RunTarget(preset, options, request);
    if (first_failure.ok()) first_failure = status;
  }
  return first_failure;
}

absl::Status CompileJob::RunTarget(const std::string& preset, const driver::CompileOptions& options,
                                   const v1::CompileRequest& request) {
  TargetEvents events{this, {}};
  events.base.set_target_preset(preset);
  // Checked against LLVM here, before the cache: a bad cpu or feature never reaches a compile.
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(preset);
  if (!target.ok()) {
    events.Error(target.status());
    return target.status();
  }
  events.base.set_target(target->Canonical());
  if (HasTuneBudget(request)) {
    if (absl::Status status = TuneTarget(*target, options, request, events); !status.ok()) {
      spdlog::warn("compile {} for {}: tuning: {}", model_digest_, preset, status.ToString());
      events.Error(status);
      return status;
    }
    if (absl::Status status = interrupted_(); !status.ok()) return status;
  }
  absl::StatusOr<cache::CompileResult> result = BuildTarget(*target, options, events);
  if (!result.ok()) {
    spdlog::warn("compile {} for {}: {}", model_digest_, preset, result.status().ToString());
    events.Error(result.status());
    return result.status();
  }
  events.Done(*result);
  return absl::OkStatus();
}

absl::StatusOr<cache::CompileResult> CompileJob::BuildTarget(const ir::Target& target,
                                                             const driver::CompileOptions& options,
                                                             const TargetEvents& events) {
  // Read before compiling: records added meanwhile make the next compile a miss, never a hit
  // on an artifact that lacks them.
  absl::StatusOr<cache::CompileKeyParts> key_parts = KeyOf(model_digest_, target, options);
  if (!key_parts.ok()) return key_parts.status();
  const cache::CompileKeyParts& parts = *key_parts;
  const std::string key = parts.Key();
  absl::StatusOr<std::optional<cache::CompileResult>> cached = LookUp(key);
  if (!cached.ok()) return cached.status();
  if (cached->has_value()) {
    spdlog::info("compile {} for {}: cache hit {}", model_digest_, target.preset,
                 (*cached)->artifact_digest);
    events.Emit(v1::CompileEvent::CACHE_HIT, "", "artifact " + (*cached)->artifact_digest);
    return **cached;
  }
  std::unique_ptr<Fleet::Lease> lease;
  if (fleet_ != nullptr) {
    absl::StatusOr<std::optional<cache::CompileResult>> elsewhere =
        AwaitFleetLease(parts, events, &lease);
    if (!elsewhere.ok()) return elsewhere.status();
    if (elsewhere->has_value()) {
      events.Emit(v1::CompileEvent::CACHE_HIT, "fleet",
                  "artifact " + (*elsewhere)->artifact_digest + ", from the fleet tier");
      return **elsewhere;
    }
  }
  // Only a diagnosis: a failure to explain must not fail the compile.
  absl::StatusOr<std::string> reason = store_.ExplainMiss(parts);
  const std::string why = reason.ok() ? *reason : "unknown (" + reason.status().ToString() + ")";
  spdlog::info("compile {} for {}: cache miss ({}), compiling", model_digest_, target.preset, why);
  events.Emit(v1::CompileEvent::CACHE_MISS, "", why);
  absl::StatusOr<cache::CompileResult> result = CompileAndStore(target, options, parts, events);
  if (result.ok() && fleet_ != nullptr) fleet_->PushResult(key, *result, store_);
  return result;
}

// The fleet's result for the key, or (nullopt) its compile lease in `lease`: while another
// replica holds the lease, waits for that replica's result, and takes the lease over when
// it lapses (its holder died). Without a reachable fleet tier: nullopt and no lease.
absl::StatusOr<std::optional<cache::CompileResult>> CompileJob::AwaitFleetLease(
    const cache::CompileKeyParts& key, const TargetEvents& events,
    std::unique_ptr<Fleet::Lease>* lease) {
  if (std::optional<cache::CompileResult> pulled = fleet_->PullResult(key, store_)) {
    return pulled;
  }
  for (bool told = false;; told = true) {
    bool fleet_down = false;
    *lease = fleet_->TryLease(key.Key(), &fleet_down);
    if (*lease != nullptr || fleet_down) break;
    if (!told) {
      events.Emit(v1::CompileEvent::INFO, "fleet",
                  "another replica is compiling this target; waiting for its result");
    }
    if (absl::Status status = interrupted_(); !status.ok()) return status;
    absl::SleepFor(fleet_->poll_interval());
    if (std::optional<cache::CompileResult> pulled = fleet_->PullResult(key, store_)) {
      return pulled;
    }
  }
  // The holder may have finished between our last look and our taking the lease.
  return fleet_->PullResult(key, store_);
}

// The kernels the tuning database has no record for, tuned within the request's budget.
absl::Status CompileJob::TuneTarget(const ir::Target& target, const driver::CompileOptions& options,
                                    const v1::CompileRequest& request, const TargetEvents& events) {
  absl::StatusOr<std::string_view> model = ModelBytes();
  if (!model.ok()) return model.status();
  driver::TuneModelOptions tune_options;
  tune_options.tune.trials = static_cast<int>(request.tune_trials());
  tune_options.tune.time_limit = std::chrono::seconds(request.tune_seconds());
  driver::EventSink sink = [&events](const driver::CompileEvent& event) { events.Forward(event); };
  absl::StatusOr<driver::TuneSummary> summary =
      TuneForJob(*model, target, options, tune_options, tuning_, sink, interrupted_);
  if (!summary.ok()) return summary.status();
  if (fleet_ != nullptr) fleet_->PushTuning(*tuning_.db);
  events.Emit(
      v1::CompileEvent::INFO, "tune",
      absl::StrCat("tuned ", summary->results.size(), " of ", summary->kernels, " kernels in ",
                   summary->trials, " trials (", summary->already_tuned, " had records)"));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<cache::CompileResult>> CompileJob::LookUp(const std::string& key) {
  absl::StatusOr<std::optional<cache::CompileResult>> hit = store_.GetCompileResult(key);
  if (!hit.ok() || !hit->has_value()) return hit;
  // Read both blobs now, so a corrupt one is dropped (taking this result with it) and the
  // target is rebuilt, instead of announcing an artifact that FetchArtifact cannot serve.
  for (const std::string& digest : {(*hit)->artifact_digest, (*hit)->manifest_digest}) {
    absl::StatusOr<std::optional<std::string>> blob = store_.GetBlob(digest);
    if (!blob.ok()) return blob.status();
    if (!blob->has_value()) return std::nullopt;
  }
  return hit;
}

absl::StatusOr<cache::CompileResult> CompileJob::CompileAndStore(
    const ir::Target& target, const driver::CompileOptions& options,
    const cache::CompileKeyParts& key, const TargetEvents& events) {
  absl::StatusOr<std::string_view> model = ModelBytes();
  if (!model.ok()) return model.status();
  driver::EventSink sink = [&events](const driver::CompileEvent& event) { events.Forward(event); };
  absl::StatusOr<driver::Artifact> artifact =
      CatchExceptions("compiler", [&] { return compiler_(*model, target, options, sink); });
  if (!artifact.ok()) return artifact.status();

  absl::StatusOr<std::string> artifact_digest = store_.PutBlob(artifact->bytes);
  if (!artifact_digest.ok()) return artifact_digest.status();
  absl::StatusOr<std::string> manifest_digest = store_.PutBlob(artifact->manifest_json);
  if (!manifest_digest.ok()) return manifest_digest.status();
  cache::CompileResult result{
      .artifact_digest = *std::move(artifact_digest),
      .manifest_digest = *std::move(manifest_digest),
      .file_name = artifact->file_name.empty() ? target.artifact_file : artifact->file_name,
      .artifact_size = artifact->bytes.size()};
  // Under the key's parts, so that a later miss can say which part differs.
  if (absl::Status status = store_.PutCompileResult(key, result); !status.ok()) return status;
  return result;
}

absl::StatusOr<std::string_view> CompileJob::ModelBytes() {
  if (model_.has_value()) return *model_;
  absl::StatusOr<std::optional<std::string>> bytes = store_.GetBlob(model_digest_);
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) {
    // Present a moment ago, so its bytes were corrupt and the cache dropped them.
    return absl::NotFoundError(absl::StrCat("compile: model ", model_digest_,
                                            " is no longer in the cache; upload it again"));
  }
  model_ = *std::move(*bytes);
  return *model_;
}

}  // namespace kiln::server
