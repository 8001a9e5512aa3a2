// The CUDA toolkit's PTX assembler, for tests that check generated PTX where it is installed.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

}  // namespace kiln::testing
