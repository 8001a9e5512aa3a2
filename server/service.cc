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
#include "server/catch_exceptions.h"
#include "server/compile_sandbox.h"
#include "server/upload.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// absl and gRPC share the canonical status codes, so the cast is exact.
grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
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
      absl::Status why = ClientGone(context);
      return why.ok() ? absl::UnavailableError("fetch: the stream broke") : why;
    }
    offset += size;
  } while (offset < bytes.size());
  return absl::OkStatus();
}

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

absl::Status ClientGone(const grpc::ServerContext* context) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (std::chrono::system_clock::now() >= context->deadline()) {
    return absl::DeadlineExceededError("deadline exceeded");
  }
  return absl::CancelledError("cancelled by the client");
}

KilnService::KilnService(cache::Store& store, cache::TuningDb* tuning_db, cache::Owners& owners,
                         Fleet* fleet, ServiceOptions options)
    : store_(store),
      tuning_db_(tuning_db),
      owners_(owners),
      fleet_(fleet),
      options_(std::move(options)),
      jobs_(LimitsOf(options_)) {
  options_.max_model_bytes = std::min(options_.max_model_bytes, store.max_blob_bytes());
  // A memory cap means compiling in a worker process that the cap can kill, not the daemon.
  if (options_.job_memory_bytes > 0) {
    options_.compiler = SandboxedCompiler({.worker_path = options_.compile_worker_path,
                                           .memory_bytes = options_.job_memory_bytes,
                                           .tuning_db_path = options_.tuning_db_path});
  }
}

grpc::Status KilnService::Handle(const char* method, const grpc::ServerContext* context,
                                 absl::FunctionRef<absl::Status(const Caller&)> body) {
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
  UploadAssembler upload(options_.max_model_bytes,
                         {.bytes_per_second = options_.max_upload_bytes_per_second});
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

}  // namespace kiln::server
