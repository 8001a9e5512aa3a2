#include "runtime/src/workspace_cache.h"

#include <algorithm>
#include <cstdlib>

namespace kiln::runtime {

WorkspaceCache::~WorkspaceCache() {
  for (const Block& block : blocks_) std::free(block.ptr);
}

WorkspaceCache::Block WorkspaceCache::Take(size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto best = blocks_.end();
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    bool fits = it->size >= size && it->size / 2 <= size;
    if (fits && (best == blocks_.end() || it->size < best->size)) best = it;
  }
  if (best == blocks_.end()) return {};
  Block block = *best;
  blocks_.erase(best);
  return block;
}

void WorkspaceCache::Give(Block block) {
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.push_back(block);
  if (blocks_.size() <= max_blocks_) return;
  auto smallest = std::min_element(blocks_.begin(), blocks_.end(),
                                   [](const Block& a, const Block& b) { return a.size < b.size; });
  std::free(smallest->ptr);
  blocks_.erase(smallest);
}

}  // namespace kiln::runtime
