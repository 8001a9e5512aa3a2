#include "compiler/schedule/schedule.h"

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

absl::StatusOr<ir::IRModule> Schedule(ir::IRModule module, const ir::Target& target) {
  for (auto& [name, func] : module.prim_funcs) {
    if (func.is_host || !func.body) continue;
    std::optional<ir::Stmt> matmul = ScheduleMatmul(func.body, target);
    func.body = matmul ? *matmul : ScheduleLoopNests(func.body);
  }
  return module;
}

}  // namespace kiln::schedule
