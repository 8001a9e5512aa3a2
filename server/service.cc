#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cache/digest.h"
#include "compiler/driver/driver.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/catch_exceptions.h"
#include "server/upload.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// absl and gRPC share the canonical status codes, so the cast is exact.
grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// OK while the client still waits for the answer.
absl::Status Interrupted(const grpc::ServerContext* context) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (std::chrono::system_clock::now() >= context->deadline()) {
    return absl::DeadlineExceededError("deadline exceeded");
  }
  return absl::CancelledError("cancelled by the client");
}

// A blob the artifact needs, or NOT_FOUND when the cache no longer has it intact.
absl::StatusOr<std::string> ReadBlob(cache::Store& store, const std::string& digest,
                                     const std::string& artifact_digest) {
  absl::StatusOr<std::optional<std::string>> blob = store.GetBlob(digest);
  if (!blob.ok()) return blob.status();
  if (!blob->has_value()) {
    return absl::NotFoundError(absl::StrCat("fetch: artifact ", artifact_digest,
                                            " is no longer intact in the cache; compile again"));
  }
  return *std::move(*blob);
}

// Streams an artifact in chunks of at most kMaxChunkBytes; the first also carries what the
// client needs to verify and place the file. Always one message at least, so an empty
// artifact still delivers its manifest.
absl::Status WriteChunks(grpc::ServerContext* context, const std::string& digest,
                         const std::string& file_name, const std::string& bytes,
                         const std::string& manifest,
                         grpc::ServerWriter<v1::ArtifactChunk>* writer) {
  size_t offset = 0;
  do {
    v1::ArtifactChunk chunk;
    if (offset == 0) {
      chunk.set_artifact_digest(digest);
      chunk.set_total_bytes(bytes.size());
      chunk.set_file_name(file_name);
      chunk.set_manifest_json(manifest);
    }
    const size_t size = std::min<size_t>(kMaxChunkBytes, bytes.size() - offset);
    chunk.set_chunk(bytes.substr(offset, size));
    if (!writer->Write(chunk)) {
      absl::Status why = Interrupted(context);
      return why.ok() ? absl::UnavailableError("fetch: the stream broke") : why;
    }
    offset += size;
  } while (offset < bytes.size());
  return absl::OkStatus();
}

// How often a watcher looks at its client while no event comes; cancellation has no wake-up.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

// Equal for equal requests: protobuf maps serialize in a fixed order only when asked to.
std::string DedupKey(std::string_view kind, const google::protobuf::Message& request) {
  std::string bytes(kind);
  bytes += '\n';
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  return bytes;
}

absl::StatusOr<absl::Duration> TimeoutOf(int64_t seconds) {
  if (seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout_seconds = ", seconds, "; must be >= 0 (0: the server's limit)"));
  }
  return seconds == 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
}

// Writes `job`'s events from index `from` until its final event. OK once that was written,
// else why the stream ended first (the client left, its deadline passed, a write failed).
template <typename WriteFn>
absl::Status Follow(grpc::ServerContext* context, const Job& job, int64_t from, WriteFn write) {
  for (int64_t next = from;;) {
    Job::Events batch = job.WaitForEvents(next, kPollInterval);
    for (const v1::JobEvent& event : batch.events) {
      if (!write(event)) {
        absl::Status why = Interrupted(context);
        return why.ok() ? absl::UnavailableError("the stream broke") : why;
      }
      ++next;
    }
    if (batch.finished) return absl::OkStatus();  // the batch ended with the final event
    if (absl::Status why = Interrupted(context); !why.ok()) return why;
  }
}

// Follows a job from its first event on behalf of a streaming Compile or Tune call, and
// answers with the job's outcome. A caller that leaves early may cancel the job (Detach).
template <typename WriteFn>
absl::Status WatchToTheEnd(grpc::ServerContext* context, Job& job, WriteFn write) {
  job.Attach();
  absl::Status streamed = Follow(context, job, 0, write);
  job.Detach(streamed);
  if (!streamed.ok()) return streamed;
  return job.Outcome().value_or(absl::InternalError("job finished without an outcome"));
}

// Times a compile job's stages from its events (kiln_job_duration_seconds{compile,STAGE}): a
// stage lasts until the next one begins or its target ends. Counts tuning trials too.
class StageClock {
 public:
  explicit StageClock(Metrics* metrics) : metrics_(metrics) {}

  void See(const v1::CompileEvent& event) {
    if (metrics_ == nullptr) return;
    if (event.kind() == v1::CompileEvent::TUNING) metrics_->tuning_trials.Add();
    const bool begins = event.kind() == v1::CompileEvent::STAGE;
    const bool ends = begins || event.kind() == v1::CompileEvent::TARGET_DONE ||
                      event.kind() == v1::CompileEvent::TARGET_ERROR;
    if (!ends) return;
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (!stage_.empty()) {
      metrics_->job_seconds.Observe({"compile", stage_}, absl::ToDoubleSeconds(now - start_));
    }
    stage_ = begins ? event.name() : "";
    start_ = now;
  }

 private:
  Metrics* const metrics_;
  absl::Mutex mu_;
  std::string stage_ ABSL_GUARDED_BY(mu_);
  absl::Time start_ ABSL_GUARDED_BY(mu_);
};

JobLimits LimitsOf(const ServiceOptions& options) {
  JobLimits limits;
  limits.workers = options.max_running_jobs > 0
                       ? options.max_running_jobs
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  limits.max_queued = options.max_queued_jobs;
  if (options.max_job_seconds > 0) limits.max_duration = absl::Seconds(options.max_job_seconds);
  return limits;
}

std::string Describe(const ir::Target& target) {
  std::string text = absl::StrCat(target.triple, ", cpu ", target.cpu);
  if (!target.features.empty()) absl::StrAppend(&text, ", features ", target.features);
  absl::StrAppend(&text, ", ", target.vector_bits, "-bit vectors");
  return text;
}

}  // namespace

KilnService::KilnService(cache::Store& store, cache::TuningDb* tuning_db, cache::Owners& owners,
                         Fleet* fleet, ServiceOptions options)
    : store_(store),
      tuning_db_(tuning_db),
      owners_(owners),
      fleet_(fleet),
      options_(std::move(options)),
      jobs_(LimitsOf(options_)) {
  options_.max_model_bytes = std::min(options_.max_model_bytes, store.max_blob_bytes());
}

template <typename Body>
grpc::Status KilnService::Handle(const char* method, const grpc::ServerContext* context,
                                 Body body) {
  return ToGrpcStatus(CatchExceptions(method, [&]() -> absl::Status {
    absl::StatusOr<Caller> caller = options_.tokens.Authenticate(context->client_metadata());
    if (!caller.ok()) return caller.status();
    return body(*caller);
  }));
}

void KilnService::ExportMetrics(Metrics& metrics) {
  metrics_ = &metrics;
  metrics.AddGaugeCallback("kiln_job_queue_depth", "Jobs waiting for a worker.",
                           [this] { return jobs_.queued(); });
  metrics.AddGaugeCallback("kiln_jobs_running", "Jobs running now.",
                           [this] { return jobs_.running(); });
  jobs_.OnFinished([&metrics](const v1::Job& job) {
    const std::string kind = absl::AsciiStrToLower(v1::Job::Kind_Name(job.kind()));
    metrics.jobs.Add({kind, absl::AsciiStrToLower(v1::Job::State_Name(job.state()))});
    if (job.started_unix_ms() == 0) return;  // never ran
    metrics.job_seconds.Observe({kind, "queued"},
                                (job.started_unix_ms() - job.created_unix_ms()) / 1e3);
    metrics.job_seconds.Observe({kind, "running"},
                                (job.finished_unix_ms() - job.started_unix_ms()) / 1e3);
  });
}

absl::Status KilnService::CheckVisible(const Caller& caller, const std::string& digest,
                                       absl::Status not_found) {
  if (caller.admin) return absl::OkStatus();
  absl::StatusOr<bool> owns = owners_.Owns(caller.tenant, digest);
  if (!owns.ok()) return owns.status();
  if (*owns) return absl::OkStatus();
  // Uploaded or compiled through another replica: remember it here too.
  if (fleet_ == nullptr || !fleet_->Owns(caller.tenant, digest)) return not_found;
  return owners_.Grant(caller.tenant, digest);
}

void KilnService::Grant(const std::string& tenant, const std::string& digest) {
  if (absl::Status status = owners_.Grant(tenant, digest); !status.ok()) {
    spdlog::error("recording that tenant '{}' owns {}: {}", tenant, digest, status.ToString());
  }
  if (fleet_ != nullptr) fleet_->GrantOwner(tenant, digest);
}

void KilnService::PullModel(const std::string& digest) {
  if (fleet_ != nullptr && cache::IsValidDigest(digest)) fleet_->PullBlob(digest, store_);
}

absl::StatusOr<std::shared_ptr<Job>> KilnService::FindJob(const Caller& caller,
                                                          const std::string& id) {
  absl::StatusOr<std::shared_ptr<Job>> job = jobs_.Find(id);
  if (!job.ok() || caller.admin || (*job)->Info().tenant() == caller.tenant) return job;
  return absl::NotFoundError(absl::StrCat("job \"", id, "\" not found"));
}

// --- Models and artifacts ------------------------------------------------------------------

grpc::Status KilnService::UploadModel(grpc::ServerContext* context,
                                      grpc::ServerReader<v1::UploadModelRequest>* reader,
                                      v1::UploadModelResponse* response) {
  return Handle("UploadModel", context, [&](const Caller& caller) -> absl::Status {
    if (absl::Status status = Authorize(caller, Role::kCompile, "UploadModel"); !status.ok()) {
      return status;
    }
    return Upload(caller, reader, response);
  });
}

grpc::Status KilnService::FetchArtifact(grpc::ServerContext* context,
                                        const v1::FetchArtifactRequest* request,
                                        grpc::ServerWriter<v1::ArtifactChunk>* writer) {
  return Handle("FetchArtifact", context,
                [&](const Caller& caller) { return Fetch(caller, context, *request, writer); });
}

grpc::Status KilnService::ListTargets(grpc::ServerContext* context,
                                      const v1::ListTargetsRequest* request,
                                      v1::ListTargetsResponse* response) {
  return Handle("ListTargets", context, [&](const Caller&) {
    for (const ir::Target& target : driver::ListTargets()) {
      v1::TargetInfo* info = response->add_targets();
      info->set_name(target.preset);
      info->set_canonical(target.Canonical());
      info->set_description(Describe(target));
    }
    return absl::OkStatus();
  });
}

absl::Status KilnService::Upload(const Caller& caller,
                                 grpc::ServerReader<v1::UploadModelRequest>* reader,
                                 v1::UploadModelResponse* response) {
  UploadAssembler upload(options_.max_model_bytes);
  v1::UploadModelRequest message;
  while (reader->Read(&message)) {
    if (absl::Status status = upload.Add(message); !status.ok()) return status;
  }
  absl::StatusOr<std::string> bytes = upload.Finish();
  if (!bytes.ok()) return bytes.status();
  // Present for this tenant: whether another tenant has the same bytes is not its business.
  absl::StatusOr<bool> present = store_.HasBlob(upload.digest());
  if (!present.ok()) return present.status();
  absl::StatusOr<bool> owned = owners_.Owns(caller.tenant, upload.digest());
  if (!owned.ok()) return owned.status();
  // Stored even when present: a row damaged on disk is repaired by the fresh bytes.
  absl::StatusOr<std::string> digest = store_.PutBlob(*bytes);
  if (!digest.ok()) return digest.status();
  if (absl::Status status = owners_.Grant(caller.tenant, *digest); !status.ok()) return status;
  if (fleet_ != nullptr) {
    fleet_->PushBlob(*digest, *bytes);
    fleet_->GrantOwner(caller.tenant, *digest);
  }
  response->set_model_digest(*digest);
  response->set_size_bytes(bytes->size());
  response->set_already_present(*present && *owned);
  spdlog::info("upload '{}' by tenant '{}': {} ({} bytes){}", upload.name(), caller.tenant, *digest,
               bytes->size(), *present && *owned ? ", already present" : "");
  return absl::OkStatus();
}

absl::Status KilnService::Fetch(const Caller& caller, grpc::ServerContext* context,
                                const v1::FetchArtifactRequest& request,
                                grpc::ServerWriter<v1::ArtifactChunk>* writer) {
  const std::string& digest = request.artifact_digest();
  if (!cache::IsValidDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fetch: artifact_digest must be \"sha256:\" followed by 64 lowercase hex digits, got \"",
        digest, "\""));
  }
  const absl::Status not_found =
      absl::NotFoundError(absl::StrCat("fetch: artifact ", digest, " not found"));
  if (absl::Status status = CheckVisible(caller, digest, not_found); !status.ok()) return status;
  absl::StatusOr<std::optional<cache::CompileResult>> record = store_.GetArtifact(digest);
  if (!record.ok()) return record.status();
  if (!record->has_value()) return not_found;
  absl::StatusOr<std::string> bytes = ReadBlob(store_, digest, digest);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::string> manifest = ReadBlob(store_, (*record)->manifest_digest, digest);
  if (!manifest.ok()) return manifest.status();

  return WriteChunks(context, digest, (*record)->file_name, *bytes, *manifest, writer);
}

grpc::Status KilnService::GetCacheStats(grpc::ServerContext* context,
                                        const v1::GetCacheStatsRequest* request,
                                        v1::CacheStats* response) {
  return Handle("GetCacheStats", context, [&](const Caller&) -> absl::Status {
    absl::StatusOr<cache::CacheStats> stats = store_.Stats();
    if (!stats.ok()) return stats.status();
    response->set_blobs(stats->blobs);
    response->set_blob_bytes(stats->blob_bytes);
    response->set_models(stats->models);
    response->set_artifacts(stats->artifacts);
    response->set_compile_results(stats->compile_results);
    response->set_quarantined(stats->quarantined);
    response->set_quarantined_bytes(stats->quarantine_bytes);
    response->set_evictions(stats->evictions);
    response->set_hits(stats->hits);
    response->set_misses(stats->misses);
    response->set_max_bytes(stats->max_bytes);
    if (tuning_db_ != nullptr) {
      absl::StatusOr<cache::TuningStats> tuning = tuning_db_->Stats();
      if (!tuning.ok()) return tuning.status();
      response->set_tuning_records(tuning->records);
    }
    return absl::OkStatus();
  });
}

grpc::Status KilnService::EvictCache(grpc::ServerContext* context,
                                     const v1::EvictCacheRequest* request,
                                     v1::EvictCacheResponse* response) {
  return Handle("EvictCache", context, [&](const Caller& caller) -> absl::Status {
    if (absl::Status status = Authorize(caller, Role::kAdmin, "EvictCache"); !status.ok()) {
      return status;
    }
    cache::EvictRequest evict;
    switch (request->what_case()) {
      case v1::EvictCacheRequest::kAllArtifacts:
        evict.scope = cache::EvictRequest::Scope::kAllArtifacts;
        break;
      case v1::EvictCacheRequest::kToBytes:
        evict.scope = cache::EvictRequest::Scope::kToBytes;
        evict.to_bytes = request->to_bytes();
        break;
      case v1::EvictCacheRequest::kArtifactDigest:
        if (!cache::IsValidDigest(request->artifact_digest())) {
          return absl::InvalidArgumentError(
              absl::StrCat("evict: artifact_digest must be \"sha256:\" followed by 64 lowercase "
                           "hex digits, got \"",
                           request->artifact_digest(), "\""));
        }
        evict.scope = cache::EvictRequest::Scope::kArtifact;
        evict.artifact_digest = request->artifact_digest();
        break;
      case v1::EvictCacheRequest::WHAT_NOT_SET:
        return absl::InvalidArgumentError(
            "evict: say what: all_artifacts, to_bytes or artifact_digest");
    }
    absl::StatusOr<cache::EvictResult> evicted = store_.Evict(evict);
    if (!evicted.ok()) return evicted.status();
    response->set_artifacts(evicted->artifacts);
    response->set_bytes(evicted->bytes);
    spdlog::info("evict by tenant '{}': {} artifacts, {} bytes", caller.tenant, evicted->artifacts,
                 evicted->bytes);
    return absl::OkStatus();
  });
}

// --- Jobs ----------------------------------------------------------------------------------

absl::StatusOr<JobManager::Submitted> KilnService::SubmitCompileJob(
    const Caller& caller, const v1::CompileRequest& request, absl::Duration timeout) {
  if (absl::Status status = Authorize(caller, Role::kCompile, "Compile"); !status.ok()) {
    return status;
  }
  const bool tunes = request.tune_trials() > 0 || request.tune_seconds() > 0;
  if (tunes) {
    if (absl::Status status = Authorize(caller, Role::kTune, "a tuning budget"); !status.ok()) {
      return status;
    }
  }
  PullModel(request.model_digest());
  if (absl::Status status = CompileJob::Validate(store_, request); !status.ok()) return status;
  if (absl::Status status =
          CheckVisible(caller, request.model_digest(),
                       absl::NotFoundError(absl::StrCat("compile: model ", request.model_digest(),
                                                        " not found; upload it first")));
      !status.ok()) {
    return status;
  }
  v1::Job description;
  description.set_kind(v1::Job::COMPILE);
  description.set_model_digest(request.model_digest());
  *description.mutable_targets() = request.targets();
  description.set_tenant(caller.tenant);
  JobManager::Work work = [this, request, tenant = caller.tenant](Job& job) {
    StageClock clock(metrics_);
    // Each artifact becomes the tenant's before its watchers hear of it.
    auto emit = [this, &job, &tenant, &clock](const v1::CompileEvent& event) {
      clock.See(event);
      if (event.kind() == v1::CompileEvent::TARGET_DONE) Grant(tenant, event.artifact_digest());
      v1::JobEvent logged;
      *logged.mutable_compile() = event;
      job.Log(std::move(logged));
    };
    CompilerFn counted = [this](std::string_view onnx, const ir::Target& target,
                                const driver::CompileOptions& options,
                                const driver::EventSink& events) {
      compiler_runs_.fetch_add(1);
      return options_.compiler(onnx, target, options, events);
    };
    auto interrupted = [&job] { return job.Interrupted(); };
    absl::Status status =
        CompileJob(store_, counted, emit, interrupted, Tuning(), fleet_).Run(request);
    spdlog::info("job {}: compile {} for {} target(s): {}", job.id(), request.model_digest(),
                 request.targets_size(), status.ToString());
    return status;
  };
  return jobs_.Submit(std::move(description), DedupKey("compile " + caller.tenant, request),
                      timeout, std::move(work));
}

absl::StatusOr<JobManager::Submitted> KilnService::SubmitTuneJob(const Caller& caller,
                                                                 const v1::TuneRequest& request,
                                                                 absl::Duration timeout) {
  // Tuning records are shared by every tenant: only the tune role writes them.
  if (absl::Status status = Authorize(caller, Role::kTune, "Tune"); !status.ok()) return status;
  PullModel(request.model_digest());
  auto log_nothing = [](const v1::TuneEvent&) {};
  auto never = [] { return absl::OkStatus(); };
  if (absl::Status status = TuneJob(store_, Tuning(), log_nothing, never).Validate(request);
      !status.ok()) {
    return status;
  }
  if (absl::Status status =
          CheckVisible(caller, request.model_digest(),
                       absl::NotFoundError(absl::StrCat("tune: model ", request.model_digest(),
                                                        " not found; upload it first")));
      !status.ok()) {
    return status;
  }
  v1::Job description;
  description.set_kind(v1::Job::TUNE);
  description.set_model_digest(request.model_digest());
  description.add_targets(request.target().empty() ? "host" : request.target());
  description.set_tenant(caller.tenant);
  JobManager::Work work = [this, request](Job& job) {
    auto emit = [this, &job](const v1::TuneEvent& event) {
      if (metrics_ != nullptr && event.has_progress()) metrics_->tuning_trials.Add();
      v1::JobEvent logged;
      *logged.mutable_tune() = event;
      job.Log(std::move(logged));
    };
    auto interrupted = [&job] { return job.Interrupted(); };
    absl::Status status = TuneJob(store_, Tuning(), emit, interrupted).Run(request);
    if (fleet_ != nullptr && tuning_db_ != nullptr) fleet_->PushTuning(*tuning_db_);
    spdlog::info("job {}: tune {} for {}: {}", job.id(), request.model_digest(), request.target(),
                 status.ToString());
    return status;
  };
  return jobs_.Submit(std::move(description), DedupKey("tune " + caller.tenant, request), timeout,
                      std::move(work));
}

// The streaming Compile: a job whose events this call forwards, cancelled when every caller
// that waits on it this way has left (and nobody submitted it on its own).
grpc::Status KilnService::Compile(grpc::ServerContext* context, const v1::CompileRequest* request,
                                  grpc::ServerWriter<v1::CompileEvent>* writer) {
  return Handle("Compile", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitCompileJob(caller, *request, absl::InfiniteDuration());
    if (!submitted.ok()) return submitted.status();
    return WatchToTheEnd(context, *submitted->job, [writer](const v1::JobEvent& event) {
      return !event.has_compile() || writer->Write(event.compile());
    });
  });
}

grpc::Status KilnService::Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                               grpc::ServerWriter<v1::TuneEvent>* writer) {
  return Handle("Tune", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitTuneJob(caller, *request, absl::InfiniteDuration());
    if (!submitted.ok()) return submitted.status();
    return WatchToTheEnd(context, *submitted->job, [writer](const v1::JobEvent& event) {
      return !event.has_tune() || writer->Write(event.tune());
    });
  });
}

grpc::Status KilnService::SubmitCompile(grpc::ServerContext* context,
                                        const v1::SubmitCompileRequest* request,
                                        v1::Job* response) {
  return Handle("SubmitCompile", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<absl::Duration> timeout = TimeoutOf(request->timeout_seconds());
    if (!timeout.ok()) return timeout.status();
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitCompileJob(caller, request->compile(), *timeout);
    if (!submitted.ok()) return submitted.status();
    submitted->job->KeepWithoutWatchers();
    *response = submitted->job->Info();
    response->set_joined(submitted->joined);
    return absl::OkStatus();
  });
}

grpc::Status KilnService::SubmitTune(grpc::ServerContext* context,
                                     const v1::SubmitTuneRequest* request, v1::Job* response) {
  return Handle("SubmitTune", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<absl::Duration> timeout = TimeoutOf(request->timeout_seconds());
    if (!timeout.ok()) return timeout.status();
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitTuneJob(caller, request->tune(), *timeout);
    if (!submitted.ok()) return submitted.status();
    submitted->job->KeepWithoutWatchers();
    *response = submitted->job->Info();
    response->set_joined(submitted->joined);
    return absl::OkStatus();
  });
}

grpc::Status KilnService::WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  return Handle("WatchJob", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<std::shared_ptr<Job>> job = FindJob(caller, request->job_id());
    if (!job.ok()) return job.status();
    const v1::Job info = (*job)->Info();
    const bool finished = info.finished_unix_ms() != 0;
    if (request->from_event() < 0 || (finished && request->from_event() > info.events())) {
      return absl::OutOfRangeError(absl::StrCat("watch: from_event = ", request->from_event(),
                                                "; job ", info.id(), " has events 0 to ",
                                                info.events() - 1));
    }
    return Follow(context, **job, request->from_event(),
                  [writer](const v1::JobEvent& event) { return writer->Write(event); });
  });
}

grpc::Status KilnService::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                 v1::Job* response) {
  return Handle("GetJob", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<std::shared_ptr<Job>> job = FindJob(caller, request->job_id());
    if (!job.ok()) return job.status();
    *response = (*job)->Info();
    return absl::OkStatus();
  });
}

grpc::Status KilnService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                   v1::ListJobsResponse* response) {
  return Handle("ListJobs", context, [&](const Caller& caller) {
    for (v1::Job& job : jobs_.List()) {
      if (caller.admin || job.tenant() == caller.tenant) *response->add_jobs() = std::move(job);
    }
    return absl::OkStatus();
  });
}

grpc::Status KilnService::CancelJob(grpc::ServerContext* context,
                                    const v1::CancelJobRequest* request, v1::Job* response) {
  return Handle("CancelJob", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<std::shared_ptr<Job>> job = FindJob(caller, request->job_id());
    if (!job.ok()) return job.status();
    (*job)->Cancel(absl::CancelledError(absl::StrCat("job ", request->job_id(), " cancelled")));
    *response = (*job)->Info();
    return absl::OkStatus();
  });
}

}  // namespace kiln::server
