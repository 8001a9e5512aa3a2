// Jobs through the service: admission control, submit and watch (resumable), single flight,
// cancellation and timeouts reaching the compiler, and a caller's departure ending its job.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// --- Admission control ---------------------------------------------------------------------

class BusyServerTest : public FakeCompilerTest {
 protected:
  void SetUp() override {
    ServiceOptions options = Options();
    options.max_running_jobs = 1;
    options.max_queued_jobs = 0;
    Start(options);
  }
};

TEST_F(BusyServerTest, FullQueueIsResourceExhausted) {
  const std::string digest = UploadModel(Bytes(100));
  absl::Notification compiling, release;
  fake_.during = [&] {
    compiling.Notify();
    release.WaitForNotification();
  };
  std::thread first([&] { EXPECT_TRUE(Compile(digest, {"x86_64"}).status.ok()); });
  compiling.WaitForNotification();
  // Another request: an identical one would join the first (see SingleFlight below).
  CompileOutcome second = Compile(digest, {"aarch64"});
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second.status.error_message(), HasSubstr("busy"));
  release.Notify();
  first.join();
  fake_.during = nullptr;
  EXPECT_TRUE(Compile(digest, {"aarch64"}).status.ok());  // a worker is free again
}

// A compile whose targets are all cached only reads the cache: it is answered at once, not
// queued behind compilations (nor refused when the queue is full).
TEST_F(BusyServerTest, CacheHitDoesNotWaitBehindCompiles) {
  const std::string digest = UploadModel(Bytes(100));
  ASSERT_TRUE(Compile(digest, {"x86_64"}).status.ok());
  absl::Notification compiling, release;
  fake_.during = [&] {
    if (!compiling.HasBeenNotified()) compiling.Notify();
    release.WaitForNotification();
  };
  std::thread busy([&] { EXPECT_TRUE(Compile(digest, {"aarch64"}).status.ok()); });
  compiling.WaitForNotification();
  CompileOutcome hit = Compile(digest, {"x86_64"});
  EXPECT_TRUE(hit.status.ok()) << hit.status.error_message();
  EXPECT_THAT(hit.OfKind(v1::CompileEvent::CACHE_HIT), SizeIs(1));
  release.Notify();
  busy.join();
  EXPECT_EQ(fake_.calls.load(), 2);
}

// --- Jobs ----------------------------------------------------------------------------------

class JobsTest : public FakeCompilerTest {
 protected:
  v1::Job Submit(const v1::CompileRequest& request, int64_t timeout_seconds = 0,
                 grpc::Status* status_out = nullptr) {
    v1::SubmitCompileRequest submit;
    *submit.mutable_compile() = request;
    submit.set_timeout_seconds(timeout_seconds);
    grpc::ClientContext context;
    SetDeadline(context);
    v1::Job job;
    grpc::Status status = stub_->SubmitCompile(&context, submit, &job);
    if (status_out != nullptr) {
      *status_out = status;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return job;
  }

  static v1::CompileRequest Request(const std::string& digest, const std::string& target) {
    v1::CompileRequest request;
    request.set_model_digest(digest);
    request.add_targets(target);
    return request;
  }

  // Reads WatchJob from `from`; stops after `max_events` when it is >= 0 (dropping the call).
  grpc::Status Watch(const std::string& id, int64_t from, std::vector<v1::JobEvent>* events,
                     int max_events = -1) {
    v1::WatchJobRequest request;
    request.set_job_id(id);
    request.set_from_event(from);
    grpc::ClientContext context;
    SetDeadline(context);
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->WatchJob(&context, request);
    v1::JobEvent event;
    while (max_events != 0 && reader->Read(&event)) {
      events->push_back(event);
      if (max_events > 0) --max_events;
    }
    if (max_events == 0) context.TryCancel();
    return reader->Finish();
  }

  grpc::Status Get(const std::string& id, v1::Job* job) {
    v1::GetJobRequest request;
    request.set_job_id(id);
    grpc::ClientContext context;
    SetDeadline(context);
    return stub_->GetJob(&context, request, job);
  }

  grpc::Status Cancel(const std::string& id, v1::Job* job) {
    v1::CancelJobRequest request;
    request.set_job_id(id);
    grpc::ClientContext context;
    SetDeadline(context);
    return stub_->CancelJob(&context, request, job);
  }

  // Blocks the fake compiler until the test releases it.
  void HoldCompiler() {
    fake_.during = [this] {
      if (!compiling_.HasBeenNotified()) compiling_.Notify();
      release_.WaitForNotification();
    };
  }
  absl::Notification compiling_, release_;
};

TEST_F(JobsTest, SubmittedJobRunsAndItsWatchEndsWithTheFinalState) {
  const std::string digest = UploadModel(Bytes(100));
  v1::Job job = Submit(Request(digest, "x86_64"));
  EXPECT_THAT(job.id(), ::testing::StartsWith("job-"));
  EXPECT_EQ(job.kind(), v1::Job::COMPILE);
  EXPECT_EQ(job.model_digest(), digest);
  EXPECT_FALSE(job.joined());
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(Watch(job.id(), 0, &events).ok());
  ASSERT_FALSE(events.empty());
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].index(), i);
  ASSERT_TRUE(events.back().has_finished());
  EXPECT_EQ(events.back().finished().state(), v1::Job::SUCCEEDED);
  bool done = false;
  for (const v1::JobEvent& event : events) {
    done |= event.has_compile() && event.compile().kind() == v1::CompileEvent::TARGET_DONE;
  }
  EXPECT_TRUE(done);

  v1::Job got;
  ASSERT_TRUE(Get(job.id(), &got).ok());
  EXPECT_EQ(got.state(), v1::Job::SUCCEEDED);
  EXPECT_EQ(got.events(), static_cast<int64_t>(events.size()));
  v1::ListJobsResponse list;
  grpc::ClientContext context;
  SetDeadline(context);
  ASSERT_TRUE(stub_->ListJobs(&context, {}, &list).ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).id(), job.id());
}

// A client that lost its stream watches again from the next index and misses nothing.
TEST_F(JobsTest, WatchResumesFromAnEventIndex) {
  const std::string digest = UploadModel(Bytes(100));
  HoldCompiler();
  v1::Job job = Submit(Request(digest, "x86_64"));
  compiling_.WaitForNotification();
  std::vector<v1::JobEvent> first_part;
  EXPECT_EQ(Watch(job.id(), 0, &first_part, 2).error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_THAT(first_part, SizeIs(2));
  release_.Notify();
  std::vector<v1::JobEvent> rest;
  ASSERT_TRUE(Watch(job.id(), 2, &rest).ok());
  std::vector<v1::JobEvent> whole;
  ASSERT_TRUE(Watch(job.id(), 0, &whole).ok());
  ASSERT_EQ(first_part.size() + rest.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    const v1::JobEvent& resumed = i < 2 ? first_part[i] : rest[i - 2];
    EXPECT_EQ(resumed.SerializeAsString(), whole[i].SerializeAsString()) << "event " << i;
  }
  EXPECT_EQ(fake_.calls.load(), 1);  // dropping the watch did not cancel a submitted job
}

TEST_F(JobsTest, IdenticalCompilesInFlightCompileOnce) {
  const std::string digest = UploadModel(Bytes(100));
  HoldCompiler();
  CompileOutcome first, second;
  std::thread a([&] { first = Compile(digest, {"x86_64"}); });
  compiling_.WaitForNotification();
  v1::Job joined = Submit(Request(digest, "x86_64"));
  EXPECT_TRUE(joined.joined());
  std::thread b([&] { second = Compile(digest, {"x86_64"}); });
  // b joins the running job; let it attach before the compiler finishes.
  absl::SleepFor(absl::Milliseconds(200));
  release_.Notify();
  a.join();
  b.join();
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(fake_.calls.load(), 1);
  ASSERT_THAT(second.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));
  EXPECT_EQ(second.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest(),
            first.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest());
}

TEST_F(JobsTest, CancelReachesTheCompilerAndEndsTheJobCancelled) {
  const std::string digest = UploadModel(Bytes(100));
  HoldCompiler();
  v1::Job job = Submit(Request(digest, "x86_64"));
  compiling_.WaitForNotification();
  v1::Job after_cancel;
  ASSERT_TRUE(Cancel(job.id(), &after_cancel).ok());
  release_.Notify();
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(Watch(job.id(), 0, &events).ok());
  EXPECT_EQ(events.back().finished().state(), v1::Job::CANCELLED);
  EXPECT_THAT(events.back().finished().error_message(), HasSubstr("cancelled"));
  std::vector<v1::CompileEvent> done;
  for (const v1::JobEvent& event : events) {
    if (event.compile().kind() == v1::CompileEvent::TARGET_DONE) done.push_back(event.compile());
  }
  EXPECT_THAT(done, SizeIs(0));
  ExpectStillServing();
}

TEST_F(JobsTest, JobTimeoutIsDeadlineExceeded) {
  const std::string digest = UploadModel(Bytes(100));
  fake_.during = [] { absl::SleepFor(absl::Milliseconds(1500)); };
  v1::Job job = Submit(Request(digest, "x86_64"), /*timeout_seconds=*/1);
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(Watch(job.id(), 0, &events).ok());
  EXPECT_EQ(events.back().finished().state(), v1::Job::FAILED);
  EXPECT_EQ(events.back().finished().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// The streaming Compile's caller leaving takes its job down with it: the compiler stops.
TEST_F(JobsTest, CompileCallerLeavingCancelsItsJob) {
  const std::string digest = UploadModel(Bytes(100));
  HoldCompiler();
  std::thread caller([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    auto reader = stub_->Compile(&context, Request(digest, "x86_64"));
    v1::CompileEvent event;
    while (reader->Read(&event)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  });
  compiling_.WaitForNotification();
  caller.join();
  // The handler notices the client's deadline at its next poll (every 100 ms).
  absl::SleepFor(absl::Milliseconds(600));
  release_.Notify();
  v1::ListJobsResponse list;
  for (int i = 0; i < 100; ++i) {
    list.Clear();
    grpc::ClientContext context;
    SetDeadline(context);
    ASSERT_TRUE(stub_->ListJobs(&context, {}, &list).ok());
    if (list.jobs_size() == 1 && list.jobs(0).finished_unix_ms() != 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(Watch(list.jobs(0).id(), 0, &events).ok());
  for (const v1::JobEvent& event : events) {
    EXPECT_NE(event.compile().kind(), v1::CompileEvent::TARGET_DONE);
  }
}

TEST_F(JobsTest, BadSubmissionsAreRefusedAtOnceNamingTheProblem) {
  grpc::Status status;
  Submit(Request("sha256:nope", "x86_64"), 0, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("sha256:nope"));
  const std::string missing = cache::Sha256Digest("never uploaded");
  Submit(Request(missing, "x86_64"), 0, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr(missing));
  const std::string digest = UploadModel(Bytes(100));
  Submit(Request(digest, "x86_64"), -5, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("timeout_seconds"));

  std::vector<v1::JobEvent> events;
  status = Watch("job-unknown", 0, &events);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("job-unknown"));
  v1::Job job = Submit(Request(digest, "x86_64"));
  ASSERT_TRUE(Watch(job.id(), 0, &events).ok());
  status = Watch(job.id(), static_cast<int64_t>(events.size()) + 1, &events);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  v1::Job ignored;
  EXPECT_EQ(Cancel("job-unknown", &ignored).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(fake_.calls.load(), 1);
  ExpectStillServing();
}

}  // namespace
}  // namespace kiln::server
