// `kiln targets`: the presets the compiler knows, from this binary or from kilnd.
#include "client/commands.h"
#include "client/remote.h"
#include "compiler/driver/driver.h"

namespace kiln::client {

absl::Status ListTargets(const TargetsArgs& args, Console console) {
  if (args.server.empty()) {
    for (const ir::Target& target : driver::ListTargets()) {
      console.out << target.preset << "\t" << target.Canonical() << "\n";
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<RemoteKiln>> connected =
      RemoteKiln::Connect(args.server, std::chrono::seconds(args.timeout_s));
  if (!connected.ok()) return connected.status();
  RemoteKiln& remote = **connected;
  absl::StatusOr<v1::ListTargetsResponse> response = remote.ListTargets();
  if (!response.ok()) return response.status();
  for (const v1::TargetInfo& target : response->targets()) {
    console.out << target.name() << "\t" << target.canonical();
    if (!target.description().empty()) console.out << "\t" << target.description();
    console.out << "\n";
  }
  return absl::OkStatus();
}

}  // namespace kiln::client
