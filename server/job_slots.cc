#include "server/job_slots.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace kiln::server {
namespace {
// How often a waiting job looks at its client; cancellation has no wake-up of its own.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
}  // namespace

JobSlots::Lease::~Lease() {
  if (slots_ != nullptr) slots_->Release();
}

absl::StatusOr<JobSlots::Lease> JobSlots::Acquire(
    const std::function<absl::Status()>& interrupted) {
  absl::MutexLock lock(&mu_);
  if (running_ < max_running_) {
    ++running_;
    return Lease(this);
  }
  if (waiting_ >= max_waiting_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: ", running_, " compile jobs running and ", waiting_, " queued; retry later"));
  }
  ++waiting_;
  auto slot_free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ < max_running_; };
  absl::Status status;
  while (!mu_.AwaitWithTimeout(absl::Condition(&slot_free), kPollInterval)) {
    status = interrupted();
    if (!status.ok()) break;
  }
  --waiting_;
  if (!status.ok()) return status;
  ++running_;
  return Lease(this);
}

void JobSlots::Release() {
  absl::MutexLock lock(&mu_);
  --running_;
}

int JobSlots::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int JobSlots::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

}  // namespace kiln::server
