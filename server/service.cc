#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cache/digest.h"
#include "compiler/driver/driver.h"
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

std::string Describe(const ir::Target& target) {
  std::string text = absl::StrCat(target.triple, ", cpu ", target.cpu);
  if (!target.features.empty()) absl::StrAppend(&text, ", features ", target.features);
  absl::StrAppend(&text, ", ", target.vector_bits, "-bit vectors");
  return text;
}

}  // namespace

KilnService::KilnService(cache::Store& store, cache::TuningDb* tuning_db, ServiceOptions options)
    : store_(store),
      tuning_db_(tuning_db),
      options_(std::move(options)),
      slots_(options_.max_running_jobs, options_.max_queued_jobs) {
  options_.max_model_bytes = std::min(options_.max_model_bytes, store.max_blob_bytes());
}

grpc::Status KilnService::UploadModel(grpc::ServerContext* context,
                                      grpc::ServerReader<v1::UploadModelRequest>* reader,
                                      v1::UploadModelResponse* response) {
  return ToGrpcStatus(CatchExceptions("UploadModel", [&] { return Upload(reader, response); }));
}

grpc::Status KilnService::Compile(grpc::ServerContext* context, const v1::CompileRequest* request,
                                  grpc::ServerWriter<v1::CompileEvent>* writer) {
  return ToGrpcStatus(
      CatchExceptions("Compile", [&] { return RunCompile(context, *request, writer); }));
}

grpc::Status KilnService::FetchArtifact(grpc::ServerContext* context,
                                        const v1::FetchArtifactRequest* request,
                                        grpc::ServerWriter<v1::ArtifactChunk>* writer) {
  return ToGrpcStatus(
      CatchExceptions("FetchArtifact", [&] { return Fetch(context, *request, writer); }));
}

grpc::Status KilnService::ListTargets(grpc::ServerContext* context,
                                      const v1::ListTargetsRequest* request,
                                      v1::ListTargetsResponse* response) {
  return ToGrpcStatus(CatchExceptions("ListTargets", [&] {
    for (const ir::Target& target : driver::ListTargets()) {
      v1::TargetInfo* info = response->add_targets();
      info->set_name(target.preset);
      info->set_canonical(target.Canonical());
      info->set_description(Describe(target));
    }
    return absl::OkStatus();
  }));
}

grpc::Status KilnService::Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                               grpc::ServerWriter<v1::TuneEvent>* writer) {
  return ToGrpcStatus(CatchExceptions("Tune", [&] { return RunTune(context, *request, writer); }));
}

absl::Status KilnService::Upload(grpc::ServerReader<v1::UploadModelRequest>* reader,
                                 v1::UploadModelResponse* response) {
  UploadAssembler upload(options_.max_model_bytes);
  v1::UploadModelRequest message;
  while (reader->Read(&message)) {
    if (absl::Status status = upload.Add(message); !status.ok()) return status;
  }
  absl::StatusOr<std::string> bytes = upload.Finish();
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<bool> present = store_.HasBlob(upload.digest());
  if (!present.ok()) return present.status();
  // Stored even when present: a row damaged on disk is repaired by the fresh bytes.
  absl::StatusOr<std::string> digest = store_.PutBlob(*bytes);
  if (!digest.ok()) return digest.status();
  response->set_model_digest(*digest);
  response->set_size_bytes(bytes->size());
  response->set_already_present(*present);
  spdlog::info("upload '{}': {} ({} bytes){}", upload.name(), *digest, bytes->size(),
               *present ? ", already present" : "");
  return absl::OkStatus();
}

absl::Status KilnService::RunCompile(grpc::ServerContext* context,
                                     const v1::CompileRequest& request,
                                     grpc::ServerWriter<v1::CompileEvent>* writer) {
  auto interrupted = [context] { return Interrupted(context); };
  absl::StatusOr<JobSlots::Lease> lease = slots_.Acquire(interrupted);
  if (!lease.ok()) return lease.status();
  // The compiler may report events from its own threads; a gRPC stream takes one writer.
  absl::Mutex write_mu;
  auto emit = [&](const v1::CompileEvent& event) {
    absl::MutexLock lock(&write_mu);
    writer->Write(event);  // a failed write means the client left; `interrupted` notices
  };
  CompilerFn counted = [this](std::string_view onnx, const ir::Target& target,
                              const driver::CompileOptions& options,
                              const driver::EventSink& events) {
    compiler_runs_.fetch_add(1);
    return options_.compiler(onnx, target, options, events);
  };
  absl::Status status = CompileJob(store_, counted, emit, interrupted, Tuning()).Run(request);
  spdlog::info("compile {} for {} target(s): {}", request.model_digest(), request.targets_size(),
               status.ToString());
  return status;
}

absl::Status KilnService::RunTune(grpc::ServerContext* context, const v1::TuneRequest& request,
                                  grpc::ServerWriter<v1::TuneEvent>* writer) {
  auto interrupted = [context] { return Interrupted(context); };
  // Progress comes from the tuner's thread only, but a lock keeps the one-writer rule
  // obvious.
  absl::Mutex write_mu;
  auto emit = [&](const v1::TuneEvent& event) {
    absl::MutexLock lock(&write_mu);
    writer->Write(event);  // a failed write means the client left; `interrupted` notices
  };
  TuneJob job(store_, Tuning(), emit, interrupted);
  // A bad request is answered at once, without waiting for a slot.
  if (absl::Status status = job.Validate(request); !status.ok()) return status;
  absl::StatusOr<JobSlots::Lease> lease = slots_.Acquire(interrupted);
  if (!lease.ok()) return lease.status();
  absl::Status status = job.Run(request);
  spdlog::info("tune {} for {}: {}", request.model_digest(), request.target(), status.ToString());
  return status;
}

absl::Status KilnService::Fetch(grpc::ServerContext* context,
                                const v1::FetchArtifactRequest& request,
                                grpc::ServerWriter<v1::ArtifactChunk>* writer) {
  const std::string& digest = request.artifact_digest();
  if (!cache::IsValidDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fetch: artifact_digest must be \"sha256:\" followed by 64 lowercase hex digits, got \"",
        digest, "\""));
  }
  absl::StatusOr<std::optional<cache::CompileResult>> record = store_.GetArtifact(digest);
  if (!record.ok()) return record.status();
  if (!record->has_value()) {
    return absl::NotFoundError(absl::StrCat("fetch: artifact ", digest, " not found"));
  }
  absl::StatusOr<std::string> bytes = ReadBlob(store_, digest, digest);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::string> manifest = ReadBlob(store_, (*record)->manifest_digest, digest);
  if (!manifest.ok()) return manifest.status();

  return WriteChunks(context, digest, (*record)->file_name, *bytes, *manifest, writer);
}

}  // namespace kiln::server
