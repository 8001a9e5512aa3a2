#include "compiler/driver/pipeline.h"

#include "compiler/arith/check.h"
#include "compiler/transform/legalize.h"
#include "compiler/transform/lower_host.h"

namespace kiln::driver {

const std::vector<Pass>& Pipeline() {
  static const auto* passes = new std::vector<Pass>{
      // Each operator becomes a loop-level kernel with symbolic extents.
      {"legalize", transform::Legalize},
      // `main` becomes ahead-of-time host code: bind shapes, check, carve memory, call.
      {"lower_host", transform::LowerHost},
  };
  return *passes;
}

absl::StatusOr<ir::IRModule> RunPipeline(
    ir::IRModule module,
    const std::function<void(const std::string&, const ir::IRModule&)>& after_pass,
    const std::string& stop_after) {
  for (const Pass& pass : Pipeline()) {
    KILN_ASSIGN_OR_RETURN(module, pass.run(std::move(module)));
    if (after_pass) after_pass(pass.name, module);
    if (pass.name == stop_after) break;
  }
  return module;
}

}  // namespace kiln::driver
