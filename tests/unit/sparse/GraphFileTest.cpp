// The graph-file reader (backends/common/GraphFile.h): Matrix Market
// coordinate files and edge lists, and a message naming the file and line for
// each kind of bad input.
#include "backends/common/GraphFile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>

using autoddl::rt::GraphFile;
using autoddl::rt::readGraphFile;
using Entries = std::vector<std::pair<uint32_t, uint32_t>>;

namespace {

std::string writeFile(const std::string &name, const std::string &text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

/// The message readGraphFile throws for `text`.
std::string errorOf(const std::string &name, const std::string &text) {
  const std::string path = writeFile(name, text);
  try {
    readGraphFile(path);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST(GraphFile, MatrixMarketGeneralPattern) {
  const GraphFile g =
      readGraphFile(writeFile("general.mtx", "%%MatrixMarket matrix coordinate "
                                             "pattern general\n"
                                             "% a comment\n"
                                             "3 3 4\n"
                                             "1 2\n3 1\n2 2\n1 2\n"));
  EXPECT_EQ(g.rows, 3);
  // As read: 0-based, the duplicate and the diagonal kept.
  EXPECT_EQ(g.entries, (Entries{{0, 1}, {2, 0}, {1, 1}, {0, 1}}));
  EXPECT_NE(g.params.find("pattern general, 3 x 3, 4 entries"),
            std::string::npos)
      << g.params;
}

TEST(GraphFile, MatrixMarketSymmetricMirrorsOffDiagonalEntries) {
  const GraphFile g = readGraphFile(
      writeFile("sym.mtx", "%%MatrixMarket matrix coordinate real symmetric\n"
                           "4 4 3\n2 1 0.5\n4 4 -1e3\n4 2 7\n"));
  EXPECT_EQ(g.rows, 4);
  EXPECT_EQ(g.entries, (Entries{{1, 0}, {0, 1}, {3, 3}, {3, 1}, {1, 3}}));
}

TEST(GraphFile, RectangularMatrixIsHeldSquare) {
  const GraphFile g = readGraphFile(
      writeFile("rect.mtx", "%%MatrixMarket matrix coordinate integer general\n"
                            "2 5 2\n1 5 3\n2 1 4\n"));
  EXPECT_EQ(g.rows, 5);
  EXPECT_EQ(g.entries, (Entries{{0, 4}, {1, 0}}));
  EXPECT_NE(g.params.find("held square"), std::string::npos);
}

TEST(GraphFile, EdgeListSkipsCommentsAndCountsVertices) {
  const GraphFile g = readGraphFile(writeFile(
      "edges.txt", "# SNAP-style header\n# Nodes: 6\n0 1\n\n5\t2 extra\n"
                   "% another comment\n1 0\n"));
  EXPECT_EQ(g.rows, 6);
  EXPECT_EQ(g.entries, (Entries{{0, 1}, {5, 2}, {1, 0}}));
}

TEST(GraphFile, BadInputNamesTheFileLineAndCause) {
  const char *mm = "%%MatrixMarket matrix coordinate pattern general\n";
  const struct {
    const char *name;
    std::string text;
    const char *message;
  } cases[] = {
      {"array.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n",
       "array.mtx:1: a dense Matrix Market 'array' file"},
      {"range.mtx", std::string(mm) + "3 3 2\n1 1\n4 1\n",
       "range.mtx:4: entry (4, 1) outside the 3 x 3 matrix"},
      {"zero.mtx", std::string(mm) + "3 3 1\n0 1\n",
       "zero.mtx:3: entry (0, 1) outside"},
      {"short.mtx", std::string(mm) + "3 3 3\n1 1\n2 2\n",
       "short.mtx: ends after 2 of the 3 declared entries"},
      {"long.mtx", std::string(mm) + "3 3 1\n1 1\n2 2\n",
       "long.mtx:4: more entries than the 1 declared"},
      {"nosize.mtx", std::string(mm) + "% only comments\n",
       "nosize.mtx:2: no size line"},
      {"field.mtx",
       "%%MatrixMarket matrix coordinate quaternion general\n1 1 0\n",
       "unknown Matrix Market field 'quaternion'"},
      {"bad.txt", "0 1\n1 x\n", "bad.txt:2: expected an edge"},
      {"neg.txt", "0 -1\n", "neg.txt:1: expected an edge"},
      {"big.txt", "0 2147483647\n", "big.txt:1: vertex id"},
      {"none.txt", "# nothing\n", "none.txt: no edges"},
      {"empty.txt", "", "empty.txt: empty file"},
  };
  for (const auto &c : cases)
    EXPECT_NE(errorOf(c.name, c.text).find(c.message), std::string::npos)
        << c.name << ": " << errorOf(c.name, c.text);
  try {
    readGraphFile(testing::TempDir() + "/does-not-exist.mtx");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("does-not-exist.mtx: cannot open"),
              std::string::npos)
        << e.what();
  }
}
