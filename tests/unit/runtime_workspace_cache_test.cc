// The per-model workspace cache: a freed block serves the next call of a similar size, a
// much smaller request does not pin a big block, and the cache holds a bounded number of
// blocks. Through CallEnv, the artifact's alloc/free pair reuses one block across calls.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/src/call_env.h"
#include "runtime/src/workspace_cache.h"

namespace kiln::runtime {
namespace {

WorkspaceCache::Block NewBlock(size_t size) { return {std::malloc(size), size}; }

TEST(WorkspaceCacheTest, EmptyCacheHasNothing) {
  WorkspaceCache cache;
  EXPECT_EQ(cache.Take(64).ptr, nullptr);
}

TEST(WorkspaceCacheTest, GivenBlockServesASimilarRequest) {
  WorkspaceCache cache;
  WorkspaceCache::Block block = NewBlock(4096);
  cache.Give(block);
  WorkspaceCache::Block taken = cache.Take(3000);
  EXPECT_EQ(taken.ptr, block.ptr);
  EXPECT_EQ(taken.size, 4096u);
  EXPECT_EQ(cache.Take(3000).ptr, nullptr) << "a block is handed out once";
  std::free(taken.ptr);
}

TEST(WorkspaceCacheTest, TooSmallOrTooLargeRequestsMiss) {
  WorkspaceCache cache;
  cache.Give(NewBlock(4096));
  EXPECT_EQ(cache.Take(1000).ptr, nullptr) << "less than half the block";
  EXPECT_EQ(cache.Take(5000).ptr, nullptr) << "more than the block";
  EXPECT_NE(cache.Take(2048).ptr, nullptr);
}

TEST(WorkspaceCacheTest, SmallestFitIsTakenAndSmallestIsDroppedWhenFull) {
  WorkspaceCache cache(2);
  WorkspaceCache::Block big = NewBlock(8192), mid = NewBlock(5000), small = NewBlock(4096);
  cache.Give(big);
  cache.Give(mid);
  cache.Give(small);  // over capacity: the smallest (this one) is freed
  WorkspaceCache::Block taken = cache.Take(4096);
  EXPECT_EQ(taken.ptr, mid.ptr) << "the smallest block that fits";
  std::free(taken.ptr);
  EXPECT_EQ(cache.Take(4096).ptr, big.ptr);
  std::free(big.ptr);
}

TEST(WorkspaceCacheTest, CallsReuseTheWorkspaceThroughCallEnv) {
  Signature signature;
  WorkspaceCache cache;
  void* first = nullptr;
  {
    CallEnv call(signature, nullptr, &cache);
    KilnEnv* env = call.env();
    first = env->alloc(env->self, 1 << 20);
    ASSERT_NE(first, nullptr);
    env->free(env->self, first);
  }
  CallEnv call(signature, nullptr, &cache);
  KilnEnv* env = call.env();
  void* second = env->alloc(env->self, 1 << 20);
  EXPECT_EQ(second, first);
  // Not freed by the artifact: the env gives it back to the cache when the call ends.
  void* third = env->alloc(env->self, 1 << 20);
  EXPECT_NE(third, second);
}

}  // namespace
}  // namespace kiln::runtime
