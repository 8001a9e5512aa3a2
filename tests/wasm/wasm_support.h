// For the wasm tests: compiling a model for a wasm target, running the module in Node.js through
// runtime/js/kiln-runner.mjs (the pipe protocol of runtime/tools/runner_protocol.h, over files),
// and running programs with their output captured.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/driver/driver.h"

namespace kiln::testing {

namespace fs = std::filesystem;

inline std::string Quote(const std::string& s) { return "'" + s + "'"; }

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream data;
  data << in.rdbuf();
  return data.str();
}

inline void WriteFile(const fs::path& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// A fresh directory under the test's temporary directory, private to this process and removed
// with its contents at the end of the scope.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::path(::testing::TempDir()) /
              ("kiln-wasm-" + name + "-" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  std::string string() const { return path_.string(); }

 private:
  fs::path path_;
};

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together, unless the command redirects them
};

inline CommandResult RunCommand(const std::string& command, const fs::path& log) {
  int status = std::system((command + " > " + Quote(log) + " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(log)};
}

// `onnx` compiled for `target` ("wasm32", "wasm32-simd"): the module's bytes.
inline absl::StatusOr<std::string> CompileForWasm(const std::string& onnx,
                                                  const std::string& target) {
  absl::StatusOr<ir::Target> parsed = ir::ParseTarget(target);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<driver::Artifact> artifact = driver::CompileModel(onnx, *parsed, {}, nullptr);
  if (!artifact.ok()) return artifact.status();
  return artifact->bytes;
}

// --- The runner protocol, one request per file ---

inline void Append(std::string* out, const void* data, size_t size) {
  out->append(static_cast<const char*>(data), size);
}

inline std::string Request(const std::vector<ir::NDArray>& inputs) {
  std::string out;
  uint32_t count = inputs.size();
  Append(&out, &count, 4);
  for (const ir::NDArray& a : inputs) {
    uint8_t head[4] = {static_cast<uint8_t>(a.dtype.code), a.dtype.bits, 0, 0};
    uint32_t ndim = a.shape.size();
    uint64_t bytes = a.bytes.size();
    Append(&out, head, 4);
    Append(&out, &ndim, 4);
    Append(&out, a.shape.data(), 8 * ndim);
    Append(&out, &bytes, 8);
    Append(&out, a.bytes.data(), bytes);
  }
  return out;
}

// Reads `size` bytes at *at; false (and a test failure) past the end.
inline bool Take(const std::string& data, size_t* at, void* out, size_t size) {
  EXPECT_LE(*at + size, data.size()) << "truncated response";
  if (*at + size > data.size()) return false;
  std::memcpy(out, data.data() + *at, size);
  *at += size;
  return true;
}

// The outputs of a response, or its error message as INVALID_ARGUMENT.
inline absl::StatusOr<std::vector<ir::NDArray>> ParseResponse(const std::string& data) {
  size_t at = 0;
  int32_t status = 0;
  uint32_t count = 0;
  if (!Take(data, &at, &status, 4) || !Take(data, &at, &count, 4)) {
    return absl::InternalError("truncated response");
  }
  if (status != 0) return absl::InvalidArgumentError(data.substr(at, count));
  std::vector<ir::NDArray> outputs;
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t head[4];
    uint32_t ndim = 0;
    uint64_t bytes = 0;
    if (!Take(data, &at, head, 4) || !Take(data, &at, &ndim, 4)) break;
    std::vector<int64_t> shape(ndim);
    if (!Take(data, &at, shape.data(), 8 * ndim) || !Take(data, &at, &bytes, 8)) break;
    ir::NDArray a = ir::NDArray::Zeros(
        arith::DataType{static_cast<arith::DataType::Code>(head[0]), head[1]}, shape);
    EXPECT_EQ(a.bytes.size(), bytes) << "output " << i << " data size";
    if (a.bytes.size() != bytes || !Take(data, &at, a.bytes.data(), bytes)) break;
    outputs.push_back(std::move(a));
  }
  if (outputs.size() != count) return absl::InternalError("malformed response");
  return outputs;
}

// Runs `wasm` once on `inputs` in Node.js (KILN_NODE) through kiln-runner.mjs; the outputs, or
// the runtime's message as INVALID_ARGUMENT; INTERNAL when the runner itself fails.
inline absl::StatusOr<std::vector<ir::NDArray>> RunInNode(const std::string& wasm,
                                                          const std::vector<ir::NDArray>& inputs,
                                                          const std::string& name) {
  ScratchDir dir(name);
  WriteFile(dir / "model.wasm", wasm);
  WriteFile(dir / "request", Request(inputs));
  std::string command = Quote(KILN_NODE) + " " +
                        Quote(KILN_SOURCE_DIR "/runtime/js/kiln-runner.mjs") + " " +
                        Quote(dir / "model.wasm") + " < " + Quote(dir / "request") + " > " +
                        Quote(dir / "response") + " 2> " + Quote(dir / "stderr");
  int status = std::system(command.c_str());
  absl::StatusOr<std::vector<ir::NDArray>> result =
      WIFEXITED(status) && WEXITSTATUS(status) == 0
          ? ParseResponse(ReadFile(dir / "response"))
          : absl::InternalError("kiln-runner.mjs failed (status " + std::to_string(status) +
                                "): " + ReadFile(dir / "stderr"));
  return result;
}

}  // namespace kiln::testing
