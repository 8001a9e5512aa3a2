#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// The service name health checks may ask about, besides "" (the whole server).
constexpr char kServiceName[] = "kiln.v1.Kiln";

absl::StatusOr<std::unique_ptr<cache::Store>> OpenStore(const std::string& data_dir) {
  std::error_code error;
  std::filesystem::create_directories(data_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data dir ", data_dir, ": ", error.message()));
  }
  return cache::Store::Open((std::filesystem::path(data_dir) / "kiln.db").string());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  std::unique_ptr<Server> server(new Server());
  absl::StatusOr<std::unique_ptr<cache::Store>> store = OpenStore(options.data_dir);
  if (!store.ok()) return store.status();
  server->store_ = *std::move(store);
  // Every compile reads its records, so what any client tuned serves every later compile.
  absl::StatusOr<std::unique_ptr<cache::TuningDb>> tuning_db =
      cache::TuningDb::Open((std::filesystem::path(options.data_dir) / "kiln.db").string());
  if (!tuning_db.ok()) return tuning_db.status();
  server->tuning_db_ = *std::move(tuning_db);
  server->service_ = std::make_unique<KilnService>(*server->store_, server->tuning_db_.get(),
                                                   std::move(options.service));

  // Both are process-wide switches read by the builder; setting them again is harmless.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address));
  }
  grpc::HealthCheckServiceInterface* health = server->grpc_server_->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus(kServiceName, true);
  spdlog::info("kilnd serving on port {} (data dir {}, models up to {} bytes)", server->port_,
               options.data_dir, server->service_->max_model_bytes());
  return server;
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_ || grpc_server_ == nullptr) return;
  shut_down_ = true;
  // Load balancers stop sending work before the port closes.
  grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  grpc_server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  grpc_server_->Wait();
  spdlog::info("kilnd stopped");
}

Server::~Server() { Shutdown(); }

}  // namespace kiln::server
