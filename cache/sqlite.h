// The SQLite plumbing that the cache's tables share: opening a connection the way every user
// of the cache database must (WAL, busy timeout), prepared statements, errors as absl::Status.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::cache {

// The status for SQLite result code `rc`: UNAVAILABLE when busy, RESOURCE_EXHAUSTED when full,
// FAILED_PRECONDITION on a constraint, DATA_LOSS for a damaged file, INTERNAL otherwise; the
// message names `what`.
absl::Status SqliteError(sqlite3* db, int rc, std::string_view what);

// Opens or creates the database at `path` with the cache's pragmas: WAL journal, a busy
// timeout (kilnd and the CLI may hold the file at once), foreign keys on.
absl::StatusOr<sqlite3*> OpenConnection(const std::string& path);

absl::Status Exec(sqlite3* db, const char* sql);

// Runs `body` between BEGIN IMMEDIATE and COMMIT; rolls back when it fails.
absl::Status InTransaction(sqlite3* db, absl::FunctionRef<absl::Status()> body);

// One prepared statement; finalized on destruction. Bind failures are kept and reported by
// the next Step, so call sites read as a straight line.
class Statement {
 public:
  static absl::StatusOr<Statement> Prepare(sqlite3* db, std::string_view sql);
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), bind_rc_(other.bind_rc_) {}
  Statement& operator=(Statement&&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  // Text and blobs are bound without copying: the caller's bytes outlive the statement.
  Statement& BindText(int index, std::string_view text) {
    return Check(
        sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8));
  }
  Statement& BindBlob(int index, std::string_view bytes) {
    return Check(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_STATIC));
  }
  Statement& BindInt(int index, int64_t value) {
    return Check(sqlite3_bind_int64(stmt_, index, value));
  }
  Statement& BindDouble(int index, double value) {
    return Check(sqlite3_bind_double(stmt_, index, value));
  }

  // True while a row is available, false once the statement is done.
  absl::StatusOr<bool> Step();
  absl::Status Run() { return Step().status(); }

  std::string ColumnBytes(int index) {
    const void* data = sqlite3_column_blob(stmt_, index);
    return std::string(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, index));
  }
  int64_t ColumnInt(int index) { return sqlite3_column_int64(stmt_, index); }
  double ColumnDouble(int index) { return sqlite3_column_double(stmt_, index); }

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement& Check(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

}  // namespace kiln::cache
