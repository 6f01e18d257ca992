// Sharded checkpoints (see Checkpoint.h).
#include "backends/host/Checkpoint.h"

#include "backends/common/FileIo.h"
#include "backends/common/Metrics.h"
#include "backends/common/Safetensors.h"
#include "backends/host/MpiCheck.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace autoddl::rt {

namespace {

/// Rank 0 receives every other rank's block of one tensor (rank 0's own is
/// added by the caller).
void gatherTensor(const CheckpointEntry &e, GatheredFile &out, MPI_Comm comm) {
  const int p = comm_size(comm), r = comm_rank(comm);
  const size_t rank = e.slice.full.size();
  // header: held flag, then offset and local size per dimension
  std::vector<int64_t> header(1 + 2 * rank, 0);
  if (e.data && r != 0) {
    header[0] = 1;
    for (size_t d = 0; d < rank; ++d) {
      header[1 + d] = e.slice.offset[d];
      header[1 + rank + d] = e.slice.local[d];
    }
  }
  std::vector<int64_t> headers(r == 0 ? header.size() * p : 0);
  mpiCheck(MPI_Gather(header.data(), int(header.size()), MPI_INT64_T,
                      headers.data(), int(header.size()), MPI_INT64_T, 0,
                      comm));
  const int count = e.data && r != 0 ? int(e.slice.numel()) : 0;
  std::vector<int> counts(size_t(r == 0 ? p : 0)), displs(counts.size(), 0);
  mpiCheck(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::vector<float> blocks;
  if (r == 0) {
    for (int q = 1; q < p; ++q)
      displs[q] = displs[q - 1] + counts[q - 1];
    blocks.resize(size_t(displs[p - 1] + counts[p - 1]));
  }
  mpiCheck(MPI_Gatherv(e.data, count, MPI_FLOAT, blocks.data(), counts.data(),
                       displs.data(), MPI_FLOAT, 0, comm));
  if (r != 0 || blocks.empty())
    return;
  out.owned.push_back(std::move(blocks));
  GatheredFile::Tensor &t = out.tensors.back();
  for (int q = 1; q < p; ++q) {
    const int64_t *h = headers.data() + q * header.size();
    if (!h[0])
      continue;
    t.blocks.push_back({e.slice.full, Shape(h + 1, h + 1 + rank),
                        Shape(h + 1 + rank, h + 1 + 2 * rank)});
    t.data.push_back(out.owned.back().data() + displs[q]);
  }
}

bool coversAll(const Slice &s) {
  return s.local == s.full && std::all_of(s.offset.begin(), s.offset.end(),
                                          [](int64_t o) { return o == 0; });
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
    if (name != "model.safetensors" && name != "optimizer.safetensors" &&
        name != "config.json" && name.find(".tmp.") == std::string::npos)
      throw std::runtime_error(path +
                               ": not a file of a checkpoint; refusing "
                               "to replace " +
                               dir.string());
  }
}

} // namespace

GatheredFile
checkpoint_gather(const std::string &name,
                  const std::vector<CheckpointEntry> &entries,
                  const std::map<std::string, std::string> &metadata,
                  MPI_Comm comm, bool own_stable) {
  const bool root = comm_rank(comm) == 0;
  GatheredFile out;
  out.name = name;
  out.metadata = metadata;
  for (const CheckpointEntry &e : entries) {
    if (root) {
      out.tensors.push_back({e.name, e.file_shape(), {}, {}});
      if (e.data) {
        const float *own = e.data;
        if (!own_stable) {
          out.owned.emplace_back(e.data, e.data + e.slice.numel());
          own = out.owned.back().data();
        }
        out.tensors.back().blocks.push_back(e.slice);
        out.tensors.back().data.push_back(own);
      }
    }
    gatherTensor(e, out, comm);
  }
  return out;
}

void GatheredFile::write(const std::string &path) const {
  std::vector<std::vector<float>> fulls;
  std::vector<NamedTensor> named;
  fulls.reserve(tensors.size());
  for (const Tensor &t : tensors) {
    // One rank holding the whole tensor (one rank, or replicated): its
    // block is the tensor, written as it is.
    auto whole = std::find_if(t.blocks.begin(), t.blocks.end(), coversAll);
    if (whole != t.blocks.end()) {
      named.push_back(
          {t.name, t.shape, t.data[size_t(whole - t.blocks.begin())]});
      continue;
    }
    const Shape &full = t.blocks.empty() ? t.shape : t.blocks[0].full;
    fulls.emplace_back(size_t(numel(full)), 0.0f);
    std::vector<float> &f = fulls.back();
    std::vector<char> covered(f.size(), 0);
    for (size_t b = 0; b < t.blocks.size(); ++b) {
      const Slice &s = t.blocks[b];
      // Row-major blocks: runs of the innermost dimension are contiguous in
      // both the block and the tensor.
      const int64_t run = s.local.empty() ? 1 : s.local.back();
      for (int64_t k = 0; run > 0 && k < s.numel(); k += run) {
        const uint64_t g = slice_global_index(s, k);
        std::memcpy(f.data() + g, t.data[b] + k, size_t(run) * sizeof(float));
        std::memset(covered.data() + g, 1, size_t(run));
      }
    }
    if (std::find(covered.begin(), covered.end(), 0) != covered.end())
      throw std::runtime_error(path + ": tensor \"" + t.name +
                               "\" is not fully held by any rank");
    named.push_back({t.name, t.shape, f.data()});
  }
  safetensors_write(path, named, metadata);
}

void checkpoint_save(const std::string &path,
                     const std::vector<CheckpointEntry> &entries,
                     const std::map<std::string, std::string> &metadata,
                     MPI_Comm comm) {
  GatheredFile f = checkpoint_gather("", entries, metadata, comm, true);
  if (comm_rank(comm) == 0)
    f.write(path);
}

std::map<std::string, std::string>
checkpoint_load(const std::string &path,
                const std::vector<CheckpointEntry> &entries) {
  const SafetensorsFile file = safetensors_read(path);
  for (const CheckpointEntry &e : entries) {
    auto it = file.tensors.find(e.name);
    if (it == file.tensors.end())
      throw std::runtime_error(path + ": no tensor \"" + e.name +
                               "\": a checkpoint of another model?");
    if (it->second.shape != e.file_shape())
      throw std::runtime_error(path + ": tensor \"" + e.name + "\" has shape " +
                               shape_str(it->second.shape) +
                               ", the model needs " +
                               shape_str(e.file_shape()));
    if (!e.data)
      continue;
    for (int64_t k = 0; k < e.slice.numel(); ++k)
      e.data[k] = it->second.data[slice_global_index(e.slice, k)];
  }
  return file.metadata;
}

void write_checkpoint_folder(const CheckpointFolder &folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder.dir);
  const fs::path parent = dir.parent_path().empty() ? "." : dir.parent_path();
  const std::string base = dir.filename().string();
  const std::string tmp = (parent / ("." + base + ".tmp")).string();
  const char *kill = std::getenv("AUTODDL_TEST_KILL_CHECKPOINT_WRITE");
  const bool killHere = kill && base == "step-" + std::string(kill);
  std::error_code ec;
  const bool replace = fs::exists(fs::symlink_status(dir, ec));
  if (replace)
    checkReplaceable(dir);
  fs::remove_all(tmp, ec); // a killed run's leftover
  try {
    make_directories(tmp);
    if (folder.ready)
      folder.ready();
    for (const GatheredFile &f : folder.files) {
      f.write(tmp + "/" + f.name);
      if (killHere) // tests: a crash mid-write (Checkpoint.h)
        std::raise(SIGKILL);
    }
    for (const auto &[name, text] : folder.texts)
      write_file_atomically(tmp + "/" + name, text);
    fsyncDir(tmp);
    // rename() replaces only an empty folder: an older step-N (a run
    // resumed before it) moves aside first.
    if (replace) {
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
