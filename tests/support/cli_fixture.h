// For tests of the kiln CLI: a fresh folder per test, and RunCli with its output captured.
#pragma once

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli.h"
#include "gtest/gtest.h"

namespace kiln::testing {

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `name` inside this test's folder.
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Runs `kiln words...`; its stdout and stderr are left in out_ and err_.
  int Kiln(std::vector<std::string> words) {
    out_.str("");
    err_.str("");
    return client::RunCli(words, out_, err_);
  }

  std::filesystem::path dir_ = std::filesystem::path(::testing::TempDir()) /
                               ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::ostringstream out_, err_;
};

}  // namespace kiln::testing
