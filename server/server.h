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
#include "server/service.h"

namespace kiln::server {

struct ServerOptions {
  std::string listen_address = "127.0.0.1:50051";  // HOST:PORT; port 0 picks a free one
  std::string data_dir = "./var";                  // holds kiln.db; created if missing
  ServiceOptions service;
};

class Server {
 public:
  // Opens DATA_DIR/kiln.db (the cache and the tuning database) and starts serving. UNAVAILABLE when
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);
  ~Server();  // shuts down if still running

  // The bound port (the chosen one when the address asked for port 0).
  int port() const { return port_; }
  // Reports NOT_SERVING to health checks, stops taking calls, lets calls in flight finish
  // within `grace` and then cancels them. Waits for the handlers to return. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

  const KilnService& service() const { return *service_; }

 private:
  Server() = default;

  // Declaration order is teardown order in reverse: gRPC stops before the service and the
  // store it uses go away.
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<cache::TuningDb> tuning_db_;  // in the store's kiln.db
  std::unique_ptr<KilnService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace kiln::server
