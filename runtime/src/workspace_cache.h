// Workspace blocks kept between calls of one model. An artifact allocates its workspace at the
// start of every call and frees it at the end; handing the same block back next call saves
// the page faults and page clearing a fresh large allocation costs each time (a fifth of a
// mobilenet_v2 run before this cache).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace kiln::runtime {

class WorkspaceCache {
 public:
  // Keeps at most `max_blocks` blocks.
  explicit WorkspaceCache(size_t max_blocks = 4) : max_blocks_(max_blocks) {}
  ~WorkspaceCache();
  WorkspaceCache(const WorkspaceCache&) = delete;
  WorkspaceCache& operator=(const WorkspaceCache&) = delete;

  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
  };
  // A cached block of at least `size` bytes and at most twice that (so a small request does
  // not pin a huge block), or {nullptr, 0}.
  Block Take(size_t size);
  // Keeps `block` for a later Take, or frees it (the smallest block goes when full).
  void Give(Block block);

 private:
  const size_t max_blocks_;
  std::mutex mu_;
  std::vector<Block> blocks_;
};

}  // namespace kiln::runtime
