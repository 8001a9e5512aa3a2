#include "cache/owners.h"

#include "cache/sqlite.h"

namespace kiln::cache {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS owners (
  tenant TEXT NOT NULL,
  digest TEXT NOT NULL,            -- "sha256:<hex>" of a model or an artifact
  PRIMARY KEY (tenant, digest)
) WITHOUT ROWID;
)sql";

}  // namespace

absl::StatusOr<std::unique_ptr<Owners>> Owners::Open(const std::string& sqlite_path) {
  absl::StatusOr<sqlite3*> db = OpenConnection(sqlite_path);
  if (!db.ok()) return db.status();
  if (absl::Status status = Exec(*db, kSchema); !status.ok()) {
    sqlite3_close(*db);
    return status;
  }
  return std::unique_ptr<Owners>(new Owners(*db));
}

Owners::~Owners() { sqlite3_close(db_); }

absl::Status Owners::Grant(std::string_view tenant, std::string_view digest) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(
      db_, "INSERT INTO owners (tenant, digest) VALUES (?1, ?2) ON CONFLICT DO NOTHING");
  if (!stmt.ok()) return stmt.status();
  return stmt->BindText(1, tenant).BindText(2, digest).Run();
}

absl::StatusOr<bool> Owners::Owns(std::string_view tenant, std::string_view digest) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, "SELECT 1 FROM owners WHERE tenant = ?1 AND digest = ?2");
  if (!stmt.ok()) return stmt.status();
  return stmt->BindText(1, tenant).BindText(2, digest).Step();
}

}  // namespace kiln::cache
