#include "cache/sqlite.h"

#include "absl/strings/str_cat.h"

namespace kiln::cache {

absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string message = absl::StrCat(
      "cache database: ", absl::string_view(what.data(), what.size()), ": ", sqlite3_errmsg(db));
  switch (rc & 0xff) {  // the primary result code
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_FULL:
    case SQLITE_TOOBIG:
      return absl::ResourceExhaustedError(message);
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(
          absl::StrCat(message, "; move the file aside and restart to rebuild the cache"));
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<sqlite3*> OpenConnection(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_close(db);
    return absl::UnavailableError(
        absl::StrCat("cannot open cache database ", path, ": ", sqlite3_errstr(rc)));
  }
  // WAL lets readers (a fetch) proceed while a compile result is written; the busy timeout
  // covers a second process (the CLI's local mode) holding the write lock briefly.
  sqlite3_busy_timeout(db, 5000);
  absl::Status status = Exec(db,
                             "PRAGMA journal_mode = WAL;"
                             "PRAGMA synchronous = NORMAL;"
                             "PRAGMA foreign_keys = ON;");
  if (!status.ok()) {
    sqlite3_close(db);
    return status;
  }
  return db;
}

absl::Status Exec(sqlite3* db, const char* sql) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : SqliteError(db, rc, sql);
}

absl::Status InTransaction(sqlite3* db, absl::FunctionRef<absl::Status()> body) {
  if (absl::Status status = Exec(db, "BEGIN IMMEDIATE"); !status.ok()) return status;
  absl::Status status = body();
  if (!status.ok()) {
    Exec(db, "ROLLBACK").IgnoreError();  // the first error is the one worth reporting
    return status;
  }
  absl::Status commit = Exec(db, "COMMIT");
  if (!commit.ok()) Exec(db, "ROLLBACK").IgnoreError();
  return commit;
}

absl::StatusOr<Statement> Statement::Prepare(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, "prepare");
  return Statement(db, stmt);
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, "bind");
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, sqlite3_sql(stmt_));
}

}  // namespace kiln::cache
