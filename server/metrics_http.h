// A minimal HTTP/1.1 server for Prometheus scrapes: GET /metrics answers with the rendered
// registry, GET /healthz with "ok", anything else 404 (400 for a malformed request). One
// connection at a time on its own thread, since scrapes are rare; a request head is at most
// 8 KiB and must arrive within 5 seconds, so a slow or garbage client cannot hold it. Every
// answer closes the connection. POSIX sockets only: no HTTP library ships in Debian 12 that fits.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace kiln::server {

class MetricsHttpServer {
 public:
  // Listens on HOST:PORT ("0.0.0.0:9090", "[::1]:0", ":9090" for every address; port 0 picks a
  // free one) and serves `render()`'s text at /metrics. INVALID_ARGUMENT for a malformed
  // address, UNAVAILABLE naming it when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host_port, std::function<std::string()> render);
  ~MetricsHttpServer();  // stops

  int port() const { return port_; }
  // Closes the port and waits for the serving thread, within about 100 ms even with a client
  // connected. Idempotent.
  void Stop();

 private:
  MetricsHttpServer(int listen_fd, int port, std::function<std::string()> render);
  void Serve();
  void Answer(int fd);

  const int listen_fd_;
  const int port_;
  const std::function<std::string()> render_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace kiln::server
