#include "cache/fleet_tier.h"

#include <libpq-fe.h>

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cache/digest.h"
#include "spdlog/spdlog.h"

namespace kiln::cache {
namespace {

// Bumped when the schema changes incompatibly; an old kilnd refuses a newer database.
constexpr int kSchemaVersion = 1;

// Blobs are split into blob_chunks rows; the blobs row is written last in the same
// transaction, so a blob whose row is visible has all its chunks. The kiln_schema row also
// serializes the writers of tuning_lines (PutTuningLines locks it), so ids are handed out in
// commit order and a reader's cursor never skips a line that commits late.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS kiln_schema (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
  digest TEXT PRIMARY KEY,            -- "sha256:<hex>" of the whole blob
  size BIGINT NOT NULL,
  chunks INTEGER NOT NULL,
  created TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS blob_chunks (
  digest TEXT NOT NULL,
  idx INTEGER NOT NULL,               -- 0-based; every chunk but the last is kChunkBytes
  bytes BYTEA NOT NULL,
  PRIMARY KEY (digest, idx)
);
CREATE TABLE IF NOT EXISTS compile_results (
  key TEXT PRIMARY KEY,               -- cache/compile_key.h
  artifact_digest TEXT NOT NULL,
  manifest_digest TEXT NOT NULL,
  file_name TEXT NOT NULL,
  artifact_size BIGINT NOT NULL,
  created TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS tuning_lines (
  id BIGSERIAL PRIMARY KEY,           -- the cursor of TuningLinesSince
  sha256 TEXT NOT NULL UNIQUE,        -- of line
  line TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS owners (   -- which tenant sees which model and artifact
  tenant TEXT NOT NULL,
  digest TEXT NOT NULL,
  PRIMARY KEY (tenant, digest)
);
CREATE TABLE IF NOT EXISTS leases (
  key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  expires TIMESTAMPTZ NOT NULL
);
)sql";

using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

// Debian's Abseil has its own string_view, distinct from std::string_view.
absl::string_view Absl(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

// One query parameter. Every parameter travels in binary format with an explicit type
// (text or bytea), so nothing is escaped or spliced; numbers go as text and SQL casts them.
struct Param {
  Param(std::string_view v) : value(v) {}    // NOLINT: implicit on purpose, for {a, b} lists
  Param(const std::string& v) : value(v) {}  // NOLINT
  Param(const char* v) : value(v) {}         // NOLINT
  Param(absl::string_view v) : value(v.data(), v.size()) {}  // NOLINT
  static Param Bytea(std::string_view v) {
    Param p(v);
    p.bytea = true;
    return p;
  }
  std::string_view value;
  bool bytea = false;
};

// The status for a failed command: UNAVAILABLE when the connection is gone or the server
// is shutting down, ABORTED on a serialization failure or deadlock (retry), INTERNAL
// otherwise; the message names `what` and carries libpq's.
absl::Status PgError(PGconn* conn, const PGresult* result, absl::string_view what) {
  std::string message = result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn);
  message = std::string(absl::StripTrailingAsciiWhitespace(message));
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string_view sqlstate = state != nullptr ? state : "";
  std::string text = absl::StrCat("fleet tier: ", what, ": ", message);
  if (PQstatus(conn) == CONNECTION_BAD || sqlstate.starts_with("08") ||
      sqlstate.starts_with("57P")) {
    return absl::UnavailableError(text);
  }
  if (sqlstate == "40001" || sqlstate == "40P01") return absl::AbortedError(text);
  if (sqlstate.starts_with("53")) return absl::ResourceExhaustedError(text);
  return absl::InternalError(text);
}

// Runs `sql` with `params` ($1, $2, ...); results come back in binary format, which for
// text and bytea columns is their raw bytes (so SQL casts numbers ::text).
absl::StatusOr<Result> Exec(PGconn* conn, absl::string_view what, const char* sql,
                            std::initializer_list<Param> params = {}) {
  constexpr Oid kTextOid = 25, kByteaOid = 17;
  std::vector<Oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const Param& param : params) {
    types.push_back(param.bytea ? kByteaOid : kTextOid);
    // A null pointer would be SQL NULL; an empty view may have one.
    values.push_back(param.value.data() != nullptr ? param.value.data() : "");
    lengths.push_back(static_cast<int>(param.value.size()));
    formats.push_back(1);
  }
  Result result(PQexecParams(conn, sql, static_cast<int>(params.size()), types.data(),
                             values.data(), lengths.data(), formats.data(), /*resultFormat=*/1),
                &PQclear);
  ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return PgError(conn, result.get(), what);
  }
  return result;
}

std::string Value(const PGresult* result, int row, int column) {
  return std::string(PQgetvalue(result, row, column), PQgetlength(result, row, column));
}

int64_t IntValue(const PGresult* result, int row, int column) {
  int64_t value = 0;
  (void)absl::SimpleAtoi(Value(result, row, column), &value);
  return value;
}

// Runs `body` between BEGIN and COMMIT; rolls back when it fails.
absl::Status InTransaction(PGconn* conn, absl::string_view what,
                           absl::FunctionRef<absl::Status()> body) {
  if (auto begin = Exec(conn, what, "BEGIN"); !begin.ok()) return begin.status();
  absl::Status status = body();
  if (status.ok()) return Exec(conn, what, "COMMIT").status();
  (void)Exec(conn, what, "ROLLBACK");
  return status;
}

absl::Status CheckSchemaVersion(PGconn* conn);

// Creates the tables and checks the schema version. Replicas that start together race to
// create the tables, and PostgreSQL can then fail a CREATE TABLE IF NOT EXISTS with a
// unique violation (23505) or duplicate table (42P07); the loser tries again.
absl::Status MigrateSchema(PGconn* conn) {
  absl::Status created;
  for (int attempt = 0; attempt < 3; ++attempt) {
    // PQexec: several statements in one call, which PQexecParams refuses.
    Result result(PQexec(conn, kSchema), &PQclear);
    if (result && PQresultStatus(result.get()) == PGRES_COMMAND_OK) return CheckSchemaVersion(conn);
    created = PgError(conn, result.get(), "creating the schema");
    const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
    if (state == nullptr ||
        (std::string_view(state) != "23505" && std::string_view(state) != "42P07")) {
      break;
    }
  }
  return created;
}

absl::Status CheckSchemaVersion(PGconn* conn) {
  auto version = Exec(conn, "reading the schema version",
                      "INSERT INTO kiln_schema (id, version) VALUES (1, $1::integer) "
                      "ON CONFLICT (id) DO NOTHING",
                      {absl::StrCat(kSchemaVersion)});
  if (!version.ok()) return version.status();
  version = Exec(conn, "reading the schema version",
                 "SELECT version::text FROM kiln_schema WHERE id = 1");
  if (!version.ok()) return version.status();
  int64_t found = PQntuples(version->get()) > 0 ? IntValue(version->get(), 0, 0) : 0;
  if (found > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("fleet database has schema version ", found,
                                                      "; this kilnd understands ", kSchemaVersion));
  }
  return absl::OkStatus();
}

absl::Status CheckTtl(absl::Duration ttl) {
  if (ttl > absl::ZeroDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("fleet tier: lease ttl must be positive, got ", absl::FormatDuration(ttl)));
}

// A connection dropped by the server (restart, failover, idle timeout) is reset once before
// the next command; UNAVAILABLE when that fails too.
absl::Status EnsureConnected(PGconn* conn) {
  if (PQstatus(conn) == CONNECTION_OK) return absl::OkStatus();
  PQreset(conn);
  if (PQstatus(conn) == CONNECTION_OK) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("fleet tier: reconnecting to PostgreSQL: ",
                   absl::StripTrailingAsciiWhitespace(PQerrorMessage(conn))));
}

// Server notices go to our log rather than libpq's default, stderr: warnings as warnings,
// the rest ("relation ... already exists, skipping") at debug level.
void LogNotice(void*, const PGresult* notice) {
  const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
  std::string message(absl::StripTrailingAsciiWhitespace(PQresultErrorMessage(notice)));
  if (severity != nullptr && std::string_view(severity) == "WARNING") {
    spdlog::warn("fleet tier: PostgreSQL: {}", message);
  } else {
    spdlog::debug("fleet tier: PostgreSQL: {}", message);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<FleetTier>> FleetTier::Connect(const std::string& conninfo) {
  char* parse_error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &parse_error);
  if (options == nullptr) {
    std::string message = parse_error != nullptr ? parse_error : "out of memory";
    PQfreemem(parse_error);
    return absl::InvalidArgumentError(absl::StrCat("fleet tier: bad PostgreSQL conninfo: ",
                                                   absl::StripTrailingAsciiWhitespace(message)));
  }
  PQconninfoFree(options);
  // UTF-8 unless the conninfo says otherwise, kept by PQreset since it is a connect option.
  const char* keywords[] = {"client_encoding", "dbname", nullptr};
  const char* values[] = {"UTF8", conninfo.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    std::string message = conn != nullptr ? PQerrorMessage(conn) : "out of memory";
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("fleet tier: connecting to PostgreSQL: ",
                                               absl::StripTrailingAsciiWhitespace(message)));
  }
  PQsetNoticeReceiver(conn, LogNotice, nullptr);
  if (absl::Status status = MigrateSchema(conn); !status.ok()) {
    PQfinish(conn);
    return status;
  }
  return std::unique_ptr<FleetTier>(new FleetTier(conn));
}

FleetTier::~FleetTier() { PQfinish(conn_); }

absl::Status FleetTier::PutBlob(std::string_view digest, std::string_view bytes) {
  if (std::string actual = Sha256Digest(bytes); actual != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet tier: blob named ", Absl(digest), " hashes to ", actual));
  }
  const std::string what = absl::StrCat("storing blob ", Absl(digest));
  const size_t chunks = bytes.empty() ? 1 : (bytes.size() + kChunkBytes - 1) / kChunkBytes;
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  // Write-through stores every blob it produces; most are here already, so don't send them.
  auto present = Exec(conn_, what, "SELECT 1 FROM blobs WHERE digest = $1", {digest});
  if (!present.ok()) return present.status();
  if (PQntuples(present->get()) > 0) return absl::OkStatus();
  return InTransaction(conn_, what, [&]() -> absl::Status {
    for (size_t i = 0; i < chunks; ++i) {
      std::string_view chunk = bytes.substr(std::min(bytes.size(), i * kChunkBytes), kChunkBytes);
      // The update repairs a stray chunk left with other bytes (e.g. damaged by hand).
      auto row = Exec(conn_, what,
                      "INSERT INTO blob_chunks (digest, idx, bytes) VALUES ($1, $2::integer, $3) "
                      "ON CONFLICT (digest, idx) DO UPDATE SET bytes = EXCLUDED.bytes "
                      "WHERE blob_chunks.bytes <> EXCLUDED.bytes",
                      {digest, absl::StrCat(i), Param::Bytea(chunk)});
      if (!row.ok()) return row.status();
    }
    return Exec(conn_, what,
                "INSERT INTO blobs (digest, size, chunks) VALUES ($1, $2::bigint, $3::integer) "
                "ON CONFLICT (digest) DO NOTHING",
                {digest, absl::StrCat(bytes.size()), absl::StrCat(chunks)})
        .status();
  });
}

absl::StatusOr<std::optional<std::string>> FleetTier::GetBlob(std::string_view digest) {
  const std::string what = absl::StrCat("reading blob ", Absl(digest));
  std::string bytes;
  int64_t size = 0, chunks = 0, found = 0;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
    // One statement, so one snapshot: the blobs row and its chunks as of the same moment.
    auto rows = Exec(conn_, what,
                     "SELECT b.size::text, b.chunks::text, c.bytes FROM blobs b "
                     "LEFT JOIN blob_chunks c ON c.digest = b.digest "
                     "WHERE b.digest = $1 ORDER BY c.idx",
                     {digest});
    if (!rows.ok()) return rows.status();
    const PGresult* result = rows->get();
    if (PQntuples(result) == 0) return std::nullopt;
    size = IntValue(result, 0, 0);
    chunks = IntValue(result, 0, 1);
    for (int row = 0; row < PQntuples(result); ++row) {
      if (PQgetisnull(result, row, 2)) continue;
      bytes.append(PQgetvalue(result, row, 2), PQgetlength(result, row, 2));
      ++found;
    }
  }
  // Hash outside the lock: large artifacts would otherwise stall every other request.
  std::string actual = Sha256Digest(bytes);
  if (found == chunks && static_cast<int64_t>(bytes.size()) == size && actual == digest) {
    return bytes;
  }
  spdlog::warn(
      "fleet tier: blob {} is damaged ({} of {} chunks, {} of {} bytes, hashing to {}); "
      "dropping it",
      digest, found, chunks, bytes.size(), size, actual);
  absl::MutexLock lock(&mu_);
  absl::Status dropped = InTransaction(conn_, what, [&]() -> absl::Status {
    auto blob = Exec(conn_, what, "DELETE FROM blobs WHERE digest = $1", {digest});
    if (!blob.ok()) return blob.status();
    return Exec(conn_, what, "DELETE FROM blob_chunks WHERE digest = $1", {digest}).status();
  });
  if (!dropped.ok()) return dropped;
  return std::nullopt;
}

absl::Status FleetTier::PutCompileResult(std::string_view key, const CompileResult& result) {
  const std::string what = absl::StrCat("storing the compile result of ", Absl(key));
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  // The SELECT yields no row unless both blobs exist, and then nothing is written.
  auto row = Exec(conn_, what,
                  "INSERT INTO compile_results "
                  "(key, artifact_digest, manifest_digest, file_name, artifact_size) "
                  "SELECT $1, $2, $3, $4, $5::bigint "
                  "WHERE EXISTS (SELECT 1 FROM blobs WHERE digest = $2) "
                  "AND EXISTS (SELECT 1 FROM blobs WHERE digest = $3) "
                  "ON CONFLICT (key) DO UPDATE SET artifact_digest = EXCLUDED.artifact_digest, "
                  "manifest_digest = EXCLUDED.manifest_digest, file_name = EXCLUDED.file_name, "
                  "artifact_size = EXCLUDED.artifact_size, created = now() "
                  "RETURNING 1",
                  {key, result.artifact_digest, result.manifest_digest, result.file_name,
                   absl::StrCat(result.artifact_size)});
  if (!row.ok()) return row.status();
  if (PQntuples(row->get()) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fleet tier: compile result of ", Absl(key), " refers to blobs ", result.artifact_digest,
        " and ", result.manifest_digest, " that are not both stored"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<CompileResult>> FleetTier::GetCompileResult(std::string_view key) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  auto rows = Exec(conn_, absl::StrCat("reading the compile result of ", Absl(key)),
                   "SELECT artifact_digest, manifest_digest, file_name, artifact_size::text "
                   "FROM compile_results WHERE key = $1",
                   {key});
  if (!rows.ok()) return rows.status();
  const PGresult* result = rows->get();
  if (PQntuples(result) == 0) return std::nullopt;
  return CompileResult{.artifact_digest = Value(result, 0, 0),
                       .manifest_digest = Value(result, 0, 1),
                       .file_name = Value(result, 0, 2),
                       .artifact_size = static_cast<uint64_t>(IntValue(result, 0, 3))};
}

absl::StatusOr<int64_t> FleetTier::PutTuningLines(std::string_view json_lines) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(Absl(json_lines), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty()) return 0;
  const char* what = "storing tuning lines";
  int64_t added = 0;
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  absl::Status status = InTransaction(conn_, what, [&]() -> absl::Status {
    // Held until COMMIT: writers take ids one transaction after another (see kSchema).
    auto locked = Exec(conn_, what, "SELECT 1 FROM kiln_schema WHERE id = 1 FOR UPDATE");
    if (!locked.ok()) return locked.status();
    for (absl::string_view line : lines) {
      auto row = Exec(conn_, what,
                      "INSERT INTO tuning_lines (sha256, line) VALUES ($1, $2) "
                      "ON CONFLICT (sha256) DO NOTHING RETURNING 1",
                      {Sha256Hex(std::string_view(line.data(), line.size())), line});
      if (!row.ok()) return row.status();
      added += PQntuples(row->get());
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return added;
}

absl::StatusOr<TuningLines> FleetTier::TuningLinesSince(int64_t cursor, int64_t max_lines) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  auto rows = Exec(conn_, "reading tuning lines",
                   "SELECT id::text, line FROM tuning_lines WHERE id > $1::bigint "
                   "ORDER BY id LIMIT $2::bigint",
                   {absl::StrCat(cursor), absl::StrCat(max_lines)});
  if (!rows.ok()) return rows.status();
  const PGresult* result = rows->get();
  TuningLines page{.next_cursor = cursor, .lines = PQntuples(result)};
  for (int row = 0; row < PQntuples(result); ++row) {
    page.next_cursor = IntValue(result, row, 0);
    absl::StrAppend(&page.text, Value(result, row, 1), "\n");
  }
  return page;
}

absl::StatusOr<bool> FleetTier::TryAcquireLease(std::string_view key, std::string_view owner,
                                                absl::Duration ttl) {
  if (absl::Status status = CheckTtl(ttl); !status.ok()) return status;
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  // One statement, judged by the database's clock: no row, an expired row, or our own row
  // is (re)taken; a live lease of another owner leaves the row alone and returns nothing.
  auto row = Exec(conn_, absl::StrCat("acquiring the lease of ", Absl(key)),
                  "INSERT INTO leases (key, owner, expires) "
                  "VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond') "
                  "ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, "
                  "expires = EXCLUDED.expires "
                  "WHERE leases.expires < now() OR leases.owner = EXCLUDED.owner "
                  "RETURNING owner",
                  {key, owner, absl::StrCat(absl::ToInt64Microseconds(ttl))});
  if (!row.ok()) return row.status();
  return PQntuples(row->get()) > 0;
}

absl::StatusOr<bool> FleetTier::RenewLease(std::string_view key, std::string_view owner,
                                           absl::Duration ttl) {
  if (absl::Status status = CheckTtl(ttl); !status.ok()) return status;
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  // A lease that expired but was not taken is still ours: nobody else started compiling.
  auto row = Exec(conn_, absl::StrCat("renewing the lease of ", Absl(key)),
                  "UPDATE leases SET expires = now() + $3::bigint * interval '1 microsecond' "
                  "WHERE key = $1 AND owner = $2 RETURNING 1",
                  {key, owner, absl::StrCat(absl::ToInt64Microseconds(ttl))});
  if (!row.ok()) return row.status();
  return PQntuples(row->get()) > 0;
}

absl::Status FleetTier::ReleaseLease(std::string_view key, std::string_view owner) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  return Exec(conn_, absl::StrCat("releasing the lease of ", Absl(key)),
              "DELETE FROM leases WHERE key = $1 AND owner = $2", {key, owner})
      .status();
}

absl::Status FleetTier::GrantOwner(std::string_view tenant, std::string_view digest) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  return Exec(conn_, absl::StrCat("recording the owner of ", Absl(digest)),
              "INSERT INTO owners (tenant, digest) VALUES ($1, $2) ON CONFLICT DO NOTHING",
              {tenant, digest})
      .status();
}

absl::StatusOr<bool> FleetTier::Owns(std::string_view tenant, std::string_view digest) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = EnsureConnected(conn_); !status.ok()) return status;
  absl::StatusOr<Result> result =
      Exec(conn_, absl::StrCat("looking up the owners of ", Absl(digest)),
           "SELECT 1 FROM owners WHERE tenant = $1 AND digest = $2", {tenant, digest});
  if (!result.ok()) return result.status();
  return PQntuples(result->get()) > 0;
}

}  // namespace kiln::cache
