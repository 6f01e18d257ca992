// Sharded checkpoints (see Checkpoint.h).
#include "backends/host/Checkpoint.h"

#include "backends/common/FileIo.h"
#include "backends/common/Metrics.h"
#include "backends/common/Safetensors.h"
#include "backends/host/MpiCheck.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace autoddl::rt {

namespace {

/// Calls f(global, k, count) for each run of an entry's held elements that is
/// contiguous both in the tensor (from row-major element `global`) and in
/// entry.data (from element `k`), adjacent runs merged.
template <typename F> void forEachRun(const CheckpointEntry &e, F f) {
  const Slice &s = e.slice;
  const int64_t end = std::min(s.numel(), e.flat_begin + e.held_count());
  const int64_t inner = s.local.empty() ? 1 : s.local.back();
  uint64_t runGlobal = 0;
  int64_t runK = 0, runCount = 0;
  for (int64_t k = e.flat_begin; inner > 0 && k < end;) {
    const int64_t len = std::min(end, (k / inner + 1) * inner) - k;
    const uint64_t g = slice_global_index(s, k);
    if (runCount > 0 && g == runGlobal + uint64_t(runCount)) {
      runCount += len;
    } else {
      if (runCount > 0)
        f(runGlobal, runK, runCount);
      runGlobal = g, runK = k - e.flat_begin, runCount = len;
    }
    k += len;
  }
  if (runCount > 0)
    f(runGlobal, runK, runCount);
}

/// The elements of the tensor an entry holds (its padding not counted).
int64_t realCount(const CheckpointEntry &e) {
  return std::max<int64_t>(
      0,
      std::min(e.slice.numel(), e.flat_begin + e.held_count()) - e.flat_begin);
}

std::runtime_error ioError(const std::string &path, const char *what) {
  return std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

void fsyncDir(const std::string &dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// An older step-N is replaced whole, so only when it holds nothing but a
/// checkpoint's own regular files (and write_file_atomically's leftovers):
/// a link, a device or a file of the user's there is named and refused.
void checkReplaceable(const std::filesystem::path &dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec)))
    throw std::runtime_error(dir.string() + ": not a folder (a link or a "
                                            "file); refusing to replace it");
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string path = it->path().string();
    const std::string name = it->path().filename().string();
    check_replaceable(path); // a FIFO, a device, a link to one: by name
    if (fs::is_symlink(it->symlink_status(ec)))
      throw std::runtime_error(path + ": a link; refusing to replace " +
                               dir.string() + " (written whole)");
    // bitsnap.safetensors and bitsnap.R.safetensors: a compressed one's.
    const bool bitsnap =
        name.rfind("bitsnap.", 0) == 0 && name.size() >= 19 &&
        name.compare(name.size() - 12, 12, ".safetensors") == 0;
    if (name != "model.safetensors" && name != "optimizer.safetensors" &&
        !bitsnap && name != "config.json" &&
        name.find(".tmp.") == std::string::npos)
      throw std::runtime_error(path +
                               ": not a file of a checkpoint; refusing "
                               "to replace " +
                               dir.string());
  }
}

std::string tmpFolder(const std::string &dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  const fs::path parent = d.parent_path().empty() ? "." : d.parent_path();
  return (parent / ("." + d.filename().string() + ".tmp")).string();
}

/// Rank 0's part of prepare_checkpoint_folder.
void makeTmpFolder(const CheckpointFolder &folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string tmp = tmpFolder(folder.dir);
  if (fs::exists(fs::symlink_status(folder.dir, ec)))
    checkReplaceable(folder.dir);
  fs::remove_all(tmp, ec); // a killed run's leftover
  try {
    make_directories(tmp);
    for (const ShardedFile &f : folder.files)
      f.create(tmp + "/" + f.name);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

/// The marker rank r leaves in the temporary folder once its part is written
/// and synced: empty, or its error.
std::string markerPath(const std::string &tmp, int r) {
  return tmp + "/.done-" + std::to_string(r);
}

/// Rank 0: waits until every other rank left its marker; throws the first
/// error one reports. The markers are removed. The ranks write alike amounts
/// at once, so a rank still writing AUTODDL_WATCHDOG_TIMEOUT seconds (default
/// 600; 0: no limit) after rank 0 is done is stuck or gone: a dead peer
/// cannot leave rank 0 waiting here for ever once the steps are over.
void waitForRanks(const std::string &tmp, int ranks) {
  namespace fs = std::filesystem;
  const char *env = std::getenv("AUTODDL_WATCHDOG_TIMEOUT");
  const double limit = env && *env ? std::atof(env) : 600.0;
  Timer waited;
  std::string error;
  for (int r = 1; r < ranks; ++r) {
    const std::string marker = markerPath(tmp, r);
    std::error_code ec;
    while (!fs::exists(marker, ec)) {
      if (limit > 0 && waited.seconds() > limit) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", limit);
        throw std::runtime_error(
            tmp + ": rank " + std::to_string(r) +
            " did not finish writing its part of the checkpoint within " +
            seconds + " s of rank 0 (AUTODDL_WATCHDOG_TIMEOUT)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const std::string text = read_file(marker);
    if (error.empty() && !text.empty())
      error = text;
    fs::remove(marker, ec);
  }
  if (!error.empty())
    throw std::runtime_error(error);
}

/// The files of folder.own_files: made and written by this rank alone.
void writeOwnFiles(const CheckpointFolder &folder, const std::string &tmp) {
  if (!folder.own_files)
    return;
  for (const ShardedFile &f : folder.own_files()) {
    f.create(tmp + "/" + f.name);
    f.write(tmp + "/" + f.name);
  }
}

} // namespace

void ShardedFile::create(const std::string &path) const {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw ioError(path, "cannot create");
  const bool ok = ::write(fd, layout.head.data(), layout.head.size()) ==
                      ssize_t(layout.head.size()) &&
                  ::ftruncate(fd, off_t(layout.size)) == 0;
  const int err = errno;
  ::close(fd);
  errno = err;
  if (!ok)
    throw ioError(path, "cannot write");
}

void ShardedFile::write(const std::string &path) const {
  const int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0)
    throw ioError(path, "cannot open for writing");
  for (const Run &run : runs) {
    const char *p = reinterpret_cast<const char *>(run.data);
    size_t left = size_t(run.count) * sizeof(float);
    off_t at = off_t(run.offset);
    while (left > 0) {
      const ssize_t n = ::pwrite(fd, p, left, at);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        errno = n == 0 ? ENOSPC : err;
        throw ioError(path, "write error");
      }
      p += n, left -= size_t(n), at += n;
    }
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    throw ioError(path, "cannot sync");
  }
  ::close(fd);
}

CheckpointBlocks checkpoint_blocks(const std::vector<CheckpointEntry> &entries,
                                   MPI_Comm comm) {
  const int p = comm_size(comm);
  // Per entry: held, the flat range [begin, end) of real elements, offset
  // and local size per dimension: every rank's, to find which distinct
  // blocks exist and which rank writes each (the lowest holding it).
  std::vector<int64_t> mine;
  for (const CheckpointEntry &e : entries) {
    const int64_t real = e.data ? realCount(e) : 0;
    mine.push_back(real > 0);
    mine.push_back(real > 0 ? e.flat_begin : 0);
    mine.push_back(real > 0 ? e.flat_begin + real : 0);
    for (const Shape *dims : {&e.slice.offset, &e.slice.local})
      for (int64_t d : *dims)
        mine.push_back(real > 0 ? d : 0);
  }
  const size_t n = mine.size();
  std::vector<int64_t> all(n * size_t(p));
  mpiCheck(MPI_Allgather(mine.data(), int(n), MPI_INT64_T, all.data(), int(n),
                         MPI_INT64_T, comm));
  CheckpointBlocks b;
  b.writer.assign(size_t(p), std::vector<int>(entries.size(), -1));
  b.real.assign(size_t(p), std::vector<int64_t>(entries.size(), 0));
  size_t pos = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t width = 3 + 2 * entries[i].slice.full.size();
    for (int q = 0; q < p; ++q) {
      const int64_t *d = all.data() + size_t(q) * n + pos;
      if (!d[0])
        continue;
      b.real[size_t(q)][i] = d[2] - d[1];
      int o = 0;
      while (o < q &&
             !std::equal(d, d + width, all.data() + size_t(o) * n + pos))
        ++o;
      b.writer[size_t(q)][i] = o;
    }
    pos += width;
  }
  return b;
}

ShardedFile checkpoint_shard(const std::string &name,
                             const std::vector<CheckpointEntry> &entries,
                             const std::map<std::string, std::string> &metadata,
                             MPI_Comm comm, bool own_stable) {
  const int r = comm_rank(comm);
  const CheckpointBlocks blocks = checkpoint_blocks(entries, comm);
  ShardedFile out;
  out.name = name;
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const CheckpointEntry &e : entries)
    shapes.push_back({e.name, e.file_shape()});
  out.layout = safetensors_layout(name, shapes, metadata);
  for (size_t i = 0; i < entries.size(); ++i) {
    const CheckpointEntry &e = entries[i];
    int64_t covered = 0;
    for (size_t q = 0; q < blocks.writer.size(); ++q)
      if (blocks.writer[q][i] == int(q))
        covered += blocks.real[q][i];
    const bool writes = blocks.writer[size_t(r)][i] == r;
    if (covered != numel(e.slice.full))
      throw std::runtime_error(name + ": tensor \"" + e.name +
                               "\" is not fully held by any rank");
    if (!writes)
      continue;
    const float *src = e.data;
    if (!own_stable) {
      out.owned.emplace_back(e.data, e.data + e.held_count());
      src = out.owned.back().data();
    }
    const uint64_t base = out.layout.tensors.at(e.name).offset;
    forEachRun(e, [&](uint64_t g, int64_t k, int64_t count) {
      out.runs.push_back({base + g * sizeof(float), src + k, count});
    });
  }
  return out;
}

void checkpoint_save(const std::string &path,
                     const std::vector<CheckpointEntry> &entries,
                     const std::map<std::string, std::string> &metadata,
                     MPI_Comm comm) {
  const int r = comm_rank(comm);
  ShardedFile f;
  try {
    f = checkpoint_shard(path, entries, metadata, comm, true);
  } catch (const std::exception &) {
    if (r == 0) // found alike on every rank: reported once
      throw;
    return;
  }
  const std::string tmp = path + ".tmp.shards";
  std::string error;
  if (r == 0) {
    try {
      f.create(tmp);
    } catch (const std::exception &e) {
      error = e.what();
    }
  }
  int ok = error.empty();
  mpiCheck(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
  if (ok) {
    try {
      f.write(tmp);
    } catch (const std::exception &e) {
      error = e.what();
    }
    int mineOk = error.empty();
    mpiCheck(MPI_Allreduce(&mineOk, &ok, 1, MPI_INT, MPI_MIN, comm));
  }
  if (r != 0) {
    if (!error.empty())
      throw std::runtime_error(error);
    return;
  }
  std::error_code ec;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0)
    error = path + ": cannot rename " + tmp + " to it: " + std::strerror(errno);
  if (!ok || !error.empty()) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error(error.empty() ? path + ": a rank could not write "
                                                    "its part"
                                           : error);
  }
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  fsyncDir(parent.empty() ? "." : parent.string());
}

std::map<std::string, std::string>
checkpoint_load(const std::string &path,
                const std::vector<CheckpointEntry> &entries) {
  const SafetensorsIndex index = safetensors_index(path);
  checkpoint_load(path, index, entries);
  return index.metadata;
}

void checkpoint_load(const std::string &path, const SafetensorsIndex &index,
                     const std::vector<CheckpointEntry> &entries) {
  for (const CheckpointEntry &e : entries) {
    auto it = index.tensors.find(e.name);
    if (it == index.tensors.end())
      throw std::runtime_error(path + ": no tensor \"" + e.name +
                               "\": a checkpoint of another model?");
    if (it->second.shape != e.file_shape())
      throw std::runtime_error(path + ": tensor \"" + e.name + "\" has shape " +
                               shape_str(it->second.shape) +
                               ", the model needs " +
                               shape_str(e.file_shape()));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw ioError(path, "cannot open");
  std::string error;
  for (const CheckpointEntry &e : entries) {
    if (!e.data || !error.empty())
      continue;
    std::fill(e.data, e.data + e.held_count(), 0.0f); // ZeRO's padding
    const uint64_t base = index.tensors.at(e.name).offset;
    forEachRun(e, [&](uint64_t g, int64_t k, int64_t count) {
      char *p = reinterpret_cast<char *>(e.data + k);
      size_t left = size_t(count) * sizeof(float);
      off_t at = off_t(base + g * sizeof(float));
      while (left > 0 && error.empty()) {
        const ssize_t got = ::pread(fd, p, left, at);
        if (got < 0 && errno == EINTR)
          continue;
        if (got <= 0)
          error = path + ": read error (" +
                  (got == 0 ? std::string("the file is shorter than its "
                                          "header says")
                            : std::string(std::strerror(errno))) +
                  ")";
        else
          p += got, left -= size_t(got), at += got;
      }
    });
  }
  ::close(fd);
  if (!error.empty())
    throw std::runtime_error(error);
}

void prepare_checkpoint_folder(CheckpointFolder &folder, MPI_Comm comm) {
  folder.rank = comm_rank(comm);
  folder.ranks = comm_size(comm);
  folder.prepared = true;
  if (folder.rank == 0) {
    try {
      makeTmpFolder(folder);
    } catch (const std::exception &e) {
      folder.error = e.what();
    }
  }
  int ok = folder.error.empty();
  mpiCheck(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
  if (!ok && folder.rank != 0)
    folder.files.clear(), folder.ready = nullptr, folder.skip = true;
}

void write_checkpoint_folder(const CheckpointFolder &folder) {
  namespace fs = std::filesystem;
  if (!folder.error.empty())
    throw std::runtime_error(folder.error);
  if (folder.skip)
    return;
  const fs::path dir(folder.dir);
  const fs::path parent = dir.parent_path().empty() ? "." : dir.parent_path();
  const std::string base = dir.filename().string();
  const std::string tmp = tmpFolder(folder.dir);
  const char *kill = std::getenv("AUTODDL_TEST_KILL_CHECKPOINT_WRITE");
  const bool killHere =
      kill && base == "step-" + std::string(kill) && folder.rank == 0;
  if (!folder.prepared)
    makeTmpFolder(folder); // one rank alone
  std::error_code ec;
  if (folder.rank != 0) {
    std::string error;
    try {
      if (folder.ready)
        folder.ready();
      for (const ShardedFile &f : folder.files)
        f.write(tmp + "/" + f.name);
      writeOwnFiles(folder, tmp);
    } catch (const std::exception &e) {
      error = e.what();
    }
    // Rank 0 renames the folder only when every rank said it is done.
    write_file_atomically(markerPath(tmp, folder.rank), error);
    if (!error.empty())
      throw std::runtime_error(error);
    return;
  }
  try {
    if (folder.ready)
      folder.ready();
    for (const ShardedFile &f : folder.files) {
      f.write(tmp + "/" + f.name);
      if (killHere) // tests: a crash mid-write (Checkpoint.h)
        std::raise(SIGKILL);
    }
    writeOwnFiles(folder, tmp);
    waitForRanks(tmp, folder.ranks);
    for (const auto &[name, text] : folder.texts)
      write_file_atomically(tmp + "/" + name, text);
    fsyncDir(tmp);
    // rename() replaces only an empty folder: an older step-N (a run
    // resumed before it) moves aside first.
    if (fs::exists(fs::symlink_status(dir, ec))) {
      checkReplaceable(dir);
      const fs::path old = parent / ("." + base + ".old");
      fs::remove_all(old, ec);
      if (::rename(folder.dir.c_str(), old.c_str()) != 0)
        throw std::runtime_error(
            folder.dir + ": cannot replace it: " + std::strerror(errno));
      fs::remove_all(old, ec);
    }
    if (::rename(tmp.c_str(), folder.dir.c_str()) != 0)
      throw std::runtime_error(folder.dir + ": cannot rename " + tmp +
                               " to it: " + std::strerror(errno));
    fsyncDir(parent.string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable())
    thread_.join();
}

double CheckpointWriter::wait() {
  Timer t;
  if (thread_.joinable())
    thread_.join();
  const double waited = t.seconds();
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.empty()) {
    const std::string e = std::move(error_);
    error_.clear();
    throw std::runtime_error(e);
  }
  return waited;
}

bool CheckpointWriter::busy(std::string *dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir)
    *dir = busy_dir_;
  return busy_;
}

void CheckpointWriter::start(CheckpointFolder folder, bool async) {
  wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = true;
    busy_dir_ = folder.dir;
  }
  if (async) {
    thread_ = std::thread(
        [this, f = std::move(folder)]() mutable { run(std::move(f)); });
    return;
  }
  run(std::move(folder));
  wait(); // its error, now
}

void CheckpointWriter::run(CheckpointFolder folder) {
  Timer t;
  std::string error;
  try {
    write_checkpoint_folder(folder);
  } catch (const std::exception &e) {
    error = e.what();
  }
  folder = {}; // the host copies go before the next save can start
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  if (!error.empty())
    error_ = error;
  else
    done_.push_back({busy_dir_, t.seconds()});
}

std::vector<CheckpointWriter::Done> CheckpointWriter::done() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

std::string newest_checkpoint(const std::string &save_dir,
                              std::vector<std::string> &skipped) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<long long, std::string>> steps;
  for (fs::directory_iterator it(save_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 20 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos ||
        !it->is_directory(ec))
      continue;
    steps.push_back({std::stoll(name.substr(5)), it->path().string()});
  }
  std::sort(steps.rbegin(), steps.rend());
  for (const auto &[step, dir] : steps) {
    try {
      // A compressed one (--checkpoint-compress) holds bitsnap.safetensors
      // only; its base is checked when it is loaded.
      if (fs::exists(dir + "/bitsnap.safetensors", ec)) {
        safetensors_check(dir + "/bitsnap.safetensors");
        return dir;
      }
      for (const char *file : {"/model.safetensors", "/optimizer.safetensors"})
        safetensors_check(dir + file);
      return dir;
    } catch (const std::exception &e) {
      skipped.push_back(e.what());
    }
  }
  if (!steps.empty())
    throw std::runtime_error(save_dir + ": no complete checkpoint (" +
                             skipped.front() + ")");
  return "";
}

} // namespace autoddl::rt
