#include "server/fleet.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace kiln::server {

Fleet::Fleet(std::unique_ptr<cache::FleetTier> tier, std::string replica, FleetOptions options)
    : tier_(std::move(tier)), replica_(std::move(replica)), options_(options) {}

void Fleet::Warn(const char* what, const absl::Status& status) {
  spdlog::warn("fleet tier: {}: {}; going on with this replica's cache", what, status.ToString());
}

Fleet::Lease::Lease(Fleet& fleet, std::string key, std::string owner)
    : fleet_(fleet), key_(std::move(key)), owner_(std::move(owner)) {
  renewer_ = std::thread([this] {
    while (!done_.WaitForNotificationWithTimeout(fleet_.options_.lease_ttl / 3)) {
      absl::StatusOr<bool> held = fleet_.tier_->RenewLease(key_, owner_, fleet_.options_.lease_ttl);
      if (!held.ok()) {
        fleet_.Warn("renewing a compile lease", held.status());
      } else if (!*held) {
        // Another replica took over (we stalled past the ttl): both compile; same bytes.
        spdlog::warn("fleet tier: lost the compile lease of {}", key_);
        return;
      }
    }
  });
}

Fleet::Lease::~Lease() {
  done_.Notify();
  renewer_.join();
  if (absl::Status status = fleet_.tier_->ReleaseLease(key_, owner_); !status.ok()) {
    fleet_.Warn("releasing a compile lease", status);  // it lapses after the ttl anyway
  }
}

bool Fleet::PullBlob(const std::string& digest, cache::Store& local) {
  absl::StatusOr<bool> present = local.HasBlob(digest);
  if (present.ok() && *present) return true;
  absl::StatusOr<std::optional<std::string>> bytes = tier_->GetBlob(digest);
  if (!bytes.ok()) {
    Warn("reading a blob", bytes.status());
    return false;
  }
  if (!bytes->has_value()) return false;
  absl::StatusOr<std::string> stored = local.PutBlob(**bytes);
  if (!stored.ok()) {
    spdlog::warn("fleet tier: storing {} locally: {}", digest, stored.status().ToString());
    return false;
  }
  return true;
}

void Fleet::PushBlob(const std::string& digest, const std::string& bytes) {
  if (absl::Status status = tier_->PutBlob(digest, bytes); !status.ok()) {
    Warn("writing a blob", status);
  }
}

std::optional<cache::CompileResult> Fleet::PullResult(const cache::CompileKeyParts& parts,
                                                      cache::Store& local) {
  absl::StatusOr<std::optional<cache::CompileResult>> result = tier_->GetCompileResult(parts.Key());
  if (!result.ok()) {
    Warn("reading a compile result", result.status());
    return std::nullopt;
  }
  if (!result->has_value()) return std::nullopt;
  // Blobs first: the local result must never be visible before its bytes.
  for (const std::string& digest : {(*result)->artifact_digest, (*result)->manifest_digest}) {
    if (!PullBlob(digest, local)) return std::nullopt;
  }
  if (absl::Status status = local.PutCompileResult(parts, **result); !status.ok()) {
    spdlog::warn("fleet tier: storing a compile result locally: {}", status.ToString());
    return std::nullopt;
  }
  return **result;
}

void Fleet::PushResult(const std::string& key, const cache::CompileResult& result,
                       cache::Store& local) {
  for (const std::string& digest : {result.artifact_digest, result.manifest_digest}) {
    absl::StatusOr<std::optional<std::string>> bytes = local.GetBlob(digest);
    if (!bytes.ok() || !bytes->has_value()) return;  // evicted or corrupt meanwhile: skip
    PushBlob(digest, **bytes);
  }
  if (absl::Status status = tier_->PutCompileResult(key, result); !status.ok()) {
    Warn("writing a compile result", status);
  }
}

std::unique_ptr<Fleet::Lease> Fleet::TryLease(const std::string& key, bool* fleet_down) {
  std::string owner = absl::StrCat(replica_, "/", next_owner_.fetch_add(1));
  absl::StatusOr<bool> acquired = tier_->TryAcquireLease(key, owner, options_.lease_ttl);
  *fleet_down = !acquired.ok();
  if (!acquired.ok()) {
    Warn("taking a compile lease", acquired.status());
    return nullptr;
  }
  return *acquired ? std::make_unique<Lease>(*this, key, std::move(owner)) : nullptr;
}

void Fleet::PullTuning(cache::TuningDb& db) {
  absl::MutexLock lock(&tuning_mu_);
  for (;;) {
    absl::StatusOr<cache::TuningLines> page = tier_->TuningLinesSince(tuning_cursor_);
    if (!page.ok()) return Warn("reading tuning records", page.status());
    if (page->lines == 0) return;
    absl::StatusOr<int64_t> added = db.ImportJsonLines(page->text);
    // Records of another compiler version import fine and are never used; a line this
    // version cannot read is skipped with the page, not retried forever.
    if (!added.ok()) Warn("importing tuning records", added.status());
    tuning_cursor_ = page->next_cursor;
  }
}

void Fleet::PushTuning(cache::TuningDb& db) {
  absl::StatusOr<std::string> lines = db.ExportJsonLines();
  if (!lines.ok()) return Warn("exporting tuning records", lines.status());
  absl::StatusOr<int64_t> added = tier_->PutTuningLines(*lines);
  if (!added.ok()) return Warn("writing tuning records", added.status());
  spdlog::info("fleet tier: {} new tuning records shared", *added);
}

void Fleet::GrantOwner(const std::string& tenant, const std::string& digest) {
  if (absl::Status status = tier_->GrantOwner(tenant, digest); !status.ok()) {
    Warn("recording an owner", status);
  }
}

bool Fleet::Owns(const std::string& tenant, const std::string& digest) {
  absl::StatusOr<bool> owns = tier_->Owns(tenant, digest);
  if (!owns.ok()) {
    Warn("looking up an owner", owns.status());
    return false;
  }
  return *owns;
}

}  // namespace kiln::server
