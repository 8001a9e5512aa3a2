// Which tenant may see which blob: models belong to the tenants that uploaded them and
// artifacts to those whose compiles produced them. Blobs stay content-addressed and shared
// (two tenants uploading the same bytes store them once); only visibility is per tenant.
// A table in the cache's kiln.db beside the store's; its rows outlive an evicted blob, which
// is then simply absent.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

struct sqlite3;

namespace kiln::cache {

class Owners {
 public:
  static absl::StatusOr<std::unique_ptr<Owners>> Open(const std::string& sqlite_path);
  ~Owners();
  Owners(const Owners&) = delete;
  Owners& operator=(const Owners&) = delete;

  // Idempotent.
  absl::Status Grant(std::string_view tenant, std::string_view digest);
  absl::StatusOr<bool> Owns(std::string_view tenant, std::string_view digest);

 private:
  explicit Owners(sqlite3* db) : db_(db) {}

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace kiln::cache
