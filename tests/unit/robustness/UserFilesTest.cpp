//===- UserFilesTest.cpp - reading inputs, writing outputs ---------------===//
//
// Regression tests for issue 23: inputs that are not regular files, JSON
// nested past the stack, outputs that are devices, FIFOs, links to them or an
// input of the command, and unbounded one-line messages.
//
//===----------------------------------------------------------------------===//
#include "support/UserFiles.h"
#include "support/JsonFile.h"
#include "support/UserError.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace autoddl {
namespace {

namespace fs = std::filesystem;

class UserFilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    clearUserInputs(); // a removed input's inode may be reused by a new file
    dir = fs::temp_directory_path() /
          ("autoddl-userfiles-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string path(const std::string &name) const {
    return (dir / name).string();
  }
  std::string write(const std::string &name, const std::string &text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  static std::string read(const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  /// The message of the UserError `f` throws ("" when it throws none).
  template <typename F> static std::string errorOf(F f) {
    try {
      f();
    } catch (const UserError &e) {
      return e.what();
    }
    return "";
  }

  fs::path dir;
};

TEST_F(UserFilesTest, RefusesWhatIsNotARegularFileByName) {
  std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A FIFO with no writer would block a plain open; it is refused at once.
  EXPECT_EQ(errorOf([&] { readUserFile(fifo, "model"); }),
            fifo + ": is a FIFO, expected a regular model file");
  EXPECT_EQ(errorOf([&] { readUserFile("/dev/zero", "cluster"); }),
            "/dev/zero: is a character device, expected a regular cluster "
            "file");
  EXPECT_EQ(errorOf([&] { readUserFile(dir.string(), "plan"); }),
            dir.string() + ": is a directory, expected a plan file");
  EXPECT_NE(errorOf([&] {
              readUserFile(path("missing"), "plan");
            }).find("cannot open plan file"),
            std::string::npos);
  EXPECT_EQ(readUserFile(write("ok.json", "{}"), "model"), "{}");
}

TEST_F(UserFilesTest, JsonNestedPastTheLimitIsOneLineWithItsPosition) {
  // 100,000 nested arrays overflowed the stack before the depth check.
  std::string deep = "{\"n_embd\": " + std::string(100000, '[') +
                     std::string(100000, ']') + "}";
  std::string p = write("deep.json", deep);
  EXPECT_EQ(errorOf([&] { readJsonFile(p, "model"); }),
            p + ":1:" + std::to_string(11 + kMaxJsonDepth) +
                ": invalid JSON: nested deeper than " +
                std::to_string(kMaxJsonDepth) + " levels");
  // Brackets inside strings do not count; the limit itself is accepted.
  std::string atLimit = std::string(kMaxJsonDepth, '[') + "\"[[[[\"" +
                        std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parseJsonText(atLimit, "x.json"));
}

TEST_F(UserFilesTest, OutputRefusesDevicesFifosAndLinksToThem) {
  EXPECT_EQ(errorOf([&] { writeUserFile("/dev/full", "x"); }),
            "/dev/full: is a character device, not a regular file; refusing "
            "to write output there");
  std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(errorOf([&] { writeUserFile(fifo, "x"); }).find("is a FIFO"),
            std::string::npos);
  std::string devLink = path("dev-link");
  fs::create_symlink("/dev/null", devLink);
  EXPECT_NE(errorOf([&] {
              writeUserFile(devLink, "x");
            }).find("is a character device"),
            std::string::npos);
  std::string dangling = path("dangling");
  fs::create_symlink(path("nowhere"), dangling);
  EXPECT_NE(errorOf([&] {
              writeUserFile(dangling, "x");
            }).find("symbolic link to a missing file"),
            std::string::npos);
  EXPECT_NE(
      errorOf([&] { writeUserFile(dir.string(), "x"); }).find("is a directory"),
      std::string::npos);
  // Nothing was replaced: the links are still links, the FIFO a FIFO.
  EXPECT_TRUE(fs::is_symlink(devLink));
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_FALSE(fs::exists(path("nowhere")));
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(fs::directory_iterator(dir) == fs::directory_iterator(), false);
  for (const auto &e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(UserFilesTest, OutputThroughALinkToARegularFileKeepsTheLink) {
  std::string target = write("target.json", "old");
  ::chmod(target.c_str(), 0600);
  std::string link = path("link.json");
  fs::create_symlink(target, link);
  writeUserFile(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(target), "new");
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u); // the file's mode is kept
}

TEST_F(UserFilesTest, OutputMayNotBeAnInputOfTheCommand) {
  std::string model = write("model.json", "{\"model_type\": \"gpt2\"}");
  readUserFile(model, "model");
  EXPECT_EQ(errorOf([&] { writeUserFile(model, "plan"); }),
            model + ": is also an input of this command; refusing to "
                    "overwrite it");
  // Nor through a link that leads to it.
  std::string link = path("link.json");
  fs::create_symlink(model, link);
  EXPECT_NE(
      errorOf([&] { writeUserFile(link, "plan"); }).find("is also an input"),
      std::string::npos);
  EXPECT_EQ(read(model), "{\"model_type\": \"gpt2\"}");
}

TEST_F(UserFilesTest, LongMessageLinesAreCapped) {
  std::string longLine(1 << 20, 'x');
  std::string capped = capMessage("a: " + longLine, 100);
  EXPECT_EQ(capped.size(),
            100 + std::string("... (1048479 more bytes)").size());
  EXPECT_EQ(capped.substr(capped.size() - 24), "... (1048479 more bytes)");
  EXPECT_EQ(capMessage("short\nlines"), "short\nlines");
}

} // namespace
} // namespace autoddl
