// kilnd: the Kiln compilation daemon. Parses flags, sets up logging, starts the server and
// shuts it down cleanly on SIGINT or SIGTERM. Everything else lives in kiln_server.
#include <pthread.h>

#include <csignal>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "server/compile_sandbox.h"
#include "server/json_log.h"
#include "server/kilnd_flags.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // A compile worker of a running kilnd (server/compile_sandbox.h), not a daemon.
  if (argc > 1 && std::strcmp(argv[1], kiln::server::kCompileWorkerFlag) == 0) {
    return kiln::server::RunCompileWorker(std::vector<std::string>(argv + 2, argv + argc));
  }
  absl::StatusOr<kiln::server::KilndFlags> flags =
      kiln::server::ParseKilndFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    std::cerr << "kilnd: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout << kiln::server::KilndUsage();
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(flags->log_level));
  if (flags->json_logs) {
    kiln::server::UseJsonLogs();
  } else {
    kiln::server::UseTextLogs();
  }
  kiln::server::RouteGrpcLogsToSpdlog();

  // Block the stop signals before gRPC starts its threads, so they all inherit the mask and
  // the signal is taken here by sigwait, where calling Shutdown is safe.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (absl::Status status = kiln::server::UsePrivateTempDir(flags->server.data_dir); !status.ok()) {
    spdlog::critical("kilnd: {}", status.ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<kiln::server::Server>> server =
      kiln::server::Server::Start(flags->server);
  if (!server.ok()) {
    spdlog::critical("kilnd: {}", server.status().ToString());
    return 1;
  }
  int signal = 0;
  sigwait(&stop_signals, &signal);
  spdlog::info("kilnd: {} received, shutting down", strsignal(signal));
  (*server)->Shutdown(flags->server.drain);
  return 0;
}
