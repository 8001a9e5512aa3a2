// kiln: compile ONNX models (in-process or through kilnd) and run the artifacts.
#include <iostream>
#include <string>
#include <vector>

#include "client/cli.h"

int main(int argc, char** argv) {
  return kiln::client::RunCli(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                              std::cerr);
}
