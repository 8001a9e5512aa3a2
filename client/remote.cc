#include "client/remote.h"

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cache/digest.h"

namespace kiln::client {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;  // the API's limit per message

// gRPC and absl share status codes.
absl::Status FromGrpc(const char* rpc, const std::string& address, const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(rpc, " (kilnd at ", address, "): ", s.error_message()));
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// The contents of the file the environment variable names.
absl::StatusOr<std::string> ReadEnvFile(const char* variable) {
  const std::string path = Env(variable);
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(variable, ": cannot read ", path));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteKiln>> RemoteKiln::Connect(const std::string& address,
                                                                std::chrono::seconds timeout) {
  std::string token = Env("KILN_TOKEN");
  if (token.empty() && !Env("KILN_TOKEN_FILE").empty()) {
    absl::StatusOr<std::string> file = ReadEnvFile("KILN_TOKEN_FILE");
    if (!file.ok()) return file.status();
    token = std::string(absl::StripAsciiWhitespace(*file));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!Env("KILN_TLS_CA").empty()) {
    grpc::SslCredentialsOptions ssl;
    for (auto [variable, field] : {std::pair("KILN_TLS_CA", &ssl.pem_root_certs),
                                   std::pair("KILN_TLS_CERT", &ssl.pem_cert_chain),
                                   std::pair("KILN_TLS_KEY", &ssl.pem_private_key)}) {
      if (Env(variable).empty()) continue;
      absl::StatusOr<std::string> pem = ReadEnvFile(variable);
      if (!pem.ok()) return pem.status();
      *field = *std::move(pem);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  return std::make_unique<RemoteKiln>(address, timeout, credentials, std::move(token));
}

RemoteKiln::RemoteKiln(const std::string& address, std::chrono::seconds timeout,
                       std::shared_ptr<grpc::ChannelCredentials> credentials, std::string token)
    : address_(address),
      timeout_(timeout),
      token_(std::move(token)),
      stub_(v1::Kiln::NewStub(grpc::CreateChannel(address, credentials))) {}

std::unique_ptr<grpc::ClientContext> RemoteKiln::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout_);
  if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
  return context;
}

absl::StatusOr<std::string> RemoteKiln::UploadModel(std::string_view name, std::string_view bytes) {
  auto context = NewContext();
  v1::UploadModelResponse response;
  auto writer = stub_->UploadModel(context.get(), &response);
  std::string digest = cache::Sha256Digest(bytes);
  // The first message carries name, digest and size, and (like every message) a chunk; an
  // empty model is still one message.
  size_t offset = 0;
  do {
    v1::UploadModelRequest request;
    if (offset == 0) {
      request.set_name(std::string(name));
      request.set_sha256(digest);
      request.set_total_bytes(bytes.size());
    }
    request.set_chunk(std::string(bytes.substr(offset, kChunkBytes)));
    if (!writer->Write(request)) break;  // the server ended the call; Finish says why
    offset += kChunkBytes;
  } while (offset < bytes.size());
  writer->WritesDone();
  absl::Status status = FromGrpc("UploadModel", address_, writer->Finish());
  if (!status.ok()) return status;
  if (response.model_digest() != digest) {
    return absl::DataLossError(absl::StrCat("UploadModel: server stored ", response.model_digest(),
                                            ", expected ", digest));
  }
  return response.model_digest();
}

absl::Status RemoteKiln::Compile(const v1::CompileRequest& request,
                                 const std::function<void(const v1::CompileEvent&)>& on_event) {
  auto context = NewContext();
  auto reader = stub_->Compile(context.get(), request);
  v1::CompileEvent event;
  while (reader->Read(&event)) on_event(event);
  return FromGrpc("Compile", address_, reader->Finish());
}

absl::StatusOr<v1::TuneSummary> RemoteKiln::Tune(
    const v1::TuneRequest& request, const std::function<void(const v1::TuneEvent&)>& on_event) {
  auto context = NewContext();
  auto reader = stub_->Tune(context.get(), request);
  v1::TuneEvent event;
  std::optional<v1::TuneSummary> summary;
  while (reader->Read(&event)) {
    if (event.has_summary()) summary = event.summary();
    on_event(event);
  }
  absl::Status status = FromGrpc("Tune", address_, reader->Finish());
  if (!status.ok()) return status;
  if (!summary.has_value()) {
    return absl::InternalError(absl::StrCat("Tune (kilnd at ", address_, "): no summary"));
  }
  return *std::move(summary);
}

absl::StatusOr<FetchedArtifact> RemoteKiln::FetchArtifact(const std::string& artifact_digest) {
  auto context = NewContext();
  v1::FetchArtifactRequest request;
  request.set_artifact_digest(artifact_digest);
  auto reader = stub_->FetchArtifact(context.get(), request);
  FetchedArtifact artifact;
  uint64_t total_bytes = 0;
  v1::ArtifactChunk chunk;
  for (bool first = true; reader->Read(&chunk); first = false) {
    if (first) {
      artifact.file_name = chunk.file_name();
      artifact.manifest_json = chunk.manifest_json();
      total_bytes = chunk.total_bytes();
    }
    artifact.bytes += chunk.chunk();
  }
  absl::Status status = FromGrpc("FetchArtifact", address_, reader->Finish());
  if (!status.ok()) return status;
  // Never write an artifact that is not the one asked for.
  std::string digest = cache::Sha256Digest(artifact.bytes);
  if (artifact.bytes.size() != total_bytes || digest != artifact_digest) {
    return absl::DataLossError(absl::StrCat("FetchArtifact: received ", artifact.bytes.size(),
                                            " bytes with digest ", digest, ", expected ",
                                            total_bytes, " bytes with digest ", artifact_digest));
  }
  return artifact;
}

absl::StatusOr<v1::ListTargetsResponse> RemoteKiln::ListTargets() {
  auto context = NewContext();
  v1::ListTargetsResponse response;
  absl::Status status =
      FromGrpc("ListTargets", address_, stub_->ListTargets(context.get(), {}, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::ListJobsResponse> RemoteKiln::ListJobs() {
  auto context = NewContext();
  v1::ListJobsResponse response;
  absl::Status status =
      FromGrpc("ListJobs", address_, stub_->ListJobs(context.get(), {}, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Job> RemoteKiln::GetJob(const std::string& id) {
  auto context = NewContext();
  v1::GetJobRequest request;
  request.set_job_id(id);
  v1::Job job;
  absl::Status status = FromGrpc("GetJob", address_, stub_->GetJob(context.get(), request, &job));
  if (!status.ok()) return status;
  return job;
}

absl::StatusOr<v1::Job> RemoteKiln::CancelJob(const std::string& id) {
  auto context = NewContext();
  v1::CancelJobRequest request;
  request.set_job_id(id);
  v1::Job job;
  absl::Status status =
      FromGrpc("CancelJob", address_, stub_->CancelJob(context.get(), request, &job));
  if (!status.ok()) return status;
  return job;
}

absl::StatusOr<v1::Job> RemoteKiln::WatchJob(
    const std::string& id, int64_t from_event,
    const std::function<void(const v1::JobEvent&)>& on_event) {
  constexpr int kMaxRetries = 5;  // in a row, without an event between them
  int64_t next = from_event;
  for (int retries = 0;;) {
    auto context = NewContext();
    v1::WatchJobRequest request;
    request.set_job_id(id);
    request.set_from_event(next);
    auto reader = stub_->WatchJob(context.get(), request);
    v1::JobEvent event;
    std::optional<v1::Job> finished;
    while (reader->Read(&event)) {
      on_event(event);
      next = event.index() + 1;
      retries = 0;
      if (event.has_finished()) finished = event.finished();
    }
    grpc::Status status = reader->Finish();
    if (status.ok() && finished.has_value()) return *finished;
    const bool resumable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (status.ok() || !resumable || ++retries > kMaxRetries) {
      absl::Status why = FromGrpc("WatchJob", address_, status);
      return why.ok() ? absl::InternalError("WatchJob: the stream ended before the job") : why;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200 * retries));
  }
}

absl::StatusOr<v1::CacheStats> RemoteKiln::GetCacheStats() {
  auto context = NewContext();
  v1::CacheStats stats;
  absl::Status status =
      FromGrpc("GetCacheStats", address_, stub_->GetCacheStats(context.get(), {}, &stats));
  if (!status.ok()) return status;
  return stats;
}

absl::StatusOr<v1::EvictCacheResponse> RemoteKiln::EvictCache(
    const v1::EvictCacheRequest& request) {
  auto context = NewContext();
  v1::EvictCacheResponse response;
  absl::Status status =
      FromGrpc("EvictCache", address_, stub_->EvictCache(context.get(), request, &response));
  if (!status.ok()) return status;
  return response;
}

}  // namespace kiln::client
