// Tensors in files: NumPy .npy (v1..v3, little-endian, C order) and ONNX TensorProto .pb.
// `kiln run` reads its inputs and writes its outputs with these; tests reuse them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dlpack/dlpack.h"

namespace kiln::client {

// Tensor data is 64-byte aligned, like the runtime's workspace, so that generated code sees
// the same alignment for every buffer.
template <typename T>
struct Aligned64Allocator {
  using value_type = T;
  Aligned64Allocator() = default;
  template <typename U>
  Aligned64Allocator(const Aligned64Allocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const Aligned64Allocator<U>&) const {
    return true;
  }
};

// A dense, row-major tensor in host memory.
struct Tensor {
  DLDataType dtype{};
  std::vector<int64_t> shape;
  std::vector<uint8_t, Aligned64Allocator<uint8_t>> data;

  int64_t NumElements() const;
  // A CPU DLTensor over this tensor's data and shape; valid while the tensor lives unchanged.
  DLTensor View();
};

// Bytes per element of a dtype the runtime's signatures can name (0 for any other).
int64_t DTypeBytes(DLDataType dtype);
// Bytes of a dense tensor; INVALID_ARGUMENT for an unknown dtype, a negative dim or a size
// that overflows.
absl::StatusOr<int64_t> TensorBytes(DLDataType dtype, const std::vector<int64_t>& shape);
// A zero-filled tensor; errors as TensorBytes.
absl::StatusOr<Tensor> MakeTensor(DLDataType dtype, std::vector<int64_t> shape);

absl::StatusOr<Tensor> ParseNpy(std::string_view bytes);
absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor);
// Data from raw_data or the typed fields; external data is not supported.
absl::StatusOr<Tensor> ParseTensorProto(std::string_view bytes);

// .npy is recognized by its magic, anything else named *.pb is parsed as a TensorProto.
// Errors name the file.
absl::StatusOr<Tensor> ReadTensorFile(const std::string& path);
absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor);

}  // namespace kiln::client
