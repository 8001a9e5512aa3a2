// The real kilnd as a child process, for the crash tests: started on a free loopback port
// (--listen 127.0.0.1:0, the port read back from its log), killed with any signal, and a
// raw grpc.health.v1 check and an integrity check of its kiln.db from outside.
#pragma once

#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern "C" char** environ;

namespace kiln::crash {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

class KilndProcess {
 public:
  // Every start appends to `log` (kilnd's stdout and stderr). With `tmp_dir`, kilnd runs with
  // TMPDIR pointing there, so the temporary files it leaves behind can be counted.
  KilndProcess(std::string binary, fs::path data_dir, fs::path log, fs::path tmp_dir = {})
      : binary_(std::move(binary)),
        data_dir_(std::move(data_dir)),
        log_(std::move(log)),
        tmp_dir_(std::move(tmp_dir)) {}
  ~KilndProcess() {
    if (pid_ > 0) Signal(SIGKILL), Wait(std::chrono::seconds(10));
  }

  // Starts kilnd and waits for its "serving on port N" line; "" on success, else why not.
  std::string Start(const std::vector<std::string>& extra_flags = {}) {
    const uintmax_t log_start = fs::exists(log_) ? fs::file_size(log_) : 0;
    if (std::string error = Spawn(extra_flags); !error.empty()) return error;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    const std::string marker = "kilnd serving on port ";
    while (Clock::now() < deadline) {
      std::string log = ReadFile(log_);
      log = log.size() > log_start ? log.substr(log_start) : "";
      if (size_t at = log.find(marker); at != std::string::npos) {
        port_ = std::atoi(log.c_str() + at + marker.size());
        if (port_ > 0) return "";
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "kilnd exited at start (status " + std::to_string(status) + "): " + log;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return "kilnd did not report its port within 30 s";
  }

  // Starts kilnd without waiting for it to serve (to kill it while it opens kiln.db).
  std::string Spawn(const std::vector<std::string>& extra_flags = {}) {
    std::vector<std::string> args = {binary_, "--listen", "127.0.0.1:0", "--data-dir",
                                     data_dir_.string()};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (tmp_dir_.empty() || std::string_view(*e).rfind("TMPDIR=", 0) != 0) {
        env_strings.push_back(*e);
      }
    }
    if (!tmp_dir_.empty()) env_strings.push_back("TMPDIR=" + tmp_dir_.string());
    std::vector<char*> envp;
    for (std::string& entry : env_strings) envp.push_back(entry.data());
    envp.push_back(nullptr);
    const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return "cannot open " + log_.string();
    pid_ = fork();
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      dup2(fd, 1);
      dup2(fd, 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(fd);
    if (pid_ < 0) return "fork failed";
    port_ = 0;
    return "";
  }

  void Signal(int signal) const {
    if (pid_ > 0) kill(pid_, signal);
  }
  // The wait status once it exited, nullopt when still running after `timeout`.
  std::optional<int> Wait(Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return 0;
  }

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::shared_ptr<grpc::Channel> NewChannel() const {
    return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
  }

 private:
  std::string binary_;
  fs::path data_dir_;
  fs::path log_;
  fs::path tmp_dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Processes this one adopted: with PR_SET_CHILD_SUBREAPER set, what a killed kilnd left
// running (compile workers) is reparented here. Reaps the ones that exited and returns the
// pids of those still alive once `timeout` has passed (or at once, when none are).
inline std::vector<pid_t> AdoptedSurvivors(Clock::duration timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::vector<pid_t> alive;
    for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = ReadFile(entry.path() / "stat");
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(stat.c_str() + paren + 1, " %c %d", &state, &ppid) != 2) continue;
      if (ppid == getpid() && state != 'Z') alive.push_back(std::stoi(name));
    }
    if (alive.empty() || Clock::now() >= deadline) return alive;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// grpc.health.v1.Health/Check without generated code (Debian ships none): 1 SERVING,
// 2 NOT_SERVING, -code for a failed call, -100 for an answer that does not parse.
inline int HealthStatus(grpc::Channel& channel, std::chrono::milliseconds timeout) {
  grpc::Slice empty("");  // HealthCheckRequest{service: ""} encodes to no bytes
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      &channel,
      grpc::internal::RpcMethod("/grpc.health.v1.Health/Check",
                                grpc::internal::RpcMethod::NORMAL_RPC),
      &context, request, &response);
  if (!status.ok()) return -static_cast<int>(status.error_code());
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -100;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes.empty()) return 0;  // UNKNOWN, the default value, is not on the wire
  return bytes.size() == 2 && bytes[0] == '\x08' ? bytes[1] : -100;
}

// PRAGMA integrity_check of the database at `db`: "ok" or the problems it lists.
// Opened read-write on purpose: after a crash, a reader must replay the write-ahead log.
inline std::string IntegrityCheck(const fs::path& db) {
  sqlite3* handle = nullptr;
  if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string why = handle ? sqlite3_errmsg(handle) : "out of memory";
    sqlite3_close(handle);
    return "cannot open " + db.string() + ": " + why;
  }
  sqlite3_busy_timeout(handle, 5000);
  sqlite3_stmt* stmt = nullptr;
  std::string result;
  if (sqlite3_prepare_v2(handle, "PRAGMA integrity_check", -1, &stmt, nullptr) != SQLITE_OK) {
    result = std::string("cannot prepare integrity_check: ") + sqlite3_errmsg(handle);
  } else {
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!result.empty()) result += "; ";
      result += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    if (rc != SQLITE_DONE) result += std::string(" (step: ") + sqlite3_errmsg(handle) + ")";
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return result;
}

// The integrity of what a crash left in `data_dir`, checked on a copy of kiln.db and its
// write-ahead log, so the daemon's next start replays the log itself, untouched by the test.
inline std::string IntegrityCheckCopy(const fs::path& data_dir, const fs::path& scratch) {
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  for (const char* name : {"kiln.db", "kiln.db-wal"}) {
    if (fs::exists(data_dir / name)) fs::copy_file(data_dir / name, scratch / name);
  }
  std::string result = IntegrityCheck(scratch / "kiln.db");
  fs::remove_all(scratch);
  return result;
}

}  // namespace kiln::crash
