// `kiln compile`: in-process through the driver, or through kilnd (upload, compile, fetch).
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "cache/tuning_db.h"
#include "client/commands.h"
#include "client/files.h"
#include "client/remote.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/tuning.h"
#include "compiler/ir/target.h"

namespace kiln::client {
namespace {

// A name the server or the user chose becomes one path component, never a way out of DIR.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

absl::Status WriteArtifact(const CompileArgs& args, const std::string& target,
                           const std::string& file_name, std::string_view bytes,
                           std::string_view manifest_json, Console console) {
  if (!IsPlainFileName(target) || !IsPlainFileName(file_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to write artifact '", file_name, "' for target '", target, "'"));
  }
  std::filesystem::path dir = std::filesystem::path(args.out_dir) / target;
  std::string artifact_path = (dir / file_name).string();
  absl::Status status = WriteFile(artifact_path, bytes);
  if (status.ok()) status = WriteFile((dir / "manifest.json").string(), manifest_json);
  if (status.ok()) console.out << target << ": " << artifact_path << "\n";
  return status;
}

// The folder under --out for a target as the user named it: a preset keeps that name ("host"
// stays "host"); a description, whose text has ';' and '=' in it, gets its display name
// ("x86_64-custom-1a2b3c4d").
std::string ArtifactFolder(const std::string& requested) {
  if (requested.find('=') == std::string::npos) return requested;
  absl::StatusOr<ir::Target> target = ir::ParseTarget(requested);
  return target.ok() ? target->preset : requested;
}

// Each target at most once, in the order given.
std::vector<std::string> UniqueTargets(const std::vector<std::string>& targets) {
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const std::string& t : targets) {
    if (seen.insert(t).second) unique.push_back(t);
  }
  return unique;
}

absl::Status Prefixed(const std::string& target, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("[", target, "] ", status.message()));
}

void PrintLocalEvent(const std::string& target, const driver::CompileEvent& event,
                     std::ostream& err) {
  using Kind = driver::CompileEvent::Kind;
  err << "[" << target << "] ";
  if (event.kind == Kind::kStage) err << "stage " << event.name;
  if (event.kind == Kind::kPass) err << "pass " << event.name;
  if (event.kind == Kind::kTuning) err << "tune";
  if (event.kind != Kind::kInfo && !event.message.empty()) err << ": ";
  err << event.message << "\n";
}

// With a tuning budget, the kernels the database has no record for are tuned first, so the
// compile right after uses what was found; a kernel with a record costs no measurement.
absl::Status CompileOneLocally(const CompileArgs& args, const std::string& model,
                               const std::string& name, cache::TuningDb* db, Console console) {
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(name);
  if (!target.ok()) return target.status();
  driver::CompileOptions options;
  options.dim_bounds = args.dim_bounds;
  options.tuning_db = db;
  auto events = [&](const driver::CompileEvent& event) {
    PrintLocalEvent(name, event, console.err);
  };
  if (db && (args.tune_trials > 0 || args.tune_seconds > 0)) {
    driver::TuneModelOptions tuning;
    tuning.tune.trials = static_cast<int>(args.tune_trials);
    tuning.tune.time_limit = std::chrono::seconds(args.tune_seconds);
    absl::StatusOr<driver::TuneSummary> tuned =
        driver::TuneModel(model, *target, options, tuning, *db, events);
    if (!tuned.ok()) return tuned.status();
    console.err << "[" << name << "] tuned " << tuned->results.size() << " of " << tuned->kernels
                << " kernels in " << tuned->trials << " trials (" << tuned->already_tuned
                << " had records)\n";
  }
  absl::StatusOr<driver::Artifact> artifact = driver::CompileModel(model, *target, options, events);
  if (!artifact.ok()) return artifact.status();
  return WriteArtifact(args, ArtifactFolder(name), artifact->file_name, artifact->bytes,
                       artifact->manifest_json, console);
}

// Compiles every target even after one fails, like kilnd, and answers the first failure.
absl::Status CompileLocally(const CompileArgs& args, const std::string& model, Console console) {
  std::unique_ptr<cache::TuningDb> db;
  if (!args.cache_dir.empty()) {
    absl::StatusOr<std::unique_ptr<cache::TuningDb>> opened = OpenTuningDb(args.cache_dir, true);
    if (!opened.ok()) return opened.status();
    db = *std::move(opened);
  }
  absl::Status first_error;
  for (const std::string& name : UniqueTargets(args.targets)) {
    absl::Status status = CompileOneLocally(args, model, name, db.get(), console);
    if (status.ok()) continue;
    console.err << "[" << name << "] error: " << status << "\n";
    if (first_error.ok()) first_error = Prefixed(name, status);
  }
  return first_error;
}

v1::CompileRequest MakeCompileRequest(const CompileArgs& args, const std::string& model_digest) {
  v1::CompileRequest request;
  request.set_model_digest(model_digest);
  for (const std::string& t : UniqueTargets(args.targets)) request.add_targets(t);
  for (const auto& [name, bound] : args.dim_bounds) (*request.mutable_dim_bounds())[name] = bound;
  request.set_tune_trials(args.tune_trials);
  request.set_tune_seconds(args.tune_seconds);
  return request;
}

// Fetches every finished target's artifact, then answers the compile's own status (a failed
// target does not cost the others their results).
absl::Status CompileRemotely(const CompileArgs& args, const std::string& model, Console console) {
  absl::StatusOr<std::unique_ptr<RemoteKiln>> connected =
      RemoteKiln::Connect(args.server, std::chrono::seconds(args.timeout_s));
  if (!connected.ok()) return connected.status();
  RemoteKiln& remote = **connected;
  std::string name = std::filesystem::path(args.model_path).filename().string();
  absl::StatusOr<std::string> digest = remote.UploadModel(name, model);
  if (!digest.ok()) return digest.status();
  console.err << "uploaded " << name << " (" << model.size() << " bytes) as " << *digest << "\n";

  std::vector<v1::CompileEvent> done;
  absl::Status compiled =
      remote.Compile(MakeCompileRequest(args, *digest), [&](const v1::CompileEvent& event) {
        PrintCompileEvent(event, console.err);
        if (event.kind() == v1::CompileEvent::TARGET_DONE) done.push_back(event);
      });
  std::set<std::string> finished;
  for (const v1::CompileEvent& event : done) {
    absl::StatusOr<FetchedArtifact> artifact = remote.FetchArtifact(event.artifact_digest());
    if (!artifact.ok()) return Prefixed(event.target_preset(), artifact.status());
    absl::Status written =
        WriteArtifact(args, ArtifactFolder(event.target_preset()), artifact->file_name,
                      artifact->bytes, artifact->manifest_json, console);
    if (!written.ok()) return written;
    finished.insert(event.target_preset());
  }
  if (!compiled.ok()) return compiled;
  for (const std::string& t : UniqueTargets(args.targets)) {
    if (!finished.contains(t)) {
      return absl::InternalError(absl::StrCat("kilnd finished without an artifact for '", t, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void PrintCompileEvent(const v1::CompileEvent& event, std::ostream& err) {
  const std::string& label = !event.target_preset().empty() ? event.target_preset()
                             : !event.target().empty()      ? event.target()
                                                            : "kilnd";
  err << "[" << label << "] ";
  switch (event.kind()) {
    case v1::CompileEvent::STAGE:
      err << "stage " << event.name();
      break;
    case v1::CompileEvent::PASS:
      err << "pass " << event.name();
      break;
    case v1::CompileEvent::CACHE_HIT:
      err << "cache hit";
      break;
    case v1::CompileEvent::CACHE_MISS:
      err << "cache miss";
      break;
    case v1::CompileEvent::TUNING:
      err << "tune";
      break;
    case v1::CompileEvent::TARGET_DONE:
      err << "done: " << event.artifact_file_name() << ", " << event.artifact_size() << " bytes";
      break;
    case v1::CompileEvent::TARGET_ERROR:
      err << "error: "
          << absl::StatusCodeToString(static_cast<absl::StatusCode>(event.error_code()));
      break;
    default:
      err << event.name();
      break;
  }
  if (!event.message().empty()) err << ": " << event.message();
  err << "\n";
}

absl::Status Compile(const CompileArgs& args, Console console) {
  if (args.targets.empty()) return absl::InvalidArgumentError("no target given (--target)");
  if (args.out_dir.empty()) return absl::InvalidArgumentError("no output folder given (--out)");
  absl::StatusOr<std::string> model = ReadModelFile(args.model_path);
  if (!model.ok()) return model.status();
  if (args.server.empty()) return CompileLocally(args, *model, console);
  return CompileRemotely(args, *model, console);
}

}  // namespace kiln::client
