// The runtime's thread pool and KilnEnv::parallel_for: every index runs exactly once, chunks
// really run on several threads, a late thread's range is taken over, nested calls and
// failures behave as the ABI says.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/src/call_env.h"
#include "runtime/src/thread_pool.h"

namespace kiln::runtime {
namespace {

// Counts how often each index ran and on which threads; each chunk waits until `wait_for`
// chunks have started, which only several threads can satisfy.
struct Coverage {
  explicit Coverage(int64_t n) : counts(n) {}
  std::vector<std::atomic<int>> counts;
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> started{0};
  int wait_for = 0;

  static int32_t Task(void* self, int64_t begin, int64_t end) {
    auto* c = static_cast<Coverage*>(self);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->threads.insert(std::this_thread::get_id());
    }
    ++c->started;
    while (c->started.load() < c->wait_for) std::this_thread::yield();
    for (int64_t i = begin; i < end; ++i) ++c->counts[i];
    return 0;
  }
};

TEST(ThreadPoolTest, EveryIndexRunsOnceOnSeveralThreads) {
  ThreadPool pool(4);
  for (int64_t n : {2, 3, 4, 5, 7, 100, 1001}) {
    Coverage c(n);
    // Every thread blocks in its first chunk until all have one: each runs part of the job.
    c.wait_for = static_cast<int>(std::min<int64_t>(n, 4));
    ASSERT_EQ(pool.ParallelFor(n, &Coverage::Task, &c), 0) << n;
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(c.counts[i].load(), 1) << "index " << i << " of " << n;
    EXPECT_EQ(c.threads.size(), static_cast<size_t>(std::min<int64_t>(n, 4))) << n;
  }
}

TEST(ThreadPoolTest, EveryIndexRunsOnceForAnyCountAndThreads) {
  for (int32_t threads = 1; threads <= 5; ++threads) {
    ThreadPool pool(threads);
    for (int64_t n = 0; n <= 100; ++n) {
      Coverage c(n);
      ASSERT_EQ(pool.ParallelFor(n, &Coverage::Task, &c), 0) << n;
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(c.counts[i].load(), 1) << "index " << i << " of " << n << ", " << threads;
    }
  }
}

// The worker stalls in its first chunk; the caller, done with its own range, takes the rest
// of the worker's.
struct Stall {
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> on_caller{0};
  std::atomic<bool> stalled{false};

  static int32_t Task(void* self, int64_t begin, int64_t end) {
    auto* s = static_cast<Stall*>(self);
    if (std::this_thread::get_id() == s->caller) {
      s->on_caller += end - begin;
    } else if (!s->stalled.exchange(true)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }
};

TEST(ThreadPoolTest, ALateThreadsRangeIsTakenOver) {
  ThreadPool pool(2);
  Stall s;
  ASSERT_EQ(pool.ParallelFor(64, &Stall::Task, &s), 0);
  EXPECT_GT(s.on_caller.load(), 32);  // its own half and most of the worker's
}

TEST(ThreadPoolTest, OneThreadRunsOnTheCaller) {
  ThreadPool pool(1);
  Coverage c(10);
  ASSERT_EQ(pool.ParallelFor(10, &Coverage::Task, &c), 0);
  EXPECT_EQ(c.threads, std::set<std::thread::id>{std::this_thread::get_id()});
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(c.counts[i].load(), 1);
}

TEST(ThreadPoolTest, NoTasksRunsNothing) {
  ThreadPool pool(3);
  Coverage c(1);
  EXPECT_EQ(pool.ParallelFor(0, &Coverage::Task, &c), 0);
  EXPECT_EQ(c.started.load(), 0);
}

struct Nested {
  ThreadPool* pool;
  std::atomic<int> inner_threads_differ{0};
  std::atomic<int64_t> inner_total{0};

  static int32_t Inner(void* self, int64_t begin, int64_t end) {
    static_cast<Nested*>(self)->inner_total += end - begin;
    return 0;
  }
  static int32_t Outer(void* self, int64_t begin, int64_t end) {
    auto* n = static_cast<Nested*>(self);
    for (int64_t i = begin; i < end; ++i) {
      std::thread::id outer = std::this_thread::get_id();
      Coverage c(8);
      n->pool->ParallelFor(8, &Coverage::Task, &c);
      if (c.threads != std::set<std::thread::id>{outer}) ++n->inner_threads_differ;
      n->pool->ParallelFor(5, &Nested::Inner, n);
    }
    return 0;
  }
};

TEST(ThreadPoolTest, NestedCallsRunSeriallyOnTheirThread) {
  ThreadPool pool(3);
  Nested n{&pool};
  ASSERT_EQ(pool.ParallelFor(6, &Nested::Outer, &n), 0);
  EXPECT_EQ(n.inner_threads_differ.load(), 0);
  EXPECT_EQ(n.inner_total.load(), 30);
}

int32_t FailAtSeven(void*, int64_t begin, int64_t end) { return begin <= 7 && 7 < end ? 3 : 0; }

TEST(ThreadPoolTest, AFailedRangeIsTheResult) {
  for (int32_t threads : {1, 2, 3, 4, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.ParallelFor(20, &FailAtSeven, nullptr), 3) << threads;
    EXPECT_EQ(pool.ParallelFor(1000, &FailAtSeven, nullptr), 3) << threads;
    EXPECT_EQ(pool.ParallelFor(5, &FailAtSeven, nullptr), 0) << threads;
  }
}

TEST(ThreadPoolTest, ConcurrentCallersEachCoverTheirIndices) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        Coverage c(37);
        pool.ParallelFor(37, &Coverage::Task, &c);
        for (int64_t i = 0; i < 37; ++i) wrong += c.counts[i].load() != 1;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Workers poll for a while after each call before they sleep: calls back to back (caught
// while polling), calls after a pause longer than the polling (caught after sleeping), and a
// pool destroyed right after a call (its workers still polling) all behave.
TEST(ThreadPoolTest, CallsBackToBackAndAfterPausesCoverEveryIndex) {
  ThreadPool pool(3);
  int wrong = 0;
  for (int round = 0; round < 2000; ++round) {
    if (round % 200 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    Coverage c(5);
    pool.ParallelFor(5, &Coverage::Task, &c);
    for (int64_t i = 0; i < 5; ++i) wrong += c.counts[i].load() != 1;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(pool.ParallelFor(20, &FailAtSeven, nullptr), 3);
  for (int i = 0; i < 20; ++i) {
    ThreadPool short_lived(2);
    Coverage c(4);
    short_lived.ParallelFor(4, &Coverage::Task, &c);
    for (int64_t k = 0; k < 4; ++k) wrong += c.counts[k].load() != 1;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(CallEnvTest, ParallelForWithoutAPoolRunsOnTheCaller) {
  Signature sig;
  CallEnv call(sig);
  Coverage c(9);
  KilnEnv* env = call.env();
  ASSERT_EQ(env->parallel_for(env->self, 9, &Coverage::Task, &c), 0);
  EXPECT_EQ(c.threads, std::set<std::thread::id>{std::this_thread::get_id()});
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(c.counts[i].load(), 1);
}

TEST(CallEnvTest, ParallelForUsesThePool) {
  Signature sig;
  ThreadPool pool(2);
  CallEnv call(sig, &pool);
  Coverage c(9);
  c.wait_for = 2;
  KilnEnv* env = call.env();
  ASSERT_EQ(env->parallel_for(env->self, 9, &Coverage::Task, &c), 0);
  EXPECT_EQ(c.threads.size(), 2u);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(c.counts[i].load(), 1);
}

}  // namespace
}  // namespace kiln::runtime
