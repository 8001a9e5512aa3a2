// For tests of the fleet tier: a private PostgreSQL 15 server, started once per test suite
// (initdb and startup take seconds) in a fresh folder under /tmp, listening only on a Unix
// socket there, with fsync off; each test gets a database of its own, named after it.
// initdb and postgres refuse to run as root, and CI runs the tests as root: then they run
// as the `postgres` user of the Debian package (runuser), which owns the folder. Without
// the PostgreSQL binaries the tests are skipped, saying so.
#pragma once

#include <fcntl.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::testing {

class PostgresServer {
 public:
  static constexpr char kBinDir[] = "/usr/lib/postgresql/15/bin";

  // Starts a server; nullptr with the reason in `why` when it cannot.
  static std::unique_ptr<PostgresServer> Start(std::string* why) {
    for (const char* tool : {"initdb", "pg_ctl", "postgres"}) {
      if (access((std::string(kBinDir) + "/" + tool).c_str(), X_OK) != 0) {
        *why = std::string("PostgreSQL 15 is not installed (no ") + kBinDir + "/" + tool +
               "; scripts/install-deps.sh installs postgresql-15)";
        return nullptr;
      }
    }
    // /tmp, not TMPDIR: the socket's path must stay short (108 bytes), and the postgres
    // user must be able to reach the folder.
    std::string dir = "/tmp/kiln_pg_XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      *why = "cannot create a folder under /tmp for PostgreSQL";
      return nullptr;
    }
    std::unique_ptr<PostgresServer> server(new PostgresServer(dir));
    if (geteuid() == 0) {
      const passwd* user = getpwnam("postgres");
      if (user == nullptr || chown(dir.c_str(), user->pw_uid, user->pw_gid) != 0) {
        *why = "running as root, and there is no postgres user to run PostgreSQL as";
        return nullptr;
      }
      server->as_user_ = "runuser -u postgres -- ";
    }
    // Trust over the private socket; the superuser is "postgres" whoever runs it.
    if (!server->Run("initdb",
                     "-D " + server->data() + " -U postgres -A trust -E UTF8 --locale=C --no-sync",
                     why)) {
      return nullptr;
    }
    std::ofstream(server->data() + "/postgresql.conf", std::ios::app)
        << "listen_addresses = ''\n"
        << "unix_socket_directories = '" << dir << "'\n"
        << "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
        << "shared_buffers = 16MB\nmax_connections = 40\n";
    if (!server->Run("pg_ctl", "start -w -t 60 -D " + server->data() + " -l " + dir + "/server.log",
                     why)) {
      return nullptr;
    }
    server->StartWatchdog();
    return server;
  }

  // Stops the server and removes its folder, through the watchdog when there is one.
  ~PostgresServer() {
    if (watchdog_pid_ <= 0) {
      std::system(StopCommand().c_str());
      return;
    }
    close(watchdog_fd_);
    waitpid(watchdog_pid_, nullptr, 0);
  }

  // The libpq connection string of database `dbname`.
  std::string Conninfo(const std::string& dbname) const {
    return "host=" + dir_ + " user=postgres dbname=" + dbname;
  }

  // Creates database `name` afresh (dropping one left over); false with the reason in `why`.
  bool CreateDatabase(const std::string& name, std::string* why) const {
    PGconn* conn = PQconnectdb(Conninfo("postgres").c_str());
    PQsetNoticeProcessor(conn, IgnoreNotice, nullptr);
    bool ok = PQstatus(conn) == CONNECTION_OK;
    for (const char* verb : {"DROP DATABASE IF EXISTS ", "CREATE DATABASE "}) {
      if (!ok) break;
      PGresult* result = PQexec(conn, (verb + name).c_str());
      ok = PQresultStatus(result) == PGRES_COMMAND_OK;
      PQclear(result);
    }
    if (!ok) *why = std::string("creating database ") + name + ": " + PQerrorMessage(conn);
    PQfinish(conn);
    return ok;
  }

  // A libpq notice processor that drops notices ("database ... does not exist, skipping").
  static void IgnoreNotice(void*, const char*) {}

 private:
  explicit PostgresServer(std::string dir) : dir_(std::move(dir)) {}
  std::string data() const { return dir_ + "/data"; }

  std::string StopCommand() const {
    return "cd / && " + as_user_ + kBinDir + "/pg_ctl stop -m immediate -w -D " + data() +
           " >/dev/null 2>&1; rm -rf " + dir_;
  }

  // A child process that stops the server and removes the folder once the pipe to it
  // closes: at destruction, or when this process dies without running destructors (a
  // crash, ctest's timeout), so no server outlives its test. The pipe is close-on-exec,
  // so the server itself never holds it open.
  void StartWatchdog() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    std::string stop = StopCommand();
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      char byte;
      while (read(fds[0], &byte, 1) > 0) {
      }
      execl("/bin/sh", "sh", "-c", stop.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[0]);
    if (pid < 0) {
      close(fds[1]);
      return;
    }
    watchdog_fd_ = fds[1];
    watchdog_pid_ = pid;
  }

  // Runs a PostgreSQL tool from the server's folder (the postgres user may not be allowed
  // into ours), its output kept in <tool>.log and quoted in `why` on failure.
  bool Run(const std::string& tool, const std::string& args, std::string* why) const {
    std::string log = dir_ + "/" + tool + ".log";
    std::string command = "cd " + dir_ + " && " + as_user_ + kBinDir + "/" + tool + " " + args +
                          " >>" + log + " 2>&1";
    if (std::system(command.c_str()) == 0) return true;
    std::stringstream output;
    output << std::ifstream(log).rdbuf() << std::ifstream(dir_ + "/server.log").rdbuf();
    *why = "`" + command + "` failed:\n" + output.str();
    return false;
  }

  std::string dir_;
  std::string as_user_;  // "runuser -u postgres -- " when we are root
  int watchdog_fd_ = -1;
  pid_t watchdog_pid_ = -1;
};

// Test fixture: conninfo_ names a database of this test's own on the suite's server.
class PostgresTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = PostgresServer::Start(&skip_reason_); }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    if (server_ == nullptr) GTEST_SKIP() << skip_reason_;
    std::string name = "kiln_";
    for (char c : std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
      name +=
          std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
    }
    std::string why;
    ASSERT_TRUE(server_->CreateDatabase(name.substr(0, 63), &why)) << why;
    conninfo_ = server_->Conninfo(name.substr(0, 63));
  }

  // Runs `sql` on this test's database through a connection of its own, as a change from
  // outside would; `params` are bound as text to $1, $2, ... Returns the first column of
  // the first row ("" when there is none).
  std::string Sql(const std::string& sql, const std::vector<std::string>& params = {}) {
    PGconn* conn = PQconnectdb(conninfo_.c_str());
    PQsetNoticeProcessor(conn, PostgresServer::IgnoreNotice, nullptr);
    EXPECT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
    std::vector<const char*> values;
    for (const std::string& param : params) values.push_back(param.c_str());
    PGresult* result = PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                    values.data(), nullptr, nullptr, 0);
    ExecStatusType status = PQresultStatus(result);
    EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
        << sql << ": " << PQerrorMessage(conn);
    std::string value;
    if (status == PGRES_TUPLES_OK && PQntuples(result) > 0 && PQnfields(result) > 0) {
      value = PQgetvalue(result, 0, 0);
    }
    PQclear(result);
    PQfinish(conn);
    return value;
  }

  inline static std::unique_ptr<PostgresServer> server_;
  inline static std::string skip_reason_;
  std::string conninfo_;
};

}  // namespace kiln::testing
