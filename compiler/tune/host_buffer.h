// A kernel argument as the tuner allocates it to measure a kernel: one buffer's bytes, 64-byte
// aligned as the runtime's tensors and an artifact's constants are. A vector's 16-byte
// alignment would split every other 64-byte vector access across two cache lines, which slows
// some schedules more than others and so misranks them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "compiler/arith/expr.h"

namespace kiln::tune {

struct HostBuffer {
  HostBuffer(std::string name, arith::DataType dtype, int64_t elements = 0)
      : name(std::move(name)), dtype(dtype), elements(elements) {}

  std::string name;
  arith::DataType dtype;
  int64_t elements = 0;
  size_t bytes = 0;  // whole 64-byte lines, zeroed past the elements

  // False when there is no memory for `elements`.
  bool Allocate() {
    bytes = std::max<size_t>(64, (elements * dtype.bytes() + 63) / 64 * 64);
    storage_.reset(static_cast<char*>(std::aligned_alloc(64, bytes)));
    if (storage_) std::memset(storage_.get(), 0, bytes);
    return storage_ != nullptr;
  }
  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> storage_;
};

}  // namespace kiln::tune
