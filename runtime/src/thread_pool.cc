#include "runtime/src/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace kiln::runtime {
namespace {

// Set on every thread while it runs a task, so a nested ParallelFor stays on that thread.
thread_local bool in_task = false;

int32_t RunSerially(int64_t num_tasks, TaskFn task, void* closure) {
  return num_tasks > 0 ? task(closure, 0, num_tasks) : 0;
}

// How long a thread polls before it sleeps on a condition variable. A model's kernels run
// back to back, many shorter than waking a sleeping thread takes (a decode step's are a few
// microseconds), so a worker keeps polling for the next one and the caller for the last
// range to finish.
constexpr std::chrono::microseconds kSpin{100};

// Polls until done() or kSpin has passed; true when done() held.
template <typename Done>
bool SpinUntil(Done done) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    // Gives the core away when another thread (this run's caller, say) is waiting for it.
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

ThreadPool::ThreadPool(int32_t num_threads) {
  for (int32_t w = 1; w < num_threads; ++w) workers_.emplace_back(&ThreadPool::WorkerLoop, this, w);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// Range r of job: an even split, the first (num_tasks % num_ranges) ranges one longer.
int32_t ThreadPool::RunRange(const Job& job, int32_t range) {
  int64_t base = job.num_tasks / job.num_ranges, extra = job.num_tasks % job.num_ranges;
  int64_t begin = range * base + std::min<int64_t>(range, extra);
  int64_t end = begin + base + (range < extra ? 1 : 0);
  if (begin >= end) return 0;
  in_task = true;
  int32_t result = job.task(job.closure, begin, end);
  in_task = false;
  return result;
}

void ThreadPool::WorkerLoop(int32_t worker) {
  uint64_t seen = 0;
  while (true) {
    SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; });
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    int32_t result = worker < job.num_ranges ? RunRange(job, worker) : 0;
    std::lock_guard<std::mutex> lock(mu_);
    if (result != 0 && result_ == 0) result_ = result;
    if (--pending_ == 0) done_.notify_one();
  }
}

int32_t ThreadPool::ParallelFor(int64_t num_tasks, TaskFn task, void* closure) {
  if (workers_.empty() || in_task || num_tasks <= 1) return RunSerially(num_tasks, task, closure);
  std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
  if (!busy.owns_lock()) return RunSerially(num_tasks, task, closure);
  Job job{num_tasks, task, closure,
          static_cast<int32_t>(std::min<int64_t>(num_tasks, num_threads()))};
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = job;
    result_ = 0;
    pending_ = static_cast<int32_t>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  int32_t own = RunRange(job, 0);
  SpinUntil([&] { return pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  return own != 0 ? own : result_;
}

}  // namespace kiln::runtime
