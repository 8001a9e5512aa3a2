#include "cache/tuning_db.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cache/sqlite.h"
#include "nlohmann/json.hpp"

namespace kiln::cache {
namespace {

using Json = nlohmann::json;
// Export writes the fields in the order they are added, not sorted.
using OrderedJson = nlohmann::ordered_json;

// The unique index is the key the upsert in InsertRecord resolves conflicts on, and its
// prefix (the TuningKey and the compiler version) is what Best looks records up by.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS tuning_records (
  workload TEXT NOT NULL,
  target TEXT NOT NULL,
  space_version INTEGER NOT NULL,
  bucket TEXT NOT NULL,
  compiler_version TEXT NOT NULL,
  trace_json TEXT NOT NULL,          -- canonical JSON (no whitespace, sorted keys)
  median_ns REAL NOT NULL,
  times_ns TEXT NOT NULL,            -- JSON array of numbers
  device TEXT NOT NULL,
  created_unix INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS tuning_records_by_key ON tuning_records
  (workload, target, space_version, bucket, compiler_version, trace_json);
-- Revision: a counter per target, bumped by triggers on every row added, replaced or
-- deleted, so that no writer of tuning_records (Put, import, Retire) can forget it.
CREATE TABLE IF NOT EXISTS tuning_revisions (
  target TEXT PRIMARY KEY,
  revision INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS tuning_records_inserted AFTER INSERT ON tuning_records BEGIN
  INSERT INTO tuning_revisions (target, revision) VALUES (NEW.target, 1)
  ON CONFLICT (target) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER IF NOT EXISTS tuning_records_updated AFTER UPDATE ON tuning_records BEGIN
  INSERT INTO tuning_revisions (target, revision) VALUES (NEW.target, 1)
  ON CONFLICT (target) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER IF NOT EXISTS tuning_records_deleted AFTER DELETE ON tuning_records BEGIN
  INSERT INTO tuning_revisions (target, revision) VALUES (OLD.target, 1)
  ON CONFLICT (target) DO UPDATE SET revision = revision + 1;
END;
)sql";

// Every column, in the order RecordFromRow reads them.
constexpr char kColumns[] =
    "workload, target, space_version, bucket, compiler_version, trace_json, median_ns, "
    "times_ns, device, created_unix";

// The fields of a JSON line, in the order ExportJsonLines writes them.
constexpr const char* kFields[] = {"workload",         "target",    "space_version", "bucket",
                                   "compiler_version", "device",    "median_ns",     "times_ns",
                                   "created_unix",     "trace_json"};

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

// JSON strings must be UTF-8; a record that could not be exported is refused up front.
absl::Status CheckText(absl::string_view field, const std::string& text, bool may_be_empty) {
  if (!may_be_empty && text.empty()) return FieldError(field, "must not be empty");
  try {
    Json(text).dump();
  } catch (const Json::exception&) {
    return FieldError(field, "is not valid UTF-8");
  }
  return absl::OkStatus();
}

absl::Status CheckFields(const TuningRecord& record) {
  const TuningKey& key = record.key;
  for (auto [field, text, may_be_empty] :
       {std::tuple("workload", &key.workload, false), std::tuple("target", &key.target, false),
        std::tuple("bucket", &key.bucket, true),
        std::tuple("compiler_version", &record.compiler_version, false),
        std::tuple("device", &record.device, true)}) {
    if (absl::Status status = CheckText(field, *text, may_be_empty); !status.ok()) return status;
  }
  if (record.created_unix < 0) {
    return FieldError("created_unix", absl::StrCat("must be >= 0, got ", record.created_unix));
  }
  if (key.space_version < 0) {
    return FieldError("space_version", absl::StrCat("must be >= 0, got ", key.space_version));
  }
  if (!(record.median_ns > 0) || !std::isfinite(record.median_ns)) {
    return FieldError("median_ns", absl::StrCat("must be > 0 and finite, got ", record.median_ns));
  }
  for (double time : record.times_ns) {
    if (!(time >= 0) || !std::isfinite(time)) {
      return FieldError("times_ns", absl::StrCat("must be >= 0 and finite, got ", time));
    }
  }
  return absl::OkStatus();
}

// The record as it is stored: checked, its trace in canonical form, its time set.
absl::StatusOr<TuningRecord> Normalize(TuningRecord record) {
  if (absl::Status status = CheckFields(record); !status.ok()) return status;
  try {
    record.trace_json = Json::parse(record.trace_json).dump();
  } catch (const Json::exception& e) {
    return FieldError("trace_json", absl::StrCat("is not valid JSON (", e.what(), ")"));
  }
  if (record.created_unix == 0) record.created_unix = static_cast<int64_t>(std::time(nullptr));
  return record;
}

// Stores a normalized record; returns whether a row was added or replaced (a slower
// duplicate changes nothing).
absl::StatusOr<bool> InsertRecord(sqlite3* db, const TuningRecord& record) {
  static constexpr char kSql[] = R"sql(
    INSERT INTO tuning_records (workload, target, space_version, bucket, compiler_version,
                                trace_json, median_ns, times_ns, device, created_unix)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
    ON CONFLICT (workload, target, space_version, bucket, compiler_version, trace_json)
    DO UPDATE SET median_ns = excluded.median_ns, times_ns = excluded.times_ns,
                  device = excluded.device, created_unix = excluded.created_unix
    WHERE excluded.median_ns < tuning_records.median_ns)sql";
  const std::string times = Json(record.times_ns).dump();
  auto stmt = Statement::Prepare(db, kSql);
  if (!stmt.ok()) return stmt.status();
  stmt->BindText(1, record.key.workload)
      .BindText(2, record.key.target)
      .BindInt(3, record.key.space_version)
      .BindText(4, record.key.bucket)
      .BindText(5, record.compiler_version)
      .BindText(6, record.trace_json)
      .BindDouble(7, record.median_ns)
      .BindText(8, times)
      .BindText(9, record.device)
      .BindInt(10, record.created_unix);
  if (absl::Status status = stmt->Run(); !status.ok()) return status;
  return sqlite3_changes(db) > 0;
}

absl::StatusOr<std::vector<double>> ParseTimes(const std::string& text) {
  Json times = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<double> result;
  if (times.is_array()) {
    for (const Json& time : times) {
      if (!time.is_number()) break;
      result.push_back(time.get<double>());
    }
    if (result.size() == times.size()) return result;
  }
  return absl::DataLossError(
      absl::StrCat("tuning database: times_ns is not a list of numbers: ", text.substr(0, 100)));
}

// Reads the columns of kColumns.
absl::StatusOr<TuningRecord> RecordFromRow(Statement& row) {
  absl::StatusOr<std::vector<double>> times = ParseTimes(row.ColumnBytes(7));
  if (!times.ok()) return times.status();
  return TuningRecord{.key = {.workload = row.ColumnBytes(0),
                              .target = row.ColumnBytes(1),
                              .space_version = static_cast<int>(row.ColumnInt(2)),
                              .bucket = row.ColumnBytes(3)},
                      .trace_json = row.ColumnBytes(5),
                      .median_ns = row.ColumnDouble(6),
                      .times_ns = *std::move(times),
                      .device = row.ColumnBytes(8),
                      .compiler_version = row.ColumnBytes(4),
                      .created_unix = row.ColumnInt(9)};
}

OrderedJson RecordToJson(const TuningRecord& record) {
  OrderedJson line;
  line["workload"] = record.key.workload;
  line["target"] = record.key.target;
  line["space_version"] = record.key.space_version;
  line["bucket"] = record.key.bucket;
  line["compiler_version"] = record.compiler_version;
  line["device"] = record.device;
  line["median_ns"] = record.median_ns;
  line["times_ns"] = record.times_ns;
  line["created_unix"] = record.created_unix;
  line["trace_json"] = OrderedJson::parse(record.trace_json);  // stored canonical: keys sorted
  return line;
}

// The value of `field`, which must be present and have the type `is` checks.
absl::StatusOr<const Json*> Field(const Json& line, const char* field, bool (Json::*is)() const,
                                  const char* type) {
  auto it = line.find(field);
  if (it == line.end()) return FieldError(field, "missing");
  if (!((*it).*is)()) return FieldError(field, absl::StrCat("must be ", type));
  return &*it;
}

absl::Status ReadString(const Json& line, const char* field, std::string* out) {
  absl::StatusOr<const Json*> value = Field(line, field, &Json::is_string, "a string");
  if (value.ok()) *out = (*value)->get<std::string>();
  return value.status();
}

absl::Status ReadInt(const Json& line, const char* field, int64_t min, int64_t max, int64_t* out) {
  absl::StatusOr<const Json*> value = Field(line, field, &Json::is_number_integer, "an integer");
  if (!value.ok()) return value.status();
  if ((*value)->is_number_unsigned() ? (*value)->get<uint64_t>() > static_cast<uint64_t>(max)
                                     : (*value)->get<int64_t>() < min) {
    return FieldError(field, "is out of range");
  }
  *out = (*value)->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadNumbers(const Json& line, const char* field, std::vector<double>* out) {
  absl::StatusOr<const Json*> value = Field(line, field, &Json::is_array, "a list of numbers");
  if (!value.ok()) return value.status();
  for (const Json& number : **value) {
    if (!number.is_number()) return FieldError(field, "must be a list of numbers");
    out->push_back(number.get<double>());
  }
  return absl::OkStatus();
}

absl::Status CheckNoUnknownFields(const Json& line) {
  for (const auto& item : line.items()) {
    if (std::find(std::begin(kFields), std::end(kFields), item.key()) == std::end(kFields)) {
      return FieldError(item.key(), "unknown field");
    }
  }
  return absl::OkStatus();
}

// One line of ExportJsonLines back into a record (not yet normalized).
absl::StatusOr<TuningRecord> RecordFromJsonLine(std::string_view text) {
  Json line = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (line.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!line.is_object()) return absl::InvalidArgumentError("not a JSON object");
  if (absl::Status status = CheckNoUnknownFields(line); !status.ok()) return status;
  TuningRecord record;
  int64_t space_version = 0;
  absl::StatusOr<const Json*> median = Field(line, "median_ns", &Json::is_number, "a number");
  for (absl::Status status :
       {ReadString(line, "workload", &record.key.workload),
        ReadString(line, "target", &record.key.target),
        ReadInt(line, "space_version", 0, std::numeric_limits<int>::max(), &space_version),
        ReadString(line, "bucket", &record.key.bucket),
        ReadString(line, "compiler_version", &record.compiler_version),
        ReadString(line, "device", &record.device), median.status(),
        ReadNumbers(line, "times_ns", &record.times_ns),
        ReadInt(line, "created_unix", 0, std::numeric_limits<int64_t>::max(),
                &record.created_unix)}) {
    if (!status.ok()) return status;
  }
  if (!line.contains("trace_json")) return FieldError("trace_json", "missing");
  record.key.space_version = static_cast<int>(space_version);
  record.median_ns = (*median)->get<double>();
  record.trace_json = line["trace_json"].dump();
  return record;
}

// Every non-blank line of `text` as a normalized record; the first bad one is an error
// naming its line number.
absl::StatusOr<std::vector<TuningRecord>> ParseJsonLines(std::string_view text) {
  std::vector<TuningRecord> records;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<TuningRecord> record = RecordFromJsonLine({line.data(), line.size()});
    if (record.ok()) record = Normalize(*std::move(record));
    if (!record.ok()) return WithContext(record.status(), absl::StrCat("line ", line_number));
    records.push_back(*std::move(record));
  }
  return records;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TuningDb>> TuningDb::Open(const std::string& sqlite_path) {
  absl::StatusOr<sqlite3*> db = OpenConnection(sqlite_path);
  if (!db.ok()) return db.status();
  if (absl::Status status = Exec(*db, kSchema); !status.ok()) {
    sqlite3_close(*db);
    return status;
  }
  return std::unique_ptr<TuningDb>(new TuningDb(*db));
}

TuningDb::~TuningDb() { sqlite3_close(db_); }

absl::StatusOr<int64_t> TuningDb::Revision(std::string_view target) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, "SELECT revision FROM tuning_revisions WHERE target = ?1");
  if (!stmt.ok()) return stmt.status();
  stmt->BindText(1, target);
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->ColumnInt(0) : 0;
}

absl::Status TuningDb::Put(const TuningRecord& record) {
  absl::StatusOr<TuningRecord> normalized = Normalize(record);
  if (!normalized.ok()) return WithContext(normalized.status(), "tuning record");
  absl::MutexLock lock(&mu_);
  return InsertRecord(db_, *normalized).status();
}

absl::StatusOr<std::optional<TuningRecord>> TuningDb::Best(const TuningKey& key,
                                                           std::string_view compiler_version) {
  static const std::string kSql = absl::StrCat(
      "SELECT ", kColumns,
      " FROM tuning_records WHERE workload = ?1 AND target = ?2 AND space_version = ?3 AND "
      "bucket = ?4 AND compiler_version = ?5 ORDER BY median_ns, trace_json LIMIT 1");
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, kSql);
  if (!stmt.ok()) return stmt.status();
  auto row = stmt->BindText(1, key.workload)
                 .BindText(2, key.target)
                 .BindInt(3, key.space_version)
                 .BindText(4, key.bucket)
                 .BindText(5, compiler_version)
                 .Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  return RecordFromRow(*stmt);
}

absl::StatusOr<std::vector<std::string>> TuningDb::Buckets(const TuningKey& key,
                                                           std::string_view compiler_version) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(
      db_,
      "SELECT DISTINCT bucket FROM tuning_records WHERE workload = ?1 AND target = ?2 AND "
      "space_version = ?3 AND compiler_version = ?4 ORDER BY bucket");
  if (!stmt.ok()) return stmt.status();
  stmt->BindText(1, key.workload)
      .BindText(2, key.target)
      .BindInt(3, key.space_version)
      .BindText(4, compiler_version);
  std::vector<std::string> buckets;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return buckets;
    buckets.push_back(stmt->ColumnBytes(0));
  }
}

absl::StatusOr<int64_t> TuningDb::Retire(std::string_view current_compiler_version) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, "DELETE FROM tuning_records WHERE compiler_version != ?1");
  if (!stmt.ok()) return stmt.status();
  if (absl::Status status = stmt->BindText(1, current_compiler_version).Run(); !status.ok()) {
    return status;
  }
  return static_cast<int64_t>(sqlite3_changes64(db_));
}

absl::StatusOr<TuningStats> TuningDb::Stats() {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(
      db_, "SELECT compiler_version, COUNT(*) FROM tuning_records GROUP BY compiler_version");
  if (!stmt.ok()) return stmt.status();
  TuningStats stats;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    stats.records += stmt->ColumnInt(1);
    stats.records_by_compiler_version[stmt->ColumnBytes(0)] = stmt->ColumnInt(1);
  }
  auto workloads = Statement::Prepare(db_, "SELECT COUNT(DISTINCT workload) FROM tuning_records");
  if (!workloads.ok()) return workloads.status();
  absl::StatusOr<bool> row = workloads->Step();  // an aggregate always has its one row
  if (!row.ok()) return row.status();
  stats.workloads = workloads->ColumnInt(0);
  return stats;
}

absl::StatusOr<std::string> TuningDb::ExportJsonLines() {
  static const std::string kSql =
      absl::StrCat("SELECT ", kColumns,
                   " FROM tuning_records ORDER BY workload, target, space_version, bucket, "
                   "compiler_version, median_ns, trace_json");
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, kSql);
  if (!stmt.ok()) return stmt.status();
  std::string text;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return text;
    absl::StatusOr<TuningRecord> record = RecordFromRow(*stmt);
    if (!record.ok()) return record.status();
    try {
      absl::StrAppend(&text, RecordToJson(*record).dump(), "\n");
    } catch (const OrderedJson::exception& e) {  // only a row damaged outside Put gets here
      return absl::DataLossError(absl::StrCat("tuning database: cannot export the record of ",
                                              record->key.workload, ": ", e.what()));
    }
  }
}

absl::StatusOr<int64_t> TuningDb::ImportJsonLines(std::string_view text) {
  absl::StatusOr<std::vector<TuningRecord>> records = ParseJsonLines(text);
  if (!records.ok()) return records.status();
  int64_t imported = 0;
  absl::MutexLock lock(&mu_);
  absl::Status status = InTransaction(db_, [&]() -> absl::Status {
    for (const TuningRecord& record : *records) {
      absl::StatusOr<bool> changed = InsertRecord(db_, record);
      if (!changed.ok()) return changed.status();
      imported += *changed;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return imported;
}

}  // namespace kiln::cache
