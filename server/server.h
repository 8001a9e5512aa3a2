// kilnd's server: the cache, the Kiln service, health checking and reflection on one port.
// Used by kilnd's main and by tests, which start it on port 0 with a temporary data dir.
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "server/fleet.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/service.h"

namespace kiln::server {

// PEM files. With cert and key the port speaks TLS only; with client_ca as well, every client
// must present a certificate signed by it (mutual TLS).
struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

struct ServerOptions {
  std::string listen_address = "127.0.0.1:50051";  // HOST:PORT; port 0 picks a free one
  std::string data_dir = "./var";                  // holds kiln.db; created if missing
  TlsOptions tls;
  // Bearer tokens with tenants and roles (server/auth.h); "": no auth, every caller is admin.
  std::string token_file;
  // HOST:PORT for Prometheus metrics over HTTP (/metrics); "": none.
  std::string metrics_listen;
  // libpq conninfo of the fleet's shared PostgreSQL tier; "": this kilnd's SQLite only.
  std::string postgres;
  FleetOptions fleet;
  // The cache's size cap in bytes (least recently used artifacts go first); 0: none.
  uint64_t max_cache_bytes = 0;
  // How long a stop (SIGTERM) lets jobs in flight finish before cancelling them.
  absl::Duration drain = absl::Seconds(30);
  ServiceOptions service;
  // gRPC's limits. The largest message the server accepts and sends; larger is
  // RESOURCE_EXHAUSTED. Well above the 1 MiB upload chunk, so that a chunk of a few MiB still
  // reaches the service, whose INVALID_ARGUMENT names the chunk and the limit.
  int max_receive_message_bytes = 4 << 20;
  int max_send_message_bytes = 4 << 20;
  // Concurrent calls (HTTP/2 streams) per client connection; more wait for a free one.
  int max_streams_per_connection = 100;
  // Calls served at once over all connections, one thread each; more are RESOURCE_EXHAUSTED
  // ("Server Threadpool Exhausted") at once. 0: no limit.
  int max_rpcs = 256;
};

// Points TMPDIR (the compiler's link files, compile workers) at DATA_DIR/tmp, emptied first:
// what a killed kilnd left there is removed at the next start. For kilnd's main only: it
// changes the process's environment.
absl::Status UsePrivateTempDir(const std::string& data_dir);

class Server {
 public:
  // Opens DATA_DIR/kiln.db (the cache and the tuning database) and starts serving. UNAVAILABLE when
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);
  ~Server();  // shuts down if still running

  // The bound port (the chosen one when the address asked for port 0).
  int port() const { return port_; }
  // The metrics HTTP port; 0 without --metrics-listen.
  int metrics_port() const { return metrics_http_ ? metrics_http_->port() : 0; }
  // Reports NOT_SERVING to health checks, refuses new jobs, lets jobs and calls in flight
  // finish within `grace` and then cancels them. Waits for the handlers to return.
  // Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

  KilnService& service() { return *service_; }

 private:
  Server() = default;

  // Declaration order is teardown order in reverse: gRPC stops before the service and the
  // store it uses go away.
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<cache::TuningDb> tuning_db_;  // in the store's kiln.db
  std::unique_ptr<cache::Owners> owners_;       // likewise
  std::unique_ptr<Fleet> fleet_;                // with --postgres
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // with --metrics-listen
  std::unique_ptr<KilnService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace kiln::server
