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
// chunk to finish.
constexpr std::chrono::microseconds kSpin{100};

// Chunks each thread's range is taken in: enough that the others can take over much of a
// late thread's range, few enough that taking one (an atomic add) costs little next to it.
constexpr int64_t kChunksPerRange = 8;

// Polls until done() or kSpin has passed; true when done() held.
template <typename Done>
bool SpinUntil(Done done) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    // Gives the core away when another thread (this run's caller, say) is waiting for it.
    // Polling with the pause instruction instead measured no faster, and when the machine
    // has fewer free cores than the pool has threads it keeps the thread being waited for
    // off the core: a run took ten times longer.
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

ThreadPool::ThreadPool(int32_t num_threads) : ranges_(std::max(num_threads, 1)) {
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

void ThreadPool::RunChunks(const Job& job, int32_t own) {
  in_task = true;
  int32_t n = static_cast<int32_t>(ranges_.size());
  for (int32_t i = 0; i < n; ++i) {
    Range& range = ranges_[(own + i) % n];
    while (true) {
      int64_t begin = range.next.fetch_add(job.chunk, std::memory_order_relaxed);
      if (begin >= range.end) break;
      int32_t result = job.task(job.closure, begin, std::min(begin + job.chunk, range.end));
      int32_t none = 0;
      if (result != 0) result_.compare_exchange_strong(none, result);
    }
  }
  in_task = false;
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
    RunChunks(job, worker);
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_.notify_one();
  }
}

int32_t ThreadPool::ParallelFor(int64_t num_tasks, TaskFn task, void* closure) {
  if (workers_.empty() || in_task || num_tasks <= 1) return RunSerially(num_tasks, task, closure);
  std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
  if (!busy.owns_lock()) return RunSerially(num_tasks, task, closure);
  Job job{num_tasks, std::max<int64_t>(1, num_tasks / (num_threads() * kChunksPerRange)), task,
          closure};
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = job;
    // An even split, the first (num_tasks % threads) ranges one longer.
    int64_t threads = num_threads(), base = num_tasks / threads, extra = num_tasks % threads;
    for (int64_t r = 0; r < threads; ++r) {
      int64_t begin = r * base + std::min(r, extra);
      ranges_[r].next = begin;
      ranges_[r].end = begin + base + (r < extra ? 1 : 0);
    }
    result_ = 0;
    pending_ = static_cast<int32_t>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  RunChunks(job, 0);
  SpinUntil([&] { return pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  return result_;
}

}  // namespace kiln::runtime
