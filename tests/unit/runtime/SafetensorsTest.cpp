// safetensors round trip, format details, bad files, and crash safety of the
// atomic write.
#include "backends/common/Safetensors.h"
#include "backends/common/FileIo.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace autoddl::rt;

namespace {

std::string tempDir() {
  const std::string d = "/tmp/autoddl-st-" + std::to_string(::getpid());
  make_directories(d);
  return d;
}

int countFiles(const std::string &dir) {
  int n = 0;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d))
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

} // namespace

TEST(Safetensors, RoundTripKeepsNamesShapesValuesAndMetadata) {
  const std::string path = tempDir() + "/rt.safetensors";
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f};
  safetensors_write(
      path, {{"wte.weight", {2, 3}, a.data()}, {"ln_f.bias", {1}, b.data()}},
      {{"step", "3"}});
  const SafetensorsFile f = safetensors_read(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors.at("wte.weight").shape, (Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(f.tensors.at("wte.weight").begin(),
                               f.tensors.at("wte.weight").end()),
            a);
  EXPECT_EQ(f.tensors.at("ln_f.bias").data[0], -0.5f);
  EXPECT_EQ(f.metadata.at("step"), "3");
  // Format: 8-byte little-endian header length, a multiple of 8 here (padded),
  // tensors in name order, so ln_f.bias (4 bytes) sits at data offset 0 and
  // wte.weight at 4.
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | uint8_t(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 4 * 7);
  EXPECT_NE(bytes.find("\"ln_f.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_"
                       "offsets\":[0,4]}"),
            std::string::npos);
}

// What each rank of a checkpoint writes by: the layout every rank computes is
// the written file's, and the index of a file says where each tensor lies.
TEST(Safetensors, LayoutAndIndexLocateEveryTensor) {
  const std::string path = tempDir() + "/layout.safetensors";
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f}, c;
  safetensors_write(path,
                    {{"z", {2, 3}, a.data()},
                     {"b", {1}, b.data()},
                     {"empty", {0, 4}, c.data()}},
                    {{"step", "4"}});
  const SafetensorsIndex layout = safetensors_layout(
      path, {{"z", {2, 3}}, {"b", {1}}, {"empty", {0, 4}}}, {{"step", "4"}});
  const SafetensorsIndex index = safetensors_index(path);
  const std::string bytes = read_file(path);
  EXPECT_EQ(layout.size, bytes.size());
  EXPECT_EQ(index.size, bytes.size());
  EXPECT_EQ(layout.head, bytes.substr(0, layout.head.size()));
  EXPECT_EQ(index.head, layout.head);
  EXPECT_EQ(index.metadata.at("step"), "4");
  for (const auto &[name, where] : layout.tensors) {
    ASSERT_TRUE(index.tensors.count(name)) << name;
    EXPECT_EQ(index.tensors.at(name).offset, where.offset) << name;
    EXPECT_EQ(index.tensors.at(name).shape, where.shape) << name;
  }
  float z5 = 0;
  std::memcpy(&z5, bytes.data() + index.tensors.at("z").offset + 5 * 4, 4);
  EXPECT_EQ(z5, 6.0f);
  EXPECT_THROW(safetensors_layout(path, {{"a", {1}}, {"a", {2}}}, {}),
               std::runtime_error); // a name given twice
}

TEST(Safetensors, BadFilesAreClearErrors) {
  const std::string dir = tempDir();
  const std::string path = dir + "/bad.safetensors";
  write_file_atomically(path,
                        std::string("\x10\x00\x00\x00\x00\x00\x00\x00{}", 10));
  EXPECT_THROW(safetensors_read(path),
               std::runtime_error); // header longer than the file
  const std::string hdr =
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}";
  std::string file(8, '\0');
  file[0] = char(hdr.size());
  write_file_atomically(path, file + hdr + std::string(4, '\0'));
  try {
    safetensors_read(path);
    FAIL() << "shape/offset mismatch accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("\"w\" of shape [2] has 4 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(safetensors_read(dir + "/missing.safetensors"),
               std::runtime_error);
  std::vector<float> v = {1};
  EXPECT_THROW(
      safetensors_write(path, {{"a", {1}, v.data()}, {"a", {1}, v.data()}}),
      std::runtime_error);
}

// Crash safety: a writer killed mid-write (SIGXFSZ when the file outgrows
// RLIMIT_FSIZE, in a child process) and a writer whose write fails (SIGXFSZ
// ignored: write returns EFBIG) both leave the old checkpoint intact; the
// failing writer also removes its temporary file.
TEST(Safetensors, FailedOrKilledWriteLeavesOldFileIntact) {
  const std::string dir = tempDir() + "/crash";
  make_directories(dir);
  const std::string path = dir + "/model.safetensors";
  std::vector<float> old = {7, 8, 9};
  safetensors_write(path, {{"w", {3}, old.data()}});
  std::vector<float> big(1 << 20, 1.0f); // 4 MiB of new data

  for (bool killed : {true, false}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      rlimit lim{65536, 65536};
      setrlimit(RLIMIT_FSIZE, &lim);
      if (!killed)
        std::signal(SIGXFSZ, SIG_IGN);
      try {
        safetensors_write(path, {{"w", {int64_t(big.size())}, big.data()}});
      } catch (const std::runtime_error &) {
        _exit(3); // the error the caller reports
      }
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (killed) {
      ASSERT_TRUE(WIFSIGNALED(status));
      EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
    } else {
      ASSERT_TRUE(WIFEXITED(status));
      EXPECT_EQ(WEXITSTATUS(status), 3);
    }
    const SafetensorsFile f = safetensors_read(path);
    ASSERT_EQ(f.tensors.at("w").numel(), 3);
    EXPECT_EQ(f.tensors.at("w").data[2], 9.0f);
  }
  // The killed writer left its temporary file behind (nothing can remove it);
  // the failing one removed its own: the old file plus one leftover.
  EXPECT_EQ(countFiles(dir), 2);
}

// Runs last in this file (gtest keeps declaration order): removes what the
// tests above wrote.
TEST(Safetensors, ZzCleanUp) { std::filesystem::remove_all(tempDir()); }

// What sits at an output's name is the user's: a FIFO, a device or a link to
// one is refused and left as it was (the rename would replace it); a link to a
// regular file is written through and stays a link.
TEST(Safetensors, OutputsNeverReplaceFifosOrDevices) {
  const std::string dir = tempDir() + "/special";
  make_directories(dir);
  const std::string fifo = dir + "/fifo", full = dir + "/full";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(::symlink("/dev/full", full.c_str()), 0);
  for (const std::string &p : {fifo, full, std::string("/dev/full")})
    EXPECT_THROW(write_file_atomically(p, "x"), std::runtime_error) << p;
  struct stat st {};
  EXPECT_TRUE(::lstat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode));
  EXPECT_TRUE(::lstat(full.c_str(), &st) == 0 && S_ISLNK(st.st_mode));
  const std::string file = dir + "/file", link = dir + "/link";
  write_file_atomically(file, "old");
  ASSERT_EQ(::symlink("file", link.c_str()), 0);
  write_file_atomically(link, "new");
  EXPECT_TRUE(::lstat(link.c_str(), &st) == 0 && S_ISLNK(st.st_mode));
  EXPECT_EQ(read_file(file), "new");
  std::filesystem::remove_all(dir);
}
