#include "client/remote.h"

#include <grpcpp/grpcpp.h>

#include <optional>

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

}  // namespace

RemoteKiln::RemoteKiln(const std::string& address, std::chrono::seconds timeout)
    : address_(address),
      timeout_(timeout),
      stub_(v1::Kiln::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

std::unique_ptr<grpc::ClientContext> RemoteKiln::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout_);
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

}  // namespace kiln::client
