// `kiln tuning`: export, import and count the records of a local cache's tuning database.
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "cache/tuning_db.h"
#include "client/commands.h"
#include "client/files.h"
#include "compiler/driver/driver.h"

namespace kiln::client {

// Export and stats read an existing database: a mistyped --cache must not create one.
absl::StatusOr<std::unique_ptr<cache::TuningDb>> OpenTuningDb(const std::string& cache_dir,
                                                              bool create) {
  const std::string path = (std::filesystem::path(cache_dir) / "kiln.db").string();
  std::error_code error;
  if (create) std::filesystem::create_directories(cache_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create cache dir ", cache_dir, ": ", error.message()));
  }
  if (!create && !std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("no cache database at ", path, " (see --cache DIR)"));
  }
  return cache::TuningDb::Open(path);
}

namespace {

absl::Status Export(cache::TuningDb& db, Console console) {
  absl::StatusOr<std::string> text = db.ExportJsonLines();
  if (!text.ok()) return text.status();
  console.out << *text;
  return absl::OkStatus();
}

absl::Status Import(cache::TuningDb& db, const std::string& text, const std::string& file,
                    Console console) {
  absl::StatusOr<int64_t> imported = db.ImportJsonLines(text);
  if (!imported.ok()) {
    return absl::Status(imported.status().code(),
                        absl::StrCat(file, ": ", imported.status().message()));
  }
  console.out << "imported " << *imported << " tuning records\n";
  return absl::OkStatus();
}

absl::Status PrintStats(cache::TuningDb& db, Console console) {
  absl::StatusOr<cache::TuningStats> stats = db.Stats();
  if (!stats.ok()) return stats.status();
  console.out << "records\t" << stats->records << "\n"
              << "workloads\t" << stats->workloads << "\n";
  for (const auto& [version, records] : stats->records_by_compiler_version) {
    console.out << "compiler_version\t" << version << "\t" << records
                << (version == driver::CompilerVersion() ? "\t(this kiln)" : "") << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Tuning(const TuningArgs& args, Console console) {
  std::string text;
  if (args.action == "import") {  // read first: a missing file must not create a database
    absl::StatusOr<std::string> file = ReadFile(args.file);
    if (!file.ok()) return file.status();
    text = *std::move(file);
  }
  absl::StatusOr<std::unique_ptr<cache::TuningDb>> db =
      OpenTuningDb(args.cache_dir, /*create=*/args.action == "import");
  if (!db.ok()) return db.status();
  if (args.action == "export") return Export(**db, console);
  if (args.action == "import") return Import(**db, text, args.file, console);
  return PrintStats(**db, console);
}

}  // namespace kiln::client
