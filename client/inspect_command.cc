// `kiln inspect`: the module in the IR text format, so a user sees every value's symbolic
// shape after import or after any pass.
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"

namespace kiln::client {

absl::StatusOr<std::string> ReadModelFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read model '", path, "'"));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::Status Inspect(const InspectArgs& args, Console console) {
  absl::StatusOr<std::string> bytes = ReadModelFile(args.model_path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(*bytes);
  if (!module.ok()) return module.status();
  if (args.after.empty() || args.after == "import") {
    console.out << ir::ToString(*module);
    return absl::OkStatus();
  }
  std::vector<std::string> names = {"import"};
  bool known = false;
  for (const driver::Pass& pass : driver::Pipeline()) {
    names.push_back(pass.name);
    known = known || pass.name == args.after;
  }
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat("unknown pass '", args.after,
                                                   "'; passes: ", absl::StrJoin(names, ", ")));
  }
  absl::StatusOr<ir::IRModule> lowered =
      driver::RunPipeline(*std::move(module), nullptr, args.after);
  if (!lowered.ok()) return lowered.status();
  console.out << ir::ToString(*lowered);
  return absl::OkStatus();
}

}  // namespace kiln::client
