#include "tests/support/remote_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "compiler/arith/check.h"
#include "runtime/tools/runner_protocol.h"

extern char** environ;

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// A call that takes longer than this under emulation is taken as hung.
constexpr int kCallTimeoutMs = 600 * 1000;

bool HasFeature(const ir::Target& target, absl::string_view name) {
  for (absl::string_view f : absl::StrSplit(target.features, ',')) {
    if (f == absl::StrCat("+", name)) return true;
  }
  return false;
}

// `name` found on PATH.
absl::StatusOr<std::string> FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::FailedPreconditionError(
      absl::StrCat(name, " is not installed (scripts/install-deps.sh installs it)"));
}

std::string RunnerDir() {
  const char* dir = std::getenv("KILN_RUNNER_DIR");
  return dir && *dir ? dir : KILN_RUNNER_DIR;
}

// qemu-user with the cross sysroot Debian's libc6-*-cross packages install.
absl::StatusOr<std::vector<std::string>> QemuCommand(const std::string& arch,
                                                     const std::string& cpu) {
  KILN_ASSIGN_OR_RETURN(std::string qemu, FindProgram("qemu-" + arch));
  std::string runner = absl::StrCat(RunnerDir(), "/", arch, "/kiln-runner");
  if (access(runner.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no kiln-runner for ", arch, " at ", runner, " (built with the project)"));
  }
  return std::vector<std::string>{qemu, "-cpu", cpu, "-L", "/usr/" + arch + "-linux-gnu", runner};
}

absl::Status WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("write to runner: ", strerror(errno)));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status WriteValue(int fd, T value) {
  return WriteAll(fd, &value, sizeof(T));
}

// Reads exactly `size` bytes, waiting at most kCallTimeoutMs for each chunk.
absl::Status ReadAll(int fd, void* out, size_t size) {
  char* p = static_cast<char*>(out);
  while (size > 0) {
    pollfd poll_fd{fd, POLLIN, 0};
    int ready = poll(&poll_fd, 1, kCallTimeoutMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return absl::DeadlineExceededError("the runner answered nothing in time");
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError("the runner closed its output");
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<T> ReadValue(int fd) {
  T value;
  KILN_RETURN_IF_ERROR(ReadAll(fd, &value, sizeof(T)));
  return value;
}

absl::Status WriteTensor(int fd, const ir::NDArray& a) {
  KILN_RETURN_IF_ERROR(WriteValue<uint8_t>(fd, a.dtype.code));
  KILN_RETURN_IF_ERROR(WriteValue<uint8_t>(fd, a.dtype.bits));
  KILN_RETURN_IF_ERROR(WriteValue<uint16_t>(fd, 0));
  KILN_RETURN_IF_ERROR(WriteValue<uint32_t>(fd, static_cast<uint32_t>(a.shape.size())));
  KILN_RETURN_IF_ERROR(WriteAll(fd, a.shape.data(), a.shape.size() * sizeof(int64_t)));
  KILN_RETURN_IF_ERROR(WriteValue<uint64_t>(fd, a.bytes.size()));
  return WriteAll(fd, a.bytes.data(), a.bytes.size());
}

absl::StatusOr<ir::NDArray> ReadTensor(int fd) {
  ir::NDArray a;
  KILN_ASSIGN_OR_RETURN(uint8_t code, ReadValue<uint8_t>(fd));
  KILN_ASSIGN_OR_RETURN(uint8_t bits, ReadValue<uint8_t>(fd));
  KILN_RETURN_IF_ERROR(ReadValue<uint16_t>(fd).status());
  KILN_ASSIGN_OR_RETURN(uint32_t ndim, ReadValue<uint32_t>(fd));
  a.dtype = {static_cast<arith::DataType::Code>(code), bits};
  a.shape.resize(ndim);
  KILN_RETURN_IF_ERROR(ReadAll(fd, a.shape.data(), ndim * sizeof(int64_t)));
  KILN_ASSIGN_OR_RETURN(uint64_t num_bytes, ReadValue<uint64_t>(fd));
  a.bytes.resize(num_bytes);
  KILN_RETURN_IF_ERROR(ReadAll(fd, a.bytes.data(), num_bytes));
  return a;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RunnerCommand(const ir::Target& target) {
  const std::string arch = target.Arch();
  if (arch == "aarch64") {
    // A NEON-only core unless SVE is asked for, so an instruction the target does not allow
    // traps instead of passing unnoticed.
    return QemuCommand(arch, HasFeature(target, "sve") ? "max" : "cortex-a72");
  }
  if (arch == "riscv64") {
    return QemuCommand(arch,
                       HasFeature(target, "v") ? "rv64,v=true,vlen=128,vext_spec=v1.0" : "rv64");
  }
  if (arch == "wasm32") {
    KILN_ASSIGN_OR_RETURN(std::string node, FindProgram("node"));
    return std::vector<std::string>{node, KILN_SOURCE_DIR "/runtime/js/kiln-runner.mjs"};
  }
  return std::vector<std::string>{RunnerDir() + "/kiln-runner"};
}

absl::StatusOr<std::unique_ptr<RemoteModel>> RemoteModel::Start(const ir::Target& target,
                                                                std::string_view artifact,
                                                                int threads) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> argv, RunnerCommand(target));
  std::unique_ptr<RemoteModel> model(new RemoteModel());
  std::string dir = (fs::temp_directory_path() / "kiln-remote-XXXXXX").string();
  if (!mkdtemp(dir.data())) return absl::InternalError("cannot create " + dir);
  model->dir_ = dir;
  const std::string path = dir + "/" + target.artifact_file;
  std::ofstream(path, std::ios::binary).write(artifact.data(), artifact.size());
  argv.push_back(path);
  if (threads != 1) {
    argv.push_back("--threads");
    argv.push_back(std::to_string(threads));
  }

  // A runner that exits early must not kill the test with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe: " + std::string(strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  const std::string log = dir + "/stderr.txt";
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int error = posix_spawn(&model->pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  model->to_runner_ = in[1];
  model->from_runner_ = out[0];
  if (error != 0) {
    model->pid_ = -1;
    return absl::InternalError(absl::StrCat("cannot run ", argv[0], ": ", strerror(error)));
  }
  return model;
}

RemoteModel::~RemoteModel() {
  if (to_runner_ >= 0) close(to_runner_);  // end of requests: the runner exits
  if (from_runner_ >= 0) close(from_runner_);
  if (pid_ > 0) {
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  std::error_code ignored;
  if (!dir_.empty()) fs::remove_all(dir_, ignored);
}

absl::Status RemoteModel::RunnerDied(const std::string& what) {
  close(to_runner_);
  to_runner_ = -1;
  std::string how = "is still running";
  int status;
  if (pid_ > 0) {
    if (what.find("in time") != std::string::npos) kill(pid_, SIGKILL);
    if (waitpid(pid_, &status, 0) == pid_) {
      how = WIFEXITED(status) ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                              : absl::StrCat("was killed by signal ", WTERMSIG(status));
    }
    pid_ = -1;
  }
  return absl::InternalError(
      absl::StrCat(what, "; the runner ", how, ". Its stderr: ", ReadText(dir_ + "/stderr.txt")));
}

absl::StatusOr<std::vector<ir::NDArray>> RemoteModel::Run(const std::vector<ir::NDArray>& inputs) {
  if (to_runner_ < 0) return absl::FailedPreconditionError("the runner has stopped");
  absl::Status sent = WriteValue<uint32_t>(to_runner_, static_cast<uint32_t>(inputs.size()));
  for (size_t i = 0; sent.ok() && i < inputs.size(); ++i) sent = WriteTensor(to_runner_, inputs[i]);
  absl::StatusOr<int32_t> status = ReadValue<int32_t>(from_runner_);
  if (!status.ok()) return RunnerDied(std::string(status.status().message()));
  if (*status != runner::kStatusOk) {
    absl::StatusOr<uint32_t> length = ReadValue<uint32_t>(from_runner_);
    if (!length.ok()) return RunnerDied(std::string(length.status().message()));
    std::string message(*length, '\0');
    absl::Status read = ReadAll(from_runner_, message.data(), message.size());
    if (!read.ok()) return RunnerDied(std::string(read.message()));
    return absl::InvalidArgumentError(message);
  }
  absl::StatusOr<uint32_t> count = ReadValue<uint32_t>(from_runner_);
  if (!count.ok()) return RunnerDied(std::string(count.status().message()));
  std::vector<ir::NDArray> outputs;
  for (uint32_t i = 0; i < *count; ++i) {
    absl::StatusOr<ir::NDArray> t = ReadTensor(from_runner_);
    if (!t.ok()) return RunnerDied(std::string(t.status().message()));
    outputs.push_back(*std::move(t));
  }
  return outputs;
}

}  // namespace kiln::testing
