#include "compiler/schedule/schedule.h"

#include "compiler/schedule/conv_rule.h"
#include "compiler/schedule/rules.h"

namespace kiln::schedule {

absl::StatusOr<ir::IRModule> Schedule(ir::IRModule module, const ir::Target& target) {
  for (auto& [name, func] : module.prim_funcs) {
    if (func.is_host || !func.body) continue;
    std::optional<ir::Stmt> rule = ScheduleMatmul(func.body, target);
    if (!rule) rule = ScheduleConv(func.body, target);
    func.body = rule ? *rule : ScheduleLoopNests(func.body);
  }
  return module;
}

}  // namespace kiln::schedule
