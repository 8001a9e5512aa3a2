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
#include "grpcpp/security/credentials.h"
#include "kiln/v1/kiln.grpc.pb.h"

namespace kiln::client {

struct FetchedArtifact {
  std::string file_name;
  std::string manifest_json;
  std::string bytes;  // verified against the requested digest
};

class RemoteKiln {
 public:
  // A client of the kilnd at `address`; every call gets `timeout` as its deadline. How to
  // reach it comes from the environment, as for other command-line clients:
  //   KILN_TOKEN             bearer token sent with every call (or KILN_TOKEN_FILE: its file)
  //   KILN_TLS_CA            PEM CA bundle: speak TLS and trust this CA
  //   KILN_TLS_CERT, KILN_TLS_KEY   client certificate and key, for mutual TLS
  // INVALID_ARGUMENT naming a variable whose file cannot be read.
  static absl::StatusOr<std::unique_ptr<RemoteKiln>> Connect(const std::string& address,
                                                             std::chrono::seconds timeout);
  RemoteKiln(const std::string& address, std::chrono::seconds timeout,
             std::shared_ptr<grpc::ChannelCredentials> credentials, std::string token);

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

  absl::StatusOr<v1::ListJobsResponse> ListJobs();
  absl::StatusOr<v1::Job> GetJob(const std::string& id);
  absl::StatusOr<v1::Job> CancelJob(const std::string& id);
  // Calls on_event for each event from `from_event` on and returns the job's final state. A
  // dropped connection or an expired deadline is resumed from the next event index, up to a
  // few times in a row without progress.
  absl::StatusOr<v1::Job> WatchJob(const std::string& id, int64_t from_event,
                                   const std::function<void(const v1::JobEvent&)>& on_event);
  absl::StatusOr<v1::CacheStats> GetCacheStats();
  absl::StatusOr<v1::EvictCacheResponse> EvictCache(const v1::EvictCacheRequest& request);

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  std::string address_;
  std::chrono::seconds timeout_;
  std::string token_;
  std::unique_ptr<v1::Kiln::Stub> stub_;
};

}  // namespace kiln::client
