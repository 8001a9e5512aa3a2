// JobSlots: bounded running jobs, a bounded queue, and waiting that notices cancellation.
#include <atomic>
#include <optional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/job_slots.h"

namespace kiln::server {
namespace {

absl::Status NeverInterrupted() { return absl::OkStatus(); }

TEST(JobSlotsTest, FullQueueIsResourceExhausted) {
  JobSlots slots(/*max_running=*/1, /*max_waiting=*/0);
  absl::StatusOr<JobSlots::Lease> first = slots.Acquire(NeverInterrupted);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<JobSlots::Lease> second = slots.Acquire(NeverInterrupted);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(slots.running(), 1);
}

TEST(JobSlotsTest, ReleasingALeaseFreesItsSlot) {
  JobSlots slots(1, 0);
  { absl::StatusOr<JobSlots::Lease> lease = slots.Acquire(NeverInterrupted); }
  EXPECT_EQ(slots.running(), 0);
  EXPECT_TRUE(slots.Acquire(NeverInterrupted).ok());
}

TEST(JobSlotsTest, WaiterRunsWhenASlotFrees) {
  JobSlots slots(1, 1);
  std::optional<absl::StatusOr<JobSlots::Lease>> first = slots.Acquire(NeverInterrupted);
  ASSERT_TRUE(first->ok());
  std::atomic<bool> acquired = false;
  std::thread waiter([&] {
    absl::StatusOr<JobSlots::Lease> lease = slots.Acquire(NeverInterrupted);
    acquired = lease.ok();
  });
  while (slots.waiting() == 0) std::this_thread::yield();
  EXPECT_FALSE(acquired);
  first.reset();  // release
  waiter.join();
  EXPECT_TRUE(acquired);
  EXPECT_EQ(slots.waiting(), 0);
}

TEST(JobSlotsTest, CancelledWaiterGivesUpWithTheReason) {
  JobSlots slots(1, 1);
  absl::StatusOr<JobSlots::Lease> first = slots.Acquire(NeverInterrupted);
  ASSERT_TRUE(first.ok());
  absl::Notification cancel;
  std::thread canceller([&] {
    while (slots.waiting() == 0) std::this_thread::yield();
    cancel.Notify();
  });
  absl::StatusOr<JobSlots::Lease> second = slots.Acquire([&] {
    return cancel.HasBeenNotified() ? absl::DeadlineExceededError("deadline") : absl::OkStatus();
  });
  canceller.join();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(slots.waiting(), 0);
  EXPECT_EQ(slots.running(), 1);
}

}  // namespace
}  // namespace kiln::server
