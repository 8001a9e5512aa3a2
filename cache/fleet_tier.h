// The fleet tier: a PostgreSQL database that every replica of kilnd shares, so a model
// compiled (or a kernel tuned) by one replica is served by all of them. It sits behind each
// replica's local SQLite cache (cache::Store, cache::TuningDb) as a written-through second
// tier: a replica looks locally first, then here, and writes what it produces to both.
// Like Store it knows bytes and keys only (no IR, no proto). Plain PostgreSQL SQL only (no
// extensions, no PL/pgSQL, no LISTEN/NOTIFY), so wire-compatible distributed databases can
// stand behind it; every value travels as a query parameter. Thread-safe: one libpq
// connection is shared under a mutex, and reset once when it was lost.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/store.h"

typedef struct pg_conn PGconn;

namespace kiln::cache {

// A page of shared tuning records: JSON lines as TuningDb::ImportJsonLines reads them, and
// the cursor to pass to the next TuningLinesSince.
struct TuningLines {
  std::string text;  // one record per line, each ending in '\n'; "" when nothing is new
  int64_t next_cursor = 0;
  int64_t lines = 0;
};

class FleetTier {
 public:
  // Blobs are stored in chunks of at most this many bytes, so no row is huge (databases
  // that replicate rows cap their size, and a chunk is one bounded message on the wire).
  static constexpr size_t kChunkBytes = size_t{1} << 20;

  // Connects with the libpq connection string `conninfo` ("host=db dbname=kiln user=kiln";
  // the password is libpq's business: PGPASSWORD or ~/.pgpass) and creates the tables if
  // they are missing. INVALID_ARGUMENT for a malformed conninfo, UNAVAILABLE with libpq's
  // message when the server cannot be reached, FAILED_PRECONDITION when the database was
  // made by a newer kilnd (its schema version is higher than ours).
  static absl::StatusOr<std::unique_ptr<FleetTier>> Connect(const std::string& conninfo);
  ~FleetTier();
  FleetTier(const FleetTier&) = delete;
  FleetTier& operator=(const FleetTier&) = delete;

  // Blobs, content-addressed ("sha256:<hex>", cache/digest.h). PutBlob stores `bytes`
  // under `digest` (INVALID_ARGUMENT when they do not hash to it); a blob already present is
  // not sent again. GetBlob reassembles the chunks and verifies the digest: a missing chunk
  // or a mismatch is logged, the damaged blob is deleted so the next PutBlob restores it,
  // and it is reported as a miss (nullopt), never served.
  absl::Status PutBlob(std::string_view digest, std::string_view bytes);
  absl::StatusOr<std::optional<std::string>> GetBlob(std::string_view digest);

  // Compile results by compile key (cache/compile_key.h, the key kilnd's local cache uses).
  // Upsert; both blobs must already be stored (FAILED_PRECONDITION otherwise), so a result
  // is never visible before its bytes. A result whose blob later turned out corrupt is
  // still returned: the caller's GetBlob then misses, and it compiles again.
  absl::Status PutCompileResult(std::string_view key, const CompileResult& result);
  absl::StatusOr<std::optional<CompileResult>> GetCompileResult(std::string_view key);

  // Tuning records, as the opaque JSON lines of TuningDb::ExportJsonLines (canonical text,
  // so identical records are identical lines). PutTuningLines adds each non-blank line
  // once, deduplicated by its SHA-256, and returns how many were new. TuningLinesSince
  // returns, in order, up to `max_lines` lines added after `cursor` (0 for all) and the
  // cursor to poll with next, so a replica fetches only what it has not seen and imports it
  // with TuningDb::ImportJsonLines (which keeps the faster of two records). Writers are
  // serialized, so a line never appears behind a cursor already handed out.
  absl::StatusOr<int64_t> PutTuningLines(std::string_view json_lines);
  absl::StatusOr<TuningLines> TuningLinesSince(int64_t cursor, int64_t max_lines = 10000);

  // Compile leases, so the fleet compiles each key once: the replica holding a key's lease
  // compiles it while the others wait for its result. A lease expires after `ttl` unless
  // renewed, so the lease of a replica that was killed mid-compile lapses and another one
  // takes over. Expiry is judged by the database's clock (now()), never a replica's.
  // TryAcquireLease is true when `owner` now holds the lease: there was none, it had
  // expired, or `owner` already held it (which renews it). RenewLease is false when the
  // lease was lost (released, or expired and taken by another owner). ReleaseLease drops
  // the lease if `owner` holds it and does nothing otherwise. `ttl` must be positive.
  absl::StatusOr<bool> TryAcquireLease(std::string_view key, std::string_view owner,
                                       absl::Duration ttl);
  absl::StatusOr<bool> RenewLease(std::string_view key, std::string_view owner, absl::Duration ttl);
  absl::Status ReleaseLease(std::string_view key, std::string_view owner);

  // Which tenant sees which blob, as cache::Owners records it locally: a model uploaded
  // through one replica is its tenant's on every replica.
  absl::Status GrantOwner(std::string_view tenant, std::string_view digest);
  absl::StatusOr<bool> Owns(std::string_view tenant, std::string_view digest);

 private:
  explicit FleetTier(PGconn* conn) : conn_(conn) {}

  absl::Mutex mu_;
  PGconn* const conn_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace kiln::cache
