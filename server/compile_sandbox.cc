#include "server/compile_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/tuning_db.h"
#include "kiln/v1/compile_worker.pb.h"

extern char** environ;

// AddressSanitizer reserves terabytes of address space for its shadow memory, so an address
// space limit would stop the worker before it starts; sanitizer builds run without one.
#if defined(__SANITIZE_ADDRESS__)
#define KILN_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ADDRESS_SANITIZER 1
#endif
#endif

namespace kiln::server {
namespace {

#ifdef KILN_ADDRESS_SANITIZER
constexpr bool kMemoryLimitIgnored = true;
#else
constexpr bool kMemoryLimitIgnored = false;
#endif

// The worker's exit codes besides 0; the parent turns them into statuses.
constexpr int kExitBadRequest = 2;
constexpr int kExitOutOfMemory = 3;

// Frames are an 8-byte little-endian length, then the bytes.
constexpr size_t kHeaderBytes = 8;
constexpr uint64_t kMaxFrameBytes = uint64_t{4} << 30;

std::string FrameHeader(uint64_t size) {
  std::string header(kHeaderBytes, '\0');
  for (size_t i = 0; i < kHeaderBytes; ++i) header[i] = static_cast<char>(size >> (8 * i));
  return header;
}

uint64_t ReadHeader(const char* bytes) {
  uint64_t size = 0;
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    size |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  return size;
}

std::string ErrnoText(int error) { return std::strerror(error); }

// --- The worker (child) side ----------------------------------------------------------------

bool ReadFully(int fd, char* out, size_t size) {
  while (size > 0) {
    const ssize_t n = read(fd, out, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteFully(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::optional<std::string> ReadFrame(int fd) {
  char header[kHeaderBytes];
  if (!ReadFully(fd, header, kHeaderBytes)) return std::nullopt;
  const uint64_t size = ReadHeader(header);
  if (size > kMaxFrameBytes) return std::nullopt;
  std::string bytes(size, '\0');
  if (!ReadFully(fd, bytes.data(), size)) return std::nullopt;
  return bytes;
}

// Replies go to stdout; events may come from the compiler's threads.
class ReplyWriter {
 public:
  void Write(const v1::WorkerReply& reply) {
    const std::string bytes = reply.SerializeAsString();
    std::lock_guard<std::mutex> lock(mutex_);
    WriteFully(STDOUT_FILENO, FrameHeader(bytes.size()));
    WriteFully(STDOUT_FILENO, bytes);
  }

 private:
  std::mutex mutex_;
};

v1::WorkerEvent ToProto(const driver::CompileEvent& event) {
  v1::WorkerEvent out;
  out.set_kind(static_cast<int>(event.kind));
  out.set_name(event.name);
  out.set_message(event.message);
  out.set_tuning_kernel(event.tuning.kernel);
  out.set_tuning_kernel_index(event.tuning.kernel_index);
  out.set_tuning_kernels(event.tuning.kernels);
  out.set_tuning_trials_done(event.tuning.trials_done);
  out.set_tuning_trials_budget(event.tuning.trials_budget);
  out.set_tuning_best_gflops(event.tuning.best_gflops);
  out.set_tuning_seconds_left(event.tuning.seconds_left);
  return out;
}

driver::CompileEvent FromProto(const v1::WorkerEvent& event) {
  driver::CompileEvent out;
  out.kind = static_cast<driver::CompileEvent::Kind>(event.kind());
  out.name = event.name();
  out.message = event.message();
  out.tuning.kernel = event.tuning_kernel();
  out.tuning.kernel_index = event.tuning_kernel_index();
  out.tuning.kernels = event.tuning_kernels();
  out.tuning.trials_done = event.tuning_trials_done();
  out.tuning.trials_budget = event.tuning_trials_budget();
  out.tuning.best_gflops = event.tuning_best_gflops();
  out.tuning.seconds_left = event.tuning_seconds_left();
  return out;
}

v1::WorkerTarget ToProto(const ir::Target& target) {
  v1::WorkerTarget out;
  out.set_preset(target.preset);
  out.set_triple(target.triple);
  out.set_cpu(target.cpu);
  out.set_features(target.features);
  out.set_vector_bits(target.vector_bits);
  out.set_artifact_file(target.artifact_file);
  out.set_threads(target.threads);
  out.set_threads_per_block(target.threads_per_block);
  out.set_shared_memory(target.shared_memory);
  out.mutable_libraries()->Add(target.libraries.begin(), target.libraries.end());
  return out;
}

ir::Target FromProto(const v1::WorkerTarget& target) {
  ir::Target out;
  out.preset = target.preset();
  out.triple = target.triple();
  out.cpu = target.cpu();
  out.features = target.features();
  out.vector_bits = target.vector_bits();
  out.artifact_file = target.artifact_file();
  out.threads = target.threads();
  out.threads_per_block = target.threads_per_block();
  out.shared_memory = target.shared_memory();
  out.libraries.assign(target.libraries().begin(), target.libraries().end());
  return out;
}

absl::StatusOr<driver::Artifact> CompileRequest(const v1::WorkerRequest& request,
                                                std::string_view onnx, ReplyWriter& replies) {
  const ir::Target target = FromProto(request.target());
  driver::CompileOptions options;
  options.dim_bounds.insert(request.dim_bounds().begin(), request.dim_bounds().end());
  if (request.has_schedule_as()) options.schedule_as = FromProto(request.schedule_as());
  std::unique_ptr<cache::TuningDb> tuning_db;
  if (!request.tuning_db_path().empty()) {
    absl::StatusOr<std::unique_ptr<cache::TuningDb>> opened =
        cache::TuningDb::Open(request.tuning_db_path());
    if (!opened.ok()) return opened.status();
    tuning_db = *std::move(opened);
    options.tuning_db = tuning_db.get();
  }
  auto sink = [&replies](const driver::CompileEvent& event) {
    v1::WorkerReply reply;
    *reply.mutable_event() = ToProto(event);
    replies.Write(reply);
  };
  return driver::CompileModel(onnx, target, options, sink);
}

// --- The daemon (parent) side ---------------------------------------------------------------

// A started worker: killed (if still running) and reaped when it goes out of scope.
class Worker {
 public:
  static absl::StatusOr<Worker> Spawn(const SandboxOptions& options);
  Worker(Worker&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), socket_(std::exchange(other.socket_, -1)) {}
  ~Worker() {
    if (socket_ >= 0) close(socket_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

  int socket() const { return socket_; }
  // True when the worker has ended (and is reaped: `*status` and `*peak_bytes` are set).
  bool TryReap(int* status, int64_t* peak_bytes) {
    rusage usage{};
    const pid_t done = wait4(pid_, status, WNOHANG, &usage);
    if (done < 0 && errno == ECHILD) {
      *status = 0;  // reaped by someone else (SIGCHLD ignored): how it ended is unknown
    } else if (done != pid_) {
      return false;
    }
    pid_ = -1;
    *peak_bytes = int64_t{usage.ru_maxrss} * 1024;
    return true;
  }

 private:
  Worker(pid_t pid, int socket) : pid_(pid), socket_(socket) {}
  pid_t pid_;
  int socket_;
};

std::string WorkerPath(const SandboxOptions& options) {
  if (!options.worker_path.empty()) return options.worker_path;
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, n) : "/proc/self/exe";
}

absl::StatusOr<Worker> Worker::Spawn(const SandboxOptions& options) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::InternalError(absl::StrCat("compile worker: socketpair: ", ErrnoText(errno)));
  }
  // The child's end becomes its stdin and stdout (dup2 clears close-on-exec there); every
  // other descriptor of ours is close-on-exec.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], STDOUT_FILENO);
  // kilnd blocks its stop signals in every thread; the worker starts with none blocked and
  // default dispositions, in its own process group so a terminal's ^C reaches only the
  // daemon, which then cancels its jobs and so kills its workers.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int signal : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, signal);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  const std::string path = WorkerPath(options);
  std::vector<std::string> args = {path, kCompileWorkerFlag,
                                   absl::StrCat("--memory-bytes=", options.memory_bytes),
                                   absl::StrCat("--parent=", getpid())};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, path.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(sockets[1]);
  if (error != 0) {
    close(sockets[0]);
    return absl::InternalError(
        absl::StrCat("cannot start the compile worker ", path, ": ", ErrnoText(error)));
  }
  fcntl(sockets[0], F_SETFL, fcntl(sockets[0], F_GETFL) | O_NONBLOCK);
  return Worker(pid, sockets[0]);
}

// What the worker said before it ended.
struct Replies {
  std::optional<driver::Artifact> artifact;
  std::optional<absl::Status> status;
};

// Reads whole frames out of `buffer` from `*offset` on; false on a malformed one.
bool TakeReplies(std::string& buffer, size_t* offset, const driver::EventSink& events,
                 Replies& replies) {
  while (buffer.size() - *offset >= kHeaderBytes) {
    const uint64_t size = ReadHeader(buffer.data() + *offset);
    if (size > kMaxFrameBytes) return false;
    if (buffer.size() - *offset - kHeaderBytes < size) break;
    v1::WorkerReply reply;
    if (!reply.ParseFromArray(buffer.data() + *offset + kHeaderBytes, static_cast<int>(size))) {
      return false;
    }
    *offset += kHeaderBytes + size;
    switch (reply.reply_case()) {
      case v1::WorkerReply::kEvent:
        if (events) events(FromProto(reply.event()));
        break;
      case v1::WorkerReply::kArtifact: {
        v1::WorkerArtifact* artifact = reply.mutable_artifact();
        replies.artifact = driver::Artifact{
            std::move(*artifact->mutable_target()), std::move(*artifact->mutable_file_name()),
            std::move(*artifact->mutable_bytes()), std::move(*artifact->mutable_manifest_json())};
        break;
      }
      case v1::WorkerReply::kStatus: {
        const int code = reply.status().code();
        // Never OK: a StatusOr cannot hold an OK status.
        replies.status = absl::Status(code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code)
                                                             : absl::StatusCode::kInternal,
                                      reply.status().message());
        break;
      }
      default:
        return false;
    }
  }
  // Keep the buffer from growing with what was already read.
  if (*offset > (size_t{1} << 20) && *offset * 2 > buffer.size()) {
    buffer.erase(0, *offset);
    *offset = 0;
  }
  return true;
}

std::string Describe(const ir::Target& target, std::string_view onnx) {
  return absl::StrCat("the compile worker for target ",
                      target.preset.empty() ? target.Canonical() : target.preset, " (model of ",
                      onnx.size(), " bytes)");
}

// The status of a worker that ended without saying why, from how it ended.
absl::Status EndedWithoutReply(const SandboxOptions& options, const std::string& who,
                               int wait_status, int64_t peak_bytes) {
  const std::string limit =
      absl::StrCat("the job memory limit of ", options.memory_bytes, " bytes (--job-memory-bytes)");
  if (WIFEXITED(wait_status)) {
    const int code = WEXITSTATUS(wait_status);
    if (code == kExitOutOfMemory) {
      return absl::ResourceExhaustedError(
          absl::StrCat(who, " ran out of memory: compiling this model needs more than ", limit));
    }
    return absl::InternalError(absl::StrCat(who, " exited with code ", code, " without a result"));
  }
  const int signal = WTERMSIG(wait_status);
  const std::string how =
      absl::StrCat(who, " was killed by signal ", signal, " (", strsignal(signal),
                   ") at a peak of ", peak_bytes, " resident bytes");
  // A SIGKILL we did not send comes from the kernel's out-of-memory killer; an abort or a
  // fault near the cap is an allocation that failed in code that cannot report it (LLVM aborts).
  const bool near_limit = options.memory_bytes > 0 && peak_bytes * 2 >= options.memory_bytes;
  if (signal == SIGKILL ||
      (near_limit && (signal == SIGABRT || signal == SIGSEGV || signal == SIGBUS))) {
    return absl::ResourceExhaustedError(
        absl::StrCat(how, "; it most likely ran out of memory",
                     options.memory_bytes > 0 ? absl::StrCat(" under ", limit) : ""));
  }
  return absl::InternalError(absl::StrCat(how, ": a compiler crash"));
}

absl::StatusOr<driver::Artifact> CompileInWorker(const SandboxOptions& sandbox,
                                                 std::string_view onnx, const ir::Target& target,
                                                 const driver::CompileOptions& options,
                                                 const driver::EventSink& events) {
  const std::string who = Describe(target, onnx);
  v1::WorkerRequest request;
  *request.mutable_target() = ToProto(target);
  if (options.schedule_as) *request.mutable_schedule_as() = ToProto(*options.schedule_as);
  request.mutable_dim_bounds()->insert(options.dim_bounds.begin(), options.dim_bounds.end());
  if (options.tuning_db != nullptr) request.set_tuning_db_path(sandbox.tuning_db_path);
  const std::string header = request.SerializeAsString();
  // The request, then the model as a frame of its own (no copy of it here).
  const std::string prefix = FrameHeader(header.size()) + header + FrameHeader(onnx.size());
  std::string_view pending[] = {prefix, onnx};
  int next_pending = 0;

  absl::StatusOr<Worker> worker = Worker::Spawn(sandbox);
  if (!worker.ok()) return worker.status();
  const int poll_ms = std::max<int>(1, absl::ToInt64Milliseconds(sandbox.poll_interval));
  std::string buffer;
  size_t offset = 0;
  Replies replies;
  bool open = true;
  while (open) {
    pollfd fd{worker->socket(), POLLIN, 0};
    if (next_pending < 2) fd.events |= POLLOUT;
    if (poll(&fd, 1, poll_ms) < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat(who, ": poll: ", ErrnoText(errno)));
    }
    if (options.interrupted) {
      if (absl::Status why = options.interrupted(); !why.ok()) return why;  // ~Worker kills
    }
    if ((fd.revents & POLLOUT) && next_pending < 2) {
      std::string_view& bytes = pending[next_pending];
      const ssize_t n = send(worker->socket(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n >= 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        while (next_pending < 2 && pending[next_pending].empty()) ++next_pending;
      } else if (errno != EAGAIN && errno != EINTR) {
        next_pending = 2;  // the worker is gone; how it ended says why
      }
    }
    if (fd.revents & (POLLIN | POLLHUP | POLLERR)) {
      char chunk[1 << 16];
      const ssize_t n = recv(worker->socket(), chunk, sizeof(chunk), 0);
      if (n > 0) {
        buffer.append(chunk, static_cast<size_t>(n));
        if (!TakeReplies(buffer, &offset, events, replies)) {
          return absl::InternalError(absl::StrCat(who, " sent a malformed reply"));
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        open = false;
      }
    }
  }
  // The worker exits right after its last reply; still, never wait on it unboundedly.
  int wait_status = 0;
  int64_t peak_bytes = 0;
  while (!worker->TryReap(&wait_status, &peak_bytes)) {
    if (options.interrupted) {
      if (absl::Status why = options.interrupted(); !why.ok()) return why;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (replies.artifact && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
    return *std::move(replies.artifact);
  }
  if (replies.status) return *replies.status;
  return EndedWithoutReply(sandbox, who, wait_status, peak_bytes);
}

}  // namespace

CompilerFn SandboxedCompiler(SandboxOptions options) {
  return [options = std::move(options)](std::string_view onnx, const ir::Target& target,
                                        const driver::CompileOptions& compile_options,
                                        const driver::EventSink& events) {
    return CompileInWorker(options, onnx, target, compile_options, events);
  };
}

int RunCompileWorker(const std::vector<std::string>& args) {
  int64_t memory_bytes = 0;
  int64_t parent = 0;
  for (const std::string& arg : args) {
    const bool parsed = arg.rfind("--memory-bytes=", 0) == 0
                            ? absl::SimpleAtoi(arg.substr(15), &memory_bytes)
                        : arg.rfind("--parent=", 0) == 0 ? absl::SimpleAtoi(arg.substr(9), &parent)
                                                         : false;
    if (!parsed) return kExitBadRequest;
  }
  // Dies with the daemon thread that started it, so a killed daemon leaves no compiles behind.
  // A daemon that died before the line below took effect is noticed by the parent check.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent != 0 && getppid() != parent) return kExitBadRequest;
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (memory_bytes > 0 && !kMemoryLimitIgnored) {
    const rlimit address_space{static_cast<rlim_t>(memory_bytes),
                               static_cast<rlim_t>(memory_bytes)};
    setrlimit(RLIMIT_AS, &address_space);
  }
  // An allocation past the limit ends the worker with a code the daemon reads as
  // RESOURCE_EXHAUSTED, from whichever thread it happens on.
  std::set_new_handler([] { _exit(kExitOutOfMemory); });

  std::optional<std::string> header = ReadFrame(STDIN_FILENO);
  v1::WorkerRequest request;
  if (!header || !request.ParseFromString(*header)) return kExitBadRequest;
  std::optional<std::string> onnx = ReadFrame(STDIN_FILENO);
  if (!onnx) return kExitBadRequest;

  ReplyWriter replies;
  absl::StatusOr<driver::Artifact> artifact;
  try {
    artifact = CompileRequest(request, *onnx, replies);
  } catch (const std::bad_alloc&) {
    _exit(kExitOutOfMemory);
  } catch (const std::exception& error) {
    artifact = absl::InternalError(absl::StrCat("compiler exception: ", error.what()));
  }
  v1::WorkerReply reply;
  if (artifact.ok()) {
    v1::WorkerArtifact* out = reply.mutable_artifact();
    out->set_target(std::move(artifact->target));
    out->set_file_name(std::move(artifact->file_name));
    out->set_bytes(std::move(artifact->bytes));
    out->set_manifest_json(std::move(artifact->manifest_json));
  } else {
    reply.mutable_status()->set_code(static_cast<int>(artifact.status().code()));
    reply.mutable_status()->set_message(std::string(artifact.status().message()));
  }
  replies.Write(reply);
  // Nothing left to tidy: skip the static destructors of LLVM and friends.
  _exit(0);
}

}  // namespace kiln::server
