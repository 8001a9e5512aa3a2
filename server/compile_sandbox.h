// The compiler in a child process with resource limits: a model that blows up memory or runs
// away ends its job with a status (RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, CANCELLED), never
// with the daemon killed. The child is kilnd itself in its hidden worker mode
// (`kilnd --compile-worker`), started with posix_spawn, which caps its own address space and
// then compiles one model, talking to the daemon over a socket
// (proto/kiln/v1/compile_worker.proto).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/compile_job.h"

namespace kiln::server {

// argv[1] of a compile worker; kilnd's main hands such a process to RunCompileWorker first thing.
inline constexpr char kCompileWorkerFlag[] = "--compile-worker";

struct SandboxOptions {
  // The kilnd binary to run as the worker; "": this process's own (/proc/self/exe).
  std::string worker_path;
  // The worker's address space limit (RLIMIT_AS) in bytes; 0: none. Running out is
  // RESOURCE_EXHAUSTED naming it.
  int64_t memory_bytes = 0;
  // kiln.db, for the worker to build tuned kernels from when CompileOptions::tuning_db is set
  // (the daemon's handle cannot cross the process boundary); "": default schedules.
  std::string tuning_db_path;
  // How often the daemon polls CompileOptions::interrupted while the worker runs; when it is
  // not OK the worker is killed at once, even in the middle of a pass, and that is the status.
  absl::Duration poll_interval = absl::Milliseconds(50);
};

// driver::CompileModel, run in a fresh worker process per call. Thread-safe; every worker is
// reaped before the call returns.
CompilerFn SandboxedCompiler(SandboxOptions options);

// The worker's main: `args` are what follows kCompileWorkerFlag ("--memory-bytes=N"). Reads
// one request on stdin, writes events and the outcome on stdout. Returns the exit code.
int RunCompileWorker(const std::vector<std::string>& args);

}  // namespace kiln::server
