// `kiln cache`: the compile cache's counts and sizes, and eviction; of a local cache folder
// or of kilnd's.
#include <chrono>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "client/commands.h"
#include "client/remote.h"

namespace kiln::client {
namespace {

void PrintStats(const v1::CacheStats& stats, std::ostream& out) {
  out << "blobs\t" << stats.blobs() << " (" << stats.blob_bytes() << " bytes)\n"
      << "models\t" << stats.models() << "\n"
      << "artifacts\t" << stats.artifacts() << "\n"
      << "compile results\t" << stats.compile_results() << "\n"
      << "hits\t" << stats.hits() << "\n"
      << "misses\t" << stats.misses() << "\n"
      << "evictions\t" << stats.evictions() << "\n"
      << "quarantined\t" << stats.quarantined() << " (" << stats.quarantined_bytes()
      << " bytes kept)\n"
      << "tuning records\t" << stats.tuning_records() << "\n"
      << "size cap\t" << (stats.max_bytes() == 0 ? "none" : absl::StrCat(stats.max_bytes()))
      << "\n";
}

v1::CacheStats ToProto(const cache::CacheStats& stats) {
  v1::CacheStats proto;
  proto.set_blobs(stats.blobs);
  proto.set_blob_bytes(stats.blob_bytes);
  proto.set_models(stats.models);
  proto.set_artifacts(stats.artifacts);
  proto.set_compile_results(stats.compile_results);
  proto.set_quarantined(stats.quarantined);
  proto.set_quarantined_bytes(stats.quarantine_bytes);
  proto.set_evictions(stats.evictions);
  proto.set_hits(stats.hits);
  proto.set_misses(stats.misses);
  proto.set_max_bytes(stats.max_bytes);
  return proto;
}

absl::StatusOr<std::unique_ptr<cache::Store>> OpenLocal(const std::string& cache_dir) {
  const std::filesystem::path db = std::filesystem::path(cache_dir) / "kiln.db";
  if (!std::filesystem::exists(db)) {
    return absl::NotFoundError(absl::StrCat("no cache at ", db.string()));
  }
  return cache::Store::Open(db.string());
}

absl::Status LocalCache(const CacheArgs& args, Console console) {
  absl::StatusOr<std::unique_ptr<cache::Store>> store = OpenLocal(args.cache_dir);
  if (!store.ok()) return store.status();
  if (args.action == "stats") {
    absl::StatusOr<cache::CacheStats> stats = (*store)->Stats();
    if (!stats.ok()) return stats.status();
    v1::CacheStats proto = ToProto(*stats);
    absl::StatusOr<std::unique_ptr<cache::TuningDb>> tuning = OpenTuningDb(args.cache_dir, false);
    if (tuning.ok()) {
      absl::StatusOr<cache::TuningStats> records = (*tuning)->Stats();
      if (records.ok()) proto.set_tuning_records(records->records);
    }
    PrintStats(proto, console.out);
    return absl::OkStatus();
  }
  cache::EvictRequest request;
  if (args.all_artifacts) {
    request.scope = cache::EvictRequest::Scope::kAllArtifacts;
  } else if (!args.artifact_digest.empty()) {
    request.scope = cache::EvictRequest::Scope::kArtifact;
    request.artifact_digest = args.artifact_digest;
  } else {
    request.scope = cache::EvictRequest::Scope::kToBytes;
    request.to_bytes = static_cast<uint64_t>(args.to_bytes);
  }
  absl::StatusOr<cache::EvictResult> evicted = (*store)->Evict(request);
  if (!evicted.ok()) return evicted.status();
  console.out << "evicted " << evicted->artifacts << " artifacts, " << evicted->bytes << " bytes\n";
  return absl::OkStatus();
}

absl::Status RemoteCache(const CacheArgs& args, Console console) {
  absl::StatusOr<std::unique_ptr<RemoteKiln>> remote =
      RemoteKiln::Connect(args.server, std::chrono::seconds(args.timeout_s));
  if (!remote.ok()) return remote.status();
  if (args.action == "stats") {
    absl::StatusOr<v1::CacheStats> stats = (*remote)->GetCacheStats();
    if (!stats.ok()) return stats.status();
    PrintStats(*stats, console.out);
    return absl::OkStatus();
  }
  v1::EvictCacheRequest request;
  if (args.all_artifacts) {
    request.set_all_artifacts(true);
  } else if (!args.artifact_digest.empty()) {
    request.set_artifact_digest(args.artifact_digest);
  } else {
    request.set_to_bytes(static_cast<uint64_t>(args.to_bytes));
  }
  absl::StatusOr<v1::EvictCacheResponse> evicted = (*remote)->EvictCache(request);
  if (!evicted.ok()) return evicted.status();
  console.out << "evicted " << evicted->artifacts() << " artifacts, " << evicted->bytes()
              << " bytes\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status Cache(const CacheArgs& args, Console console) {
  return args.server.empty() ? LocalCache(args, console) : RemoteCache(args, console);
}

}  // namespace kiln::client
