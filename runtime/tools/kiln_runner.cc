// kiln-runner: runs an artifact for requests that arrive on stdin (runner_protocol.h). Built
// for every arch Kiln targets, so tests on the build machine can run an aarch64 or riscv64
// artifact under qemu-user exactly as the runtime on that machine would.
//
//   kiln-runner ARTIFACT [--threads N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime.hpp"
#include "runner_protocol.h"

namespace kiln::runner {
namespace {

// A tensor as it crosses the pipe: its bytes and shape live here, the DLTensor views them.
struct Tensor {
  DLDataType dtype{};
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;

  DLTensor View() {
    DLTensor t{};
    t.data = data.empty() ? nullptr : data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    return t;
  }
};

bool ReadBytes(void* out, size_t size) { return std::fread(out, 1, size, stdin) == size; }

template <typename T>
bool Read(T* value) {
  return ReadBytes(value, sizeof(T));
}

void WriteBytes(const void* data, size_t size) { std::fwrite(data, 1, size, stdout); }

template <typename T>
void Write(T value) {
  WriteBytes(&value, sizeof(T));
}

bool ReadTensor(Tensor* t) {
  uint16_t zero;
  uint32_t ndim;
  uint64_t num_bytes;
  if (!Read(&t->dtype.code) || !Read(&t->dtype.bits) || !Read(&zero) || !Read(&ndim)) {
    return false;
  }
  t->dtype.lanes = 1;
  t->shape.resize(ndim);
  if (!ReadBytes(t->shape.data(), ndim * sizeof(int64_t)) || !Read(&num_bytes)) return false;
  t->data.resize(num_bytes);
  return ReadBytes(t->data.data(), num_bytes);
}

void WriteTensor(const Tensor& t) {
  Write<uint8_t>(t.dtype.code);
  Write<uint8_t>(t.dtype.bits);
  Write<uint16_t>(0);
  Write<uint32_t>(static_cast<uint32_t>(t.shape.size()));
  WriteBytes(t.shape.data(), t.shape.size() * sizeof(int64_t));
  Write<uint64_t>(t.data.size());
  WriteBytes(t.data.data(), t.data.size());
}

void WriteFailure(const std::string& message) {
  Write<int32_t>(kStatusFailed);
  Write<uint32_t>(static_cast<uint32_t>(message.size()));
  WriteBytes(message.data(), message.size());
}

// Outputs sized as the artifact computes them from the inputs, zero-filled, then run.
bool RunOnce(const runtime::Model& model, std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
             std::string* error) {
  std::vector<DLTensor> in;
  for (Tensor& t : inputs) in.push_back(t.View());
  std::vector<std::vector<int64_t>> shapes;
  if (!model.OutputShapes(in, &shapes, error)) return false;
  outputs->resize(shapes.size());
  std::vector<DLTensor> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor& t = (*outputs)[i];
    t.dtype = model.outputs()[i].dtype;
    t.shape = shapes[i];
    int64_t count = 1;
    for (int64_t d : t.shape) count *= d;
    t.data.assign(static_cast<size_t>(count) * ((t.dtype.bits + 7) / 8), 0);
    out.push_back(t.View());
  }
  return model.Run(in, &out, error);
}

int Main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::strcmp(argv[2], "--threads") == 0)) {
    std::fprintf(stderr, "usage: kiln-runner ARTIFACT [--threads N]\n");
    return kLoadFailedExitStatus;
  }
  std::string error;
  std::unique_ptr<runtime::Model> model = runtime::Model::Load(argv[1], &error);
  if (model && argc == 4 && !model->SetNumThreads(std::atoi(argv[3]), &error)) model = nullptr;
  if (!model) {
    std::fprintf(stderr, "kiln-runner: %s\n", error.c_str());
    return kLoadFailedExitStatus;
  }
  uint32_t num_inputs;
  while (Read(&num_inputs)) {
    std::vector<Tensor> inputs(num_inputs), outputs;
    for (Tensor& t : inputs) {
      if (!ReadTensor(&t)) {
        std::fprintf(stderr, "kiln-runner: the request ends inside a tensor\n");
        return 1;
      }
    }
    if (RunOnce(*model, inputs, &outputs, &error)) {
      Write<int32_t>(kStatusOk);
      Write<uint32_t>(static_cast<uint32_t>(outputs.size()));
      for (const Tensor& t : outputs) WriteTensor(t);
    } else {
      WriteFailure(error);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::runner

int main(int argc, char** argv) { return kiln::runner::Main(argc, argv); }
