// A minimal .npy (version 1.0, little-endian float32, C order) reader and writer for tests,
// written independently of the client's tensor I/O so that the two check each other.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::testing {

struct NpyF32 {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

inline void WriteNpyF32(const std::string& path, const NpyF32& a) {
  std::string shape = "(";
  for (int64_t d : a.shape) shape += std::to_string(d) + ", ";
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(a.values.data()), a.values.size() * sizeof(float));
}

// Returns false if the file is not a float32 .npy this reader understands.
inline bool ReadNpyF32(const std::string& path, NpyF32& a) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return false;
  size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  std::string header = bytes.substr(10, header_len);
  if (header.find("'<f4'") == std::string::npos) return false;
  size_t open = header.find("'shape': (");
  size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) return false;
  std::string dims = header.substr(open + 10, close - open - 10);
  a.shape.clear();
  std::stringstream ss(dims);
  std::string item;
  int64_t count = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    a.shape.push_back(std::stoll(item));
    count *= a.shape.back();
  }
  size_t data = 10 + header_len;
  if (bytes.size() != data + count * sizeof(float)) return false;
  a.values.resize(count);
  std::memcpy(a.values.data(), bytes.data() + data, count * sizeof(float));
  return true;
}

}  // namespace kiln::testing
