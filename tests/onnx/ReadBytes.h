// The whole of a test data file (empty when it cannot be read), and the
// node tests of a libonnx-testdata folder: the ONNX node-test readers' common
// input.
#pragma once

#include <algorithm>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The test_* folders of `root`, sorted; false when it cannot be opened.
inline bool nodeTestNames(const std::string &root,
                          std::vector<std::string> &names) {
  DIR *d = opendir(root.c_str());
  if (!d)
    return false;
  while (dirent *e = readdir(d))
    if (std::string(e->d_name).rfind("test_", 0) == 0)
      names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  return true;
}
