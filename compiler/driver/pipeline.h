// The compiler's table of contents: every pass in order. `kiln inspect --after PASS` and the
// event stream both read their names from here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/pass_context.h"
#include "compiler/ir/target.h"

namespace kiln::driver {

struct Pass {
  std::string name;
  std::function<absl::StatusOr<ir::IRModule>(ir::IRModule, ir::PassContext&)> run;
};

// The graph-to-loop pipeline that runs after import and before codegen.
const std::vector<Pass>& Pipeline();

using AfterPass = std::function<void(const std::string&, const ir::IRModule&)>;

// Runs the pipeline, calling `after_pass(name, module)` after each pass (for events and IR
// dumps). Stops after the pass named `stop_after` when it is not empty. Passes read the
// target and options from `context` and leave their reports there.
absl::StatusOr<ir::IRModule> RunPipeline(ir::IRModule module, const AfterPass& after_pass,
                                         const std::string& stop_after, ir::PassContext& context);
// The same with no options, for `target` (the x86_64 preset when it is null).
absl::StatusOr<ir::IRModule> RunPipeline(ir::IRModule module, const AfterPass& after_pass,
                                         const std::string& stop_after = "",
                                         const ir::Target* target = nullptr);

}  // namespace kiln::driver
