//===- ImportTestUtil.h - temporary files and error capture for tests ----===//
#pragma once

#include "ir/import/ModelImporter.h"
#include "support/UserError.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

namespace autoddl::testing {

/// A fresh directory under $TMPDIR, removed at destruction.
class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    tmpl += "/autoddl-import-test-XXXXXX";
    char *d = ::mkdtemp(tmpl.data());
    path = d ? d : "";
  }
  ~TempDir() {
    if (!path.empty())
      std::system(("rm -rf '" + path + "'").c_str());
  }
  std::string write(const std::string &name, const std::string &text) const {
    std::string p = path + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string path;
};

/// The UserError message of importing `text`, or "" when it imports.
inline std::string importError(const std::string &text,
                               import::ImportOptions options = {}) {
  try {
    import::importModelText(text, "m.json", "m", options);
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

} // namespace autoddl::testing
