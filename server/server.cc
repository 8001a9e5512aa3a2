#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/metrics_interceptor.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// The service name health checks may ask about, besides "" (the whole server).
constexpr char kServiceName[] = "kiln.v1.Kiln";

absl::StatusOr<std::string> DatabasePath(const std::string& data_dir) {
  std::error_code error;
  std::filesystem::create_directories(data_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data dir ", data_dir, ": ", error.message()));
  }
  return (std::filesystem::path(data_dir) / "kiln.db").string();
}

// Unique per process, readable in the lease table: host, pid and a random part.
std::string ReplicaName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrFormat("%s/%d/%08x", host, getpid(), absl::Uniform<uint32_t>(absl::BitGen()));
}

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  }
  return text.str();
}

// TLS when a certificate is configured; mutual TLS when a client CA is as well.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const TlsOptions& tls) {
  if (tls.cert_file.empty() && tls.key_file.empty()) {
    if (!tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  absl::StatusOr<std::string> cert = ReadPem("tls-cert", tls.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("tls-key", tls.key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("tls-client-ca", tls.client_ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace

absl::Status UsePrivateTempDir(const std::string& data_dir) {
  const std::filesystem::path dir = std::filesystem::path(data_dir) / "tmp";
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  if (!error) std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot prepare the temp dir ", dir.string(), ": ", error.message()));
  }
  setenv("TMPDIR", dir.c_str(), /*overwrite=*/1);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  std::unique_ptr<Server> server(new Server());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  if (!options.token_file.empty()) {
    absl::StatusOr<TokenTable> tokens = TokenTable::Load(options.token_file);
    if (!tokens.ok()) return tokens.status();
    spdlog::info("kilnd: {} tokens from {}", tokens->size(), options.token_file);
    options.service.tokens = *std::move(tokens);
  } else {
    spdlog::warn("kilnd: no --token-file: every caller is admin of one shared tenant");
  }
  absl::StatusOr<std::string> db_path = DatabasePath(options.data_dir);
  if (!db_path.ok()) return db_path.status();
  options.service.tuning_db_path = *db_path;  // compile workers read the tuning records there
  absl::StatusOr<std::unique_ptr<cache::Store>> store =
      cache::Store::Open(*db_path, {.max_bytes = options.max_cache_bytes});
  if (!store.ok()) return store.status();
  server->store_ = *std::move(store);
  // Every compile reads its records, so what any client tuned serves every later compile.
  absl::StatusOr<std::unique_ptr<cache::TuningDb>> tuning_db = cache::TuningDb::Open(*db_path);
  if (!tuning_db.ok()) return tuning_db.status();
  server->tuning_db_ = *std::move(tuning_db);
  absl::StatusOr<std::unique_ptr<cache::Owners>> owners = cache::Owners::Open(*db_path);
  if (!owners.ok()) return owners.status();
  server->owners_ = *std::move(owners);
  if (!options.postgres.empty()) {
    absl::StatusOr<std::unique_ptr<cache::FleetTier>> tier =
        cache::FleetTier::Connect(options.postgres);
    if (!tier.ok()) return tier.status();
    server->fleet_ = std::make_unique<Fleet>(*std::move(tier), ReplicaName(), options.fleet);
  }
  server->metrics_ = std::make_unique<Metrics>();
  server->service_ =
      std::make_unique<KilnService>(*server->store_, server->tuning_db_.get(), *server->owners_,
                                    server->fleet_.get(), std::move(options.service));
  server->service_->ExportMetrics(*server->metrics_);
  server->metrics_->ExportCacheStats(*server->store_);
  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http = MetricsHttpServer::Start(
        options.metrics_listen, [metrics = server->metrics_.get()] { return metrics->Render(); });
    if (!http.ok()) return http.status();
    server->metrics_http_ = *std::move(http);
  }

  // Both are process-wide switches read by the builder; setting them again is harmless.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, *credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  // Limits on what any client may take: message sizes, streams per connection and, through
  // the thread quota, calls in flight (one thread each in this synchronous server).
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  if (options.max_rpcs > 0) {
    grpc::ResourceQuota quota("kilnd");
    quota.SetMaxThreads(options.max_rpcs);
    builder.SetResourceQuota(quota);
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<MetricsInterceptorFactory>(*server->metrics_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
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
  // Load balancers stop sending work before the port closes; meanwhile running jobs finish
  // (or are cancelled at the end of the grace period) and their watchers get the outcome.
  grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  const absl::Time deadline = absl::Now() + grace;
  service_->DrainJobs(grace);
  // Watchers of the last jobs still need a moment to receive the final event.
  grpc_server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now() + absl::Seconds(1))));
  grpc_server_->Wait();
  if (metrics_http_ != nullptr) metrics_http_->Stop();
  if (absl::Status status = store_->Checkpoint(); !status.ok()) {
    spdlog::warn("kilnd: checkpointing the cache: {}", status.ToString());
  }
  spdlog::info("kilnd stopped");
}

Server::~Server() { Shutdown(); }

}  // namespace kiln::server
