// The whole of a test data file (empty when it cannot be read): the ONNX
// node-test readers' common input.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
