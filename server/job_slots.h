// Admission control for compile jobs (DESIGN.md: a bounded worker pool with a bounded queue).
// At most `max_running` jobs compile at once and at most `max_waiting` wait for a turn; a job
// beyond that is refused at once with RESOURCE_EXHAUSTED instead of piling up work.
#pragma once

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kiln::server {

class JobSlots {
 public:
  JobSlots(int max_running, int max_waiting)
      : max_running_(max_running), max_waiting_(max_waiting) {}

  // Holds one running slot until destroyed.
  class Lease {
   public:
    explicit Lease(JobSlots* slots) : slots_(slots) {}
    Lease(Lease&& other) noexcept : slots_(other.slots_) { other.slots_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease();

   private:
    JobSlots* slots_;
  };

  // Waits for a running slot. RESOURCE_EXHAUSTED when the queue is already full; while
  // waiting, `interrupted` is polled and its first non-OK status (the client went away or
  // its deadline passed) is returned.
  absl::StatusOr<Lease> Acquire(const std::function<absl::Status()>& interrupted);

  int running() const;
  int waiting() const;

 private:
  void Release();

  const int max_running_;
  const int max_waiting_;
  mutable absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kiln::server
