// JobManager: the bounded pool and queue, single flight, cancellation, deadlines, the event
// log that watchers resume from, and draining. Work here is plain closures; the service tests
// run real compile and tune jobs through it.
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/job_manager.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

v1::Job Compile(const std::string& model) {
  v1::Job description;
  description.set_kind(v1::Job::COMPILE);
  description.set_model_digest(model);
  return description;
}

v1::JobEvent Info(const std::string& message) {
  v1::JobEvent event;
  event.mutable_compile()->set_message(message);
  return event;
}

// Waits for the job's end and returns its whole log.
std::vector<v1::JobEvent> LogOf(const Job& job) {
  Job::Events events;
  while (!events.finished) events = job.WaitForEvents(0, absl::Seconds(30));
  return events.events;
}

// Work that runs until `release`, noting that it started; polls Interrupted like the compiler.
struct Blocker {
  absl::Notification started;
  absl::Notification release;
  JobManager::Work Work() {
    return [this](Job& job) {
      if (!started.HasBeenNotified()) started.Notify();
      while (!release.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
        if (absl::Status why = job.Interrupted(); !why.ok()) return why;
      }
      return absl::OkStatus();
    };
  }
};

TEST(JobManagerTest, JobRunsAndItsLogEndsWithTheFinalState) {
  JobManager jobs({.workers = 2});
  auto submitted = jobs.Submit(Compile("m"), "", absl::InfiniteDuration(), [](Job& job) {
    job.Log(Info("first"));
    job.Log(Info("second"));
    return absl::OkStatus();
  });
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_FALSE(submitted->joined);
  std::vector<v1::JobEvent> log = LogOf(*submitted->job);
  ASSERT_THAT(log, SizeIs(3));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(log[i].index(), i);
  EXPECT_EQ(log[1].compile().message(), "second");
  ASSERT_TRUE(log[2].has_finished());
  EXPECT_EQ(log[2].finished().state(), v1::Job::SUCCEEDED);
  EXPECT_EQ(log[2].finished().model_digest(), "m");
  EXPECT_EQ(log[2].finished().events(), 3);
  EXPECT_GT(log[2].finished().finished_unix_ms(), 0);
  EXPECT_EQ(submitted->job->Info().state(), v1::Job::SUCCEEDED);
}

TEST(JobManagerTest, WatchingFromAnIndexResumesThere) {
  JobManager jobs({.workers = 1});
  auto submitted = jobs.Submit(Compile("m"), "", absl::InfiniteDuration(), [](Job& job) {
    for (int i = 0; i < 5; ++i) job.Log(Info(std::to_string(i)));
    return absl::OkStatus();
  });
  ASSERT_TRUE(submitted.ok());
  LogOf(*submitted->job);
  Job::Events rest = submitted->job->WaitForEvents(3, absl::Seconds(1));
  EXPECT_TRUE(rest.finished);
  ASSERT_THAT(rest.events, SizeIs(3));  // events 3 and 4, then the final one
  EXPECT_EQ(rest.events[0].index(), 3);
  EXPECT_EQ(rest.events[0].compile().message(), "3");
  EXPECT_TRUE(rest.events[2].has_finished());
}

TEST(JobManagerTest, FailedWorkIsAFailedJobWithItsStatus) {
  JobManager jobs({.workers = 1});
  auto submitted = jobs.Submit(Compile("m"), "", absl::InfiniteDuration(),
                               [](Job&) { return absl::InvalidArgumentError("node 'x': bad"); });
  ASSERT_TRUE(submitted.ok());
  v1::Job final_state = LogOf(*submitted->job).back().finished();
  EXPECT_EQ(final_state.state(), v1::Job::FAILED);
  EXPECT_EQ(final_state.error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(final_state.error_message(), "node 'x': bad");
}

TEST(JobManagerTest, ExceptionIsInternalAndTheWorkersGoOn) {
  JobManager jobs({.workers = 1});
  auto thrower = jobs.Submit(Compile("m"), "", absl::InfiniteDuration(),
                             [](Job&) -> absl::Status { throw std::runtime_error("boom"); });
  ASSERT_TRUE(thrower.ok());
  EXPECT_THAT(LogOf(*thrower->job).back().finished().error_message(), HasSubstr("boom"));
  auto next = jobs.Submit(Compile("m"), "", absl::InfiniteDuration(),
                          [](Job&) { return absl::OkStatus(); });
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(LogOf(*next->job).back().finished().state(), v1::Job::SUCCEEDED);
}

TEST(JobManagerTest, FullQueueIsResourceExhausted) {
  JobManager jobs({.workers = 1, .max_queued = 1});
  Blocker blocker;
  auto running = jobs.Submit(Compile("a"), "", absl::InfiniteDuration(), blocker.Work());
  ASSERT_TRUE(running.ok());
  blocker.started.WaitForNotification();
  auto queued = jobs.Submit(Compile("b"), "", absl::InfiniteDuration(),
                            [](Job&) { return absl::OkStatus(); });
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->job->Info().state(), v1::Job::QUEUED);
  EXPECT_EQ(jobs.running(), 1);
  EXPECT_EQ(jobs.queued(), 1);
  auto refused = jobs.Submit(Compile("c"), "", absl::InfiniteDuration(),
                             [](Job&) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("1 jobs running and 1 queued"));
  blocker.release.Notify();
  EXPECT_EQ(LogOf(*queued->job).back().finished().state(), v1::Job::SUCCEEDED);
}

// RunNow's jobs run on their callers' threads: they take neither a worker nor a queue slot.
TEST(JobManagerTest, RunNowRunsAtOnceWithoutTakingAWorker) {
  JobManager jobs({.workers = 1, .max_queued = 0});
  Blocker inline_work;
  std::thread caller([&] {
    auto job = jobs.RunNow(Compile("hit"), inline_work.Work());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ((*job)->Info().state(), v1::Job::SUCCEEDED);
  });
  inline_work.started.WaitForNotification();
  EXPECT_EQ(jobs.running(), 1);
  auto queued = jobs.Submit(Compile("miss"), "", absl::InfiniteDuration(),
                            [](Job&) { return absl::OkStatus(); });
  ASSERT_TRUE(queued.ok()) << queued.status();  // the worker is free
  EXPECT_EQ(LogOf(*queued->job).back().finished().state(), v1::Job::SUCCEEDED);
  inline_work.release.Notify();
  caller.join();
  EXPECT_EQ(jobs.running(), 0);
}

TEST(JobManagerTest, IdenticalRequestInFlightJoinsAndRunsOnce) {
  JobManager jobs({.workers = 2});
  Blocker blocker;
  std::atomic<int> runs{0};
  auto work = [&](Job& job) {
    ++runs;
    return blocker.Work()(job);
  };
  auto first = jobs.Submit(Compile("m"), "key", absl::InfiniteDuration(), work);
  auto second = jobs.Submit(Compile("m"), "key", absl::InfiniteDuration(), work);
  auto other = jobs.Submit(Compile("m"), "other key", absl::InfiniteDuration(),
                           [](Job&) { return absl::OkStatus(); });
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  EXPECT_TRUE(second->joined);
  EXPECT_EQ(second->job, first->job);
  EXPECT_NE(other->job, first->job);
  blocker.release.Notify();
  LogOf(*first->job);
  EXPECT_EQ(runs.load(), 1);
  // Finished: the same request is a new job.
  auto again = jobs.Submit(Compile("m"), "key", absl::InfiniteDuration(), work);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->joined);
  LogOf(*again->job);
  EXPECT_EQ(runs.load(), 2);
}

TEST(JobManagerTest, IdenticalRequestDoesNotJoinACancelledJob) {
  JobManager jobs({.workers = 2});
  Blocker blocker;  // never released: it ends when cancelled
  auto first = jobs.Submit(Compile("m"), "key", absl::InfiniteDuration(), blocker.Work());
  ASSERT_TRUE(first.ok());
  blocker.started.WaitForNotification();
  first->job->Cancel(absl::CancelledError("every caller left"));
  auto second = jobs.Submit(Compile("m"), "key", absl::InfiniteDuration(),
                            [](Job&) { return absl::OkStatus(); });
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->joined);
  EXPECT_EQ(LogOf(*second->job).back().finished().state(), v1::Job::SUCCEEDED);
  EXPECT_EQ(LogOf(*first->job).back().finished().state(), v1::Job::CANCELLED);
}

TEST(JobManagerTest, CancelledQueuedJobNeverRuns) {
  JobManager jobs({.workers = 1});
  Blocker blocker;
  auto running = jobs.Submit(Compile("a"), "", absl::InfiniteDuration(), blocker.Work());
  std::atomic<bool> ran{false};
  auto queued = jobs.Submit(Compile("b"), "", absl::InfiniteDuration(), [&](Job&) {
    ran = true;
    return absl::OkStatus();
  });
  ASSERT_TRUE(running.ok() && queued.ok());
  queued->job->Cancel(absl::CancelledError("by the test"));
  blocker.release.Notify();
  v1::Job final_state = LogOf(*queued->job).back().finished();
  EXPECT_EQ(final_state.state(), v1::Job::CANCELLED);
  EXPECT_EQ(final_state.started_unix_ms(), 0);
  EXPECT_FALSE(ran);
}

TEST(JobManagerTest, CancelReachesRunningWork) {
  JobManager jobs({.workers = 1});
  Blocker blocker;  // never released: only the cancel ends it
  auto running = jobs.Submit(Compile("a"), "", absl::InfiniteDuration(), blocker.Work());
  ASSERT_TRUE(running.ok());
  blocker.started.WaitForNotification();
  running->job->Cancel(absl::CancelledError("by the test"));
  v1::Job final_state = LogOf(*running->job).back().finished();
  EXPECT_EQ(final_state.state(), v1::Job::CANCELLED);
  EXPECT_EQ(final_state.error_message(), "by the test");
  running->job->Cancel(absl::CancelledError("again"));  // finished: no effect
  EXPECT_EQ(running->job->Info().error_message(), "by the test");
}

TEST(JobManagerTest, TimeoutEndsTheJobWithDeadlineExceeded) {
  JobManager jobs({.workers = 1});
  Blocker blocker;
  auto running = jobs.Submit(Compile("a"), "", absl::Milliseconds(50), blocker.Work());
  ASSERT_TRUE(running.ok());
  v1::Job final_state = LogOf(*running->job).back().finished();
  EXPECT_EQ(final_state.state(), v1::Job::FAILED);
  EXPECT_EQ(final_state.error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
}

TEST(JobManagerTest, ServerLimitCapsTheRequestsTimeout) {
  JobManager jobs({.workers = 1, .max_duration = absl::Milliseconds(50)});
  Blocker blocker;
  auto running = jobs.Submit(Compile("a"), "", absl::InfiniteDuration(), blocker.Work());
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(LogOf(*running->job).back().finished().error_code(),
            static_cast<int>(absl::StatusCode::kDeadlineExceeded));
}

TEST(JobManagerTest, LastWatcherLeavingCancelsUnlessSubmittedOnItsOwn) {
  JobManager jobs({.workers = 2});
  Blocker watched, kept;
  auto a = jobs.Submit(Compile("a"), "", absl::InfiniteDuration(), watched.Work());
  auto b = jobs.Submit(Compile("b"), "", absl::InfiniteDuration(), kept.Work());
  ASSERT_TRUE(a.ok() && b.ok());
  b->job->KeepWithoutWatchers();
  for (Job* job : {a->job.get(), b->job.get()}) {
    job->Attach();
    job->Attach();
    job->Detach(absl::CancelledError("client left"));
    EXPECT_TRUE(job->Interrupted().ok());  // one watcher is still there
    job->Detach(absl::DeadlineExceededError("client deadline"));
  }
  EXPECT_EQ(LogOf(*a->job).back().finished().error_code(),
            static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(b->job->Interrupted().ok());
  kept.release.Notify();
  EXPECT_EQ(LogOf(*b->job).back().finished().state(), v1::Job::SUCCEEDED);
}

TEST(JobManagerTest, FinishedJobsBeyondTheLimitAreForgotten) {
  JobManager jobs({.workers = 1, .max_finished = 2});
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto job = jobs.Submit(Compile("m"), "", absl::InfiniteDuration(),
                           [](Job&) { return absl::OkStatus(); });
    ASSERT_TRUE(job.ok());
    LogOf(*job->job);
    ids.push_back(job->job->id());
  }
  EXPECT_TRUE(absl::IsNotFound(jobs.Find(ids[0]).status()));
  EXPECT_THAT(jobs.Find(ids[0]).status().message(), HasSubstr(ids[0]));
  EXPECT_TRUE(jobs.Find(ids[2]).ok());
  EXPECT_THAT(jobs.List(), SizeIs(2));
}

TEST(JobManagerTest, ListShowsUnfinishedFirst) {
  JobManager jobs({.workers = 1});
  auto done = jobs.Submit(Compile("done"), "", absl::InfiniteDuration(),
                          [](Job&) { return absl::OkStatus(); });
  ASSERT_TRUE(done.ok());
  LogOf(*done->job);
  Blocker blocker;
  auto running = jobs.Submit(Compile("running"), "", absl::InfiniteDuration(), blocker.Work());
  ASSERT_TRUE(running.ok());
  blocker.started.WaitForNotification();
  std::vector<v1::Job> list = jobs.List();
  ASSERT_THAT(list, SizeIs(2));
  EXPECT_EQ(list[0].model_digest(), "running");
  EXPECT_EQ(list[0].state(), v1::Job::RUNNING);
  EXPECT_EQ(list[1].model_digest(), "done");
  blocker.release.Notify();
}

TEST(JobManagerTest, ShutdownLetsJobsFinishWithinTheGrace) {
  JobManager jobs({.workers = 1});
  Blocker blocker;
  auto running = jobs.Submit(Compile("a"), "", absl::InfiniteDuration(), blocker.Work());
  ASSERT_TRUE(running.ok());
  blocker.started.WaitForNotification();
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(50));
    blocker.release.Notify();
  });
  jobs.Shutdown(absl::Seconds(30));
  release.join();
  EXPECT_EQ(running->job->Info().state(), v1::Job::SUCCEEDED);
  auto refused = jobs.Submit(Compile("b"), "", absl::InfiniteDuration(),
                             [](Job&) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
}

TEST(JobManagerTest, ShutdownCancelsWhatOutlastsTheGrace) {
  JobManager jobs({.workers = 1});
  Blocker blocker;  // never released
  auto running = jobs.Submit(Compile("a"), "", absl::InfiniteDuration(), blocker.Work());
  auto queued = jobs.Submit(Compile("b"), "", absl::InfiniteDuration(),
                            [](Job&) { return absl::OkStatus(); });
  ASSERT_TRUE(running.ok() && queued.ok());
  blocker.started.WaitForNotification();
  jobs.Shutdown(absl::Milliseconds(20));
  EXPECT_EQ(running->job->Info().state(), v1::Job::CANCELLED);
  EXPECT_EQ(queued->job->Info().state(), v1::Job::CANCELLED);
  EXPECT_THAT(running->job->Info().error_message(), HasSubstr("shutting down"));
}

}  // namespace
}  // namespace kiln::server
