#include "compiler/codegen/shared_object.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/arith/check.h"
#include "kiln/artifact_abi.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

extern char** environ;

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

// A directory only this process uses, removed with everything in it when done.
class TempDir {
 public:
  static absl::StatusOr<TempDir> Create() {
    const char* base = std::getenv("TMPDIR");
    std::string path = std::string(base && *base ? base : "/tmp") + "/kiln-link-XXXXXX";
    if (!mkdtemp(path.data())) {
      return absl::InternalError("cannot create a temporary directory " + path + ": " +
                                 std::strerror(errno));
    }
    return TempDir(path);
  }
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

absl::Status WriteFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::InternalError("cannot write " + path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InternalError("cannot read " + path);
  std::ostringstream data;
  data << in.rdbuf();
  return data.str();
}

// The linker the environment variable `variable` names, else `built_in` (found by CMake).
std::string LinkerPath(const char* variable, const char* built_in) {
  const char* path = std::getenv(variable);
  return path && *path ? path : built_in;
}

// Runs `argv` without a shell, its stdout and stderr into `log`; returns the exit status.
absl::StatusOr<int> Run(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::InternalError("cannot run the linker " + argv[0] + ": " + std::strerror(error));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Writes `object` (and each of `inputs`, file name -> bytes, linked after it) into a fresh
// directory, runs `linker` with `flags`, the output and the inputs, and returns the output's
// bytes; a failure names the linker as `name`.
absl::StatusOr<std::string> Link(std::string_view object, const char* name,
                                 const std::string& linker, const std::vector<std::string>& flags,
                                 const std::map<std::string, std::string>& inputs = {}) {
  auto dir = TempDir::Create();
  if (!dir.ok()) return dir.status();
  std::string input = dir->File("model.o"), output = dir->File("model.out");
  std::string log = dir->File("link.log");
  if (absl::Status s = WriteFile(input, object); !s.ok()) return s;
  std::vector<std::string> argv = {linker};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", output, input});
  for (const auto& [file, bytes] : inputs) {
    if (absl::Status s = WriteFile(dir->File(file), bytes); !s.ok()) return s;
    argv.push_back(dir->File(file));
  }
  auto status = Run(argv, log);
  if (!status.ok()) return status.status();
  if (*status != 0) {
    auto text = ReadFile(log);
    return absl::InternalError(std::string(name) + " failed (exit " + std::to_string(*status) +
                               "): " + (text.ok() ? *text : std::string("no output")));
  }
  return ReadFile(output);
}

}  // namespace

absl::StatusOr<std::string> LinkSharedObject(std::string_view object, const std::string& soname,
                                             const std::vector<NeededLibrary>& needed) {
  const std::string lld = LinkerPath("KILN_LD_LLD", KILN_LD_LLD);
  // A library is linked against a stub with its soname rather than the library itself, so
  // the compiling machine needs no copy of it for the target's arch; the artifact only
  // records the soname and the symbols, and the machine that loads it supplies the library.
  std::map<std::string, std::string> libraries;
  for (const NeededLibrary& library : needed) {
    KILN_ASSIGN_OR_RETURN(libraries[library.soname],
                          Link(library.stub_object, "ld.lld", lld,
                               {"-shared", "--hash-style=both", "-soname", library.soname}));
  }
  return Link(
      object, "ld.lld", lld,
      {"-shared", "--no-undefined", "-z", "noexecstack", "--hash-style=both", "-soname", soname},
      libraries);
}

absl::StatusOr<std::string> LinkWasmModule(std::string_view object) {
  // Kernel-local buffers (up to 1 MiB each) live on the stack: 8 MiB, as a Linux thread has.
  std::vector<std::string> flags = {"--no-entry", "--stack-first", "-z", "stack-size=8388608",
                                    "--export=__heap_base"};
  for (const char* symbol : {KILN_SYMBOL_ABI_VERSION, KILN_SYMBOL_SIGNATURE,
                             KILN_SYMBOL_INFER_SHAPES, KILN_SYMBOL_RUN, "kiln_wasm_env"}) {
    flags.push_back(std::string("--export=") + symbol);
  }
  return Link(object, "wasm-ld", LinkerPath("KILN_WASM_LD", KILN_WASM_LD), flags);
}

absl::StatusOr<std::vector<DynamicSymbol>> ListDynamicSymbols(std::string_view shared_object) {
  llvm::MemoryBufferRef buffer(llvm::StringRef(shared_object.data(), shared_object.size()),
                               "shared object");
  auto file = llvm::object::ObjectFile::createObjectFile(buffer);
  if (!file) {
    return absl::InvalidArgumentError("not an object file: " + llvm::toString(file.takeError()));
  }
  auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(file->get());
  if (!elf) return absl::InvalidArgumentError("not an ELF file");
  std::vector<DynamicSymbol> symbols;
  for (const llvm::object::ELFSymbolRef& symbol : elf->getDynamicSymbolIterators()) {
    auto flags = symbol.getFlags();
    auto name = symbol.getName();
    if (!flags || !name) {
      llvm::consumeError(flags.takeError());
      llvm::consumeError(name.takeError());
      return absl::InvalidArgumentError("malformed dynamic symbol table");
    }
    if (*flags & llvm::object::SymbolRef::SF_FormatSpecific) continue;  // the null symbol
    symbols.push_back({name->str(), (*flags & llvm::object::SymbolRef::SF_Undefined) != 0});
  }
  return symbols;
}

}  // namespace kiln::codegen
