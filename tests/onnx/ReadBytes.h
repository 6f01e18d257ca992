// The whole of a test data file (empty when it cannot be read), the node
// tests of a libonnx-testdata folder, and the loop the node-test checkers
// share: the ONNX node-test readers' common input.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <map>
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

/// Runs the one-node models of `root`'s node tests whose node `wanted(node)`
/// accepts: `run(dir, model)` returns "" (passed), "skip: why" or the failure.
/// Prints each skip and failure, then per op of `required` (and every op run)
/// its passed, skipped and failed counts; an op with no passed test is a
/// failure too. Returns the failures, or -1 when `root` cannot be opened.
template <class Wanted, class Run>
int runNodeTests(const std::string &root,
                 const std::vector<std::string> &required, Wanted wanted,
                 Run run) {
  std::vector<std::string> names;
  if (!nodeTestNames(root, names)) {
    std::cerr << root << ": cannot open\n";
    return -1;
  }
  std::map<std::string, std::array<int, 3>> counts; // passed, skipped, failed
  for (const std::string &op : required)
    counts[op];
  int failures = 0;
  for (const std::string &name : names) {
    const std::string dir = root + "/" + name;
    onnx::ModelProto model;
    if (!model.ParseFromString(readBytes(dir + "/model.onnx")) ||
        model.graph().node_size() != 1)
      continue; // expanded (function) tests and multi-node graphs
    const onnx::NodeProto &n = model.graph().node(0);
    if (!wanted(n))
      continue;
    std::array<int, 3> &c = counts[n.op_type()];
    const std::string r = run(dir, model);
    if (r.empty()) {
      ++c[0];
    } else if (r.rfind("skip: ", 0) == 0) {
      ++c[1];
      std::cout << "  skipped " << name << " (" << r.substr(6) << ")\n";
    } else {
      ++c[2];
      ++failures;
      std::cout << "  FAILED " << name << ": " << r << "\n";
    }
  }
  int total = 0;
  for (const auto &[op, c] : counts) {
    std::cout << op << ": " << c[0] << " passed, " << c[1] << " skipped, "
              << c[2] << " failed\n";
    total += c[0];
    if (c[0] == 0) {
      std::cout << "  FAILED: no test of " << op << " passed\n";
      ++failures;
    }
  }
  std::cout << total << " node tests passed\n";
  return failures;
}
