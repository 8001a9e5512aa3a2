// The compiler's table of contents: every pass in order. `kiln inspect --after PASS` and the
// event stream both read their names from here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::driver {

struct Pass {
  std::string name;
  std::function<absl::StatusOr<ir::IRModule>(ir::IRModule)> run;
};

// The graph-to-loop pipeline that runs after import and before codegen.
const std::vector<Pass>& Pipeline();

// Runs the pipeline, calling `after_pass(name, module)` after each pass (for events and IR
// dumps). Stops after the pass named `stop_after` when it is not empty.
absl::StatusOr<ir::IRModule> RunPipeline(
    ir::IRModule module,
    const std::function<void(const std::string&, const ir::IRModule&)>& after_pass,
    const std::string& stop_after = "");

}  // namespace kiln::driver
