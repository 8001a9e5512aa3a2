// The fleet tier as one replica of kilnd uses it: a PostgreSQL database (cache::FleetTier)
// behind the replica's own SQLite cache. Reads fall through to it and copy what they find
// into the local cache; writes go through to it; a compile lease makes the fleet compile each
// key once, and lapses when its holder dies. The shared tier is a help, not a dependency: when
// it is unreachable the replica logs it and serves from its own cache.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cache/compile_key.h"
#include "cache/fleet_tier.h"
#include "cache/store.h"
#include "cache/tuning_db.h"

namespace kiln::server {

struct FleetOptions {
  // A lease not renewed for this long is free for another replica: how long the fleet waits
  // for a replica that died mid-compile. Renewed every third of it while compiling.
  absl::Duration lease_ttl = absl::Seconds(30);
  // How often a replica waiting for another one's compile looks for its result.
  absl::Duration poll_interval = absl::Milliseconds(200);
};

class Fleet {
 public:
  // `replica` names this kilnd in leases (unique per process).
  Fleet(std::unique_ptr<cache::FleetTier> tier, std::string replica, FleetOptions options = {});

  // Holds a compile lease and renews it until destroyed, then releases it.
  class Lease {
   public:
    Lease(Fleet& fleet, std::string key, std::string owner);
    ~Lease();

   private:
    Fleet& fleet_;
    const std::string key_;
    const std::string owner_;
    absl::Notification done_;
    std::thread renewer_;
  };

  // The blob `digest` copied into `local` from the fleet when only the fleet has it; true
  // when `local` has it now.
  bool PullBlob(const std::string& digest, cache::Store& local);
  void PushBlob(const std::string& digest, const std::string& bytes);

  // The fleet's result for the key, with both blobs copied into `local` under `parts`.
  std::optional<cache::CompileResult> PullResult(const cache::CompileKeyParts& parts,
                                                 cache::Store& local);
  // The result and its two blobs (read from `local`) written to the fleet.
  void PushResult(const std::string& key, const cache::CompileResult& result, cache::Store& local);

  // The lease on `key` for a new owner; null while another owner holds it. Also null
  // (compile without a lease) when the fleet cannot be reached.
  std::unique_ptr<Lease> TryLease(const std::string& key, bool* fleet_down);
  absl::Duration poll_interval() const { return options_.poll_interval; }

  // Tuning records other replicas added since the last pull, into `db`; this replica's
  // records out to the fleet.
  void PullTuning(cache::TuningDb& db);
  void PushTuning(cache::TuningDb& db);

  void GrantOwner(const std::string& tenant, const std::string& digest);
  bool Owns(const std::string& tenant, const std::string& digest);

 private:
  void Warn(const char* what, const absl::Status& status);

  const std::unique_ptr<cache::FleetTier> tier_;
  const std::string replica_;
  const FleetOptions options_;
  std::atomic<int64_t> next_owner_{1};
  absl::Mutex tuning_mu_;  // one pull at a time, so the cursor only moves forward
  int64_t tuning_cursor_ ABSL_GUARDED_BY(tuning_mu_) = 0;
};

}  // namespace kiln::server
