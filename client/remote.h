// kilnd's API as the client uses it: one method per RPC, each with a deadline, gRPC statuses
// turned into absl ones with the RPC's name in the message.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/v1/kiln.grpc.pb.h"

namespace kiln::client {

struct FetchedArtifact {
  std::string file_name;
  std::string manifest_json;
  std::string bytes;  // verified against the requested digest
};

class RemoteKiln {
 public:
  RemoteKiln(const std::string& address, std::chrono::seconds timeout);

  // Uploads in chunks of at most 1 MiB; returns the server's model digest.
  absl::StatusOr<std::string> UploadModel(std::string_view name, std::string_view bytes);
  // Calls on_event for each event as it arrives; returns the call's final status.
  absl::Status Compile(const v1::CompileRequest& request,
                       const std::function<void(const v1::CompileEvent&)>& on_event);
  absl::StatusOr<FetchedArtifact> FetchArtifact(const std::string& artifact_digest);
  absl::StatusOr<v1::ListTargetsResponse> ListTargets();
  // Calls on_event for each event as it arrives; returns the summary (the last event).
  absl::StatusOr<v1::TuneSummary> Tune(const v1::TuneRequest& request,
                                       const std::function<void(const v1::TuneEvent&)>& on_event);

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  std::string address_;
  std::chrono::seconds timeout_;
  std::unique_ptr<v1::Kiln::Stub> stub_;
};

}  // namespace kiln::client
