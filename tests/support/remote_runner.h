// Runs an artifact built for another machine from a test on this one: the artifact goes to a
// private folder and kiln-runner for its arch (under qemu-user, or Node.js for wasm32) runs
// it for each call, over the pipe protocol of runtime/tools/runner_protocol.h.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/target.h"
#include "compiler/ir/tensor.h"

namespace kiln::testing {

// The command line that runs kiln-runner for `target`, without the artifact argument:
// qemu-aarch64 (a NEON-only cpu, or one with SVE when the target asks for it), qemu-riscv64
// (with RVV when asked), node for wasm32, the native runner for x86_64. FAILED_PRECONDITION
// naming the program when it is not installed (scripts/install-deps.sh installs them).
absl::StatusOr<std::vector<std::string>> RunnerCommand(const ir::Target& target);

class RemoteModel {
 public:
  // Writes `artifact` to a private folder and starts the runner on it, running the model on
  // `threads` threads (kiln_model_set_num_threads).
  static absl::StatusOr<std::unique_ptr<RemoteModel>> Start(const ir::Target& target,
                                                            std::string_view artifact,
                                                            int threads = 1);
  ~RemoteModel();

  // The outputs the artifact computes for `inputs`; INVALID_ARGUMENT with the runtime's
  // message when the call fails, INTERNAL with the runner's stderr when the runner dies
  // (a crash in the artifact) or answers nothing within the time limit.
  absl::StatusOr<std::vector<ir::NDArray>> Run(const std::vector<ir::NDArray>& inputs);

 private:
  RemoteModel() = default;
  absl::Status RunnerDied(const std::string& what);

  std::string dir_;
  pid_t pid_ = -1;
  int to_runner_ = -1, from_runner_ = -1;
};

}  // namespace kiln::testing
