#include "server/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/catch_exceptions.h"
#include "server/json_log.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

v1::Job::State FinalState(const absl::Status& outcome) {
  if (outcome.ok()) return v1::Job::SUCCEEDED;
  // A job stopped from outside is cancelled; one that ran out of time or failed is failed.
  if (absl::IsCancelled(outcome) || absl::IsUnavailable(outcome)) return v1::Job::CANCELLED;
  return v1::Job::FAILED;
}

}  // namespace

Job::Job(std::string id, v1::Job description, absl::Time deadline)
    : id_(std::move(id)), deadline_(deadline), info_(std::move(description)) {
  info_.set_id(id_);
  info_.set_state(v1::Job::QUEUED);
  info_.set_created_unix_ms(NowMs());
}

absl::Status Job::Interrupted() const {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_.ok()) return cancelled_;
  }
  if (absl::Now() >= deadline_) {
    return absl::DeadlineExceededError(absl::StrCat("job ", id_, " ran past its deadline"));
  }
  return absl::OkStatus();
}

void Job::Log(v1::JobEvent event) {
  absl::MutexLock lock(&mu_);
  event.set_index(static_cast<int64_t>(events_.size()));
  events_.push_back(std::move(event));
  info_.set_events(static_cast<int64_t>(events_.size()));
}

void Job::Cancel(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (outcome_.has_value() || !cancelled_.ok()) return;
  cancelled_ = std::move(why);
}

void Job::Attach() {
  absl::MutexLock lock(&mu_);
  ++watchers_;
}

void Job::Detach(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  --watchers_;
  if (why.ok() || watchers_ > 0 || keep_without_watchers_) return;
  if (outcome_.has_value() || !cancelled_.ok()) return;
  cancelled_ = why;
}

void Job::KeepWithoutWatchers() {
  absl::MutexLock lock(&mu_);
  keep_without_watchers_ = true;
}

v1::Job Job::Info() const {
  absl::MutexLock lock(&mu_);
  return info_;
}

std::optional<absl::Status> Job::Outcome() const {
  absl::MutexLock lock(&mu_);
  return outcome_;
}

Job::Events Job::WaitForEvents(int64_t from, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [this, from]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return outcome_.has_value() || static_cast<int64_t>(events_.size()) > from;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  Events result;
  result.finished = outcome_.has_value();
  for (size_t i = std::max<int64_t>(from, 0); i < events_.size(); ++i) {
    result.events.push_back(events_[i]);
  }
  return result;
}

void Job::Start() {
  absl::MutexLock lock(&mu_);
  info_.set_state(v1::Job::RUNNING);
  info_.set_started_unix_ms(NowMs());
}

// The final event carries the job as it ended, so a watcher needs nothing else.
void Job::Finish(const absl::Status& outcome) {
  absl::MutexLock lock(&mu_);
  info_.set_state(FinalState(outcome));
  info_.set_error_code(static_cast<int32_t>(outcome.code()));  // same numbering as gRPC
  info_.set_error_message(std::string(outcome.message()));
  info_.set_finished_unix_ms(NowMs());
  info_.set_events(static_cast<int64_t>(events_.size()) + 1);
  v1::JobEvent last;
  last.set_index(static_cast<int64_t>(events_.size()));
  *last.mutable_finished() = info_;
  events_.push_back(std::move(last));
  outcome_ = outcome;
}

JobManager::JobManager(JobLimits limits)
    : limits_(limits),
      id_prefix_(absl::StrFormat("%08x", absl::Uniform<uint32_t>(absl::BitGen()))) {
  for (int i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

JobManager::~JobManager() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<JobManager::Submitted> JobManager::Submit(v1::Job description,
                                                         const std::string& dedup_key,
                                                         absl::Duration timeout, Work work) {
  absl::MutexLock lock(&mu_);
  if (!accepting_) return absl::UnavailableError("server shutting down; submit to another");
  if (!dedup_key.empty()) {
    // Not a job already told to stop: its outcome would not be this request's.
    auto same = in_flight_.find(dedup_key);
    if (same != in_flight_.end() && same->second->Interrupted().ok()) {
      return Submitted{same->second, /*joined=*/true};
    }
  }
  const int busy = running_ + static_cast<int>(queue_.size());
  if (busy >= limits_.workers + limits_.max_queued) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: ", running_, " jobs running and ", queue_.size(), " queued; retry later"));
  }
  const absl::Duration limit = std::min(timeout, limits_.max_duration);
  auto job = std::make_shared<Job>(NewId(), std::move(description), absl::Now() + limit);
  jobs_[job->id()] = job;
  if (!dedup_key.empty()) in_flight_[dedup_key] = job;
  queue_.push_back({job, std::move(work), dedup_key});
  return Submitted{job, /*joined=*/false};
}

std::string JobManager::NewId() { return absl::StrCat("job-", id_prefix_, "-", next_id_++); }

absl::StatusOr<std::shared_ptr<Job>> JobManager::Find(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto found = jobs_.find(id);
  if (found == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("job \"", id, "\" not found"));
  }
  return found->second;
}

std::vector<v1::Job> JobManager::List() const {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : jobs_) jobs.push_back(job);
  }
  std::vector<v1::Job> infos;
  for (const std::shared_ptr<Job>& job : jobs) infos.push_back(job->Info());
  auto finished = [](const v1::Job& job) { return job.finished_unix_ms() != 0; };
  std::sort(infos.begin(), infos.end(), [&](const v1::Job& a, const v1::Job& b) {
    if (finished(a) != finished(b)) return !finished(a);
    return a.created_unix_ms() != b.created_unix_ms() ? a.created_unix_ms() < b.created_unix_ms()
                                                      : a.id() < b.id();
  });
  return infos;
}

int JobManager::running() const {
  absl::MutexLock lock(&mu_);
  return running_ + running_now_;
}

int JobManager::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

void JobManager::WorkerLoop() {
  while (true) {
    Queued next;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&has_work));
      if (queue_.empty()) return;  // stopping, and nothing left to finish
      next = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    Execute(next, /*on_worker=*/true);
  }
}

// Runs the job and forgets it; it was counted in running_ (on a worker) or running_now_.
void JobManager::Execute(const Queued& next, bool on_worker) {
  // A job cancelled or out of time while it waited ends without running.
  absl::Status outcome = next.job->Interrupted();
  if (outcome.ok()) {
    next.job->Start();
    ScopedLogContext log_context(next.job->id(), next.job->Info().tenant());
    outcome = CatchExceptions("job", [&] { return next.work(*next.job); });
  }
  {
    // Before Finish: whoever sees the job finished may submit the same request again and
    // must get a new job, not this one.
    absl::MutexLock lock(&mu_);
    --(on_worker ? running_ : running_now_);
    Forget(next);
  }
  next.job->Finish(outcome);
  spdlog::info("job {}: {}", next.job->id(), outcome.ToString());
  if (on_finished_) on_finished_(next.job->Info());
}

absl::StatusOr<std::shared_ptr<Job>> JobManager::RunNow(v1::Job description, Work work) {
  Queued now;
  {
    absl::MutexLock lock(&mu_);
    if (!accepting_) return absl::UnavailableError("server shutting down; submit to another");
    now.job = std::make_shared<Job>(NewId(), std::move(description), absl::InfiniteFuture());
    now.work = std::move(work);
    jobs_[now.job->id()] = now.job;
    ++running_now_;
  }
  Execute(now, /*on_worker=*/false);
  return now.job;
}

// A finished job no longer takes joiners and is kept for Get and Watch until it is among
// the oldest beyond max_finished.
void JobManager::Forget(const Queued& done) {
  auto same = in_flight_.find(done.dedup_key);
  if (same != in_flight_.end() && same->second == done.job) in_flight_.erase(same);
  finished_.push_back(done.job->id());
  while (static_cast<int>(finished_.size()) > limits_.max_finished) {
    jobs_.erase(finished_.front());
    finished_.pop_front();
  }
}

void JobManager::Shutdown(absl::Duration grace) {
  std::vector<std::shared_ptr<Job>> unfinished;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    accepting_ = false;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return running_ == 0 && running_now_ == 0 && queue_.empty();
    };
    mu_.AwaitWithTimeout(absl::Condition(&idle), grace);
    for (const auto& [id, job] : jobs_) unfinished.push_back(job);  // Cancel skips finished
    stopping_ = true;
  }
  for (const std::shared_ptr<Job>& job : unfinished) {
    job->Cancel(absl::UnavailableError("server shutting down"));
  }
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

}  // namespace kiln::server
