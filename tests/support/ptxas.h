// The CUDA toolkit's PTX assembler, for tests that check generated PTX where it is installed,
// and the PTX a CUDA artifact carries.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kiln/artifact_abi.h"

namespace kiln::testing {

// $KILN_PTXAS, else ptxas on PATH, else empty (not installed).
inline std::string FindPtxas() {
  if (const char* path = std::getenv("KILN_PTXAS"); path && *path) return path;
  const char* dirs = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(dirs ? dirs : "", ':')) {
    std::string candidate = absl::StrCat(dir, "/ptxas");
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Assembles `ptx` for `arch` ("sm_80") with `ptxas`; its messages on failure.
inline absl::Status AssemblePtx(const std::string& ptxas, const std::string& ptx,
                                const std::string& arch) {
  char path[] = "/tmp/kiln-ptx-XXXXXX.ptx";
  int fd = mkstemps(path, 4);
  if (fd < 0) return absl::InternalError("cannot create a temporary PTX file");
  close(fd);
  std::ofstream(path, std::ios::binary) << ptx;
  const std::string log = std::string(path) + ".log";
  const std::string command =
      absl::StrCat(ptxas, " -arch=", arch, " ", path, " -o /dev/null > ", log, " 2>&1");
  const int status = std::system(command.c_str());
  std::ostringstream output;
  output << std::ifstream(log).rdbuf();
  std::remove(path);
  std::remove(log.c_str());
  if (status != 0) return absl::InternalError("ptxas rejected the PTX: " + output.str());
  return absl::OkStatus();
}

// The PTX a CUDA artifact (an x86_64 shared object) carries, read through its exports, with
// no GPU needed; an error unless it has one `.entry` per kernel it names.
inline absl::StatusOr<std::string> CudaArtifactPtx(const std::string& artifact) {
  char path[] = "/tmp/kiln-cuda-XXXXXX.so";
  int fd = mkstemps(path, 3);
  if (fd < 0) return absl::InternalError("cannot create a temporary artifact file");
  close(fd);
  std::ofstream(path, std::ios::binary) << artifact;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  std::remove(path);
  if (handle == nullptr) return absl::InternalError(std::string("dlopen: ") + dlerror());
  auto ptx = reinterpret_cast<KilnGpuTextFn>(dlsym(handle, KILN_SYMBOL_GPU_PTX));
  auto kernels = reinterpret_cast<KilnGpuTextFn>(dlsym(handle, KILN_SYMBOL_GPU_KERNELS));
  std::string text = ptx ? ptx() : "", names = kernels ? kernels() : "";
  dlclose(handle);
  if (!ptx || !kernels) return absl::InternalError("the artifact exports no PTX or no kernels");
  size_t entries = 0;
  for (size_t at = text.find(".entry "); at != std::string::npos;
       at = text.find(".entry ", at + 1)) {
    ++entries;
  }
  size_t named = std::count(names.begin(), names.end(), '\n');
  if (entries != named) {
    return absl::InternalError(
        absl::StrCat("the PTX has ", entries, " entries for ", named, " kernels"));
  }
  return text;
}

}  // namespace kiln::testing
