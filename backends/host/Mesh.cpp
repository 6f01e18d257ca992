// The device mesh over MPI (see Mesh.h).
#include "backends/host/Mesh.h"

#include "backends/host/MpiCheck.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace autoddl::rt {

void mpi_init(int *argc, char ***argv) {
  int inited = 0;
  mpiCheck(MPI_Initialized(&inited));
  // MPI_Init, not MPI_Init_thread: the CUDA build routes MPI_Init (TCP
  // bootstrap, backends/cuda/MpiRoute.cpp) and its no-MPI stand-in has no
  // thread levels. K-FAC's filling thread (harness/KfacRun.h) makes no MPI
  // call.
  if (!inited)
    mpiCheck(MPI_Init(argc, argv));
  mpiCheck(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0, size = 1;
  mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &size));
  // torchrun-style variables, when set, must be numbers that agree with
  // MPI's world (a program started alone with WORLD_SIZE=2 would otherwise
  // train as one rank of two). Checked on every rank and agreed on by all
  // (one MPI_Allgather): a rank that alone found a problem and stopped would
  // leave the others waiting in their first collective for ever (the same
  // RANK=0 exported to every rank of mpirun).
  std::string problem;
  auto env_int = [&](const char *name, long long lo, long long hi,
                     long long &value) {
    const char *s = std::getenv(name);
    if (!s)
      return false;
    char *end = nullptr;
    errno = 0;
    value = std::strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE || value < lo || value > hi) {
      std::string v(s);
      if (v.size() > 80)
        v = v.substr(0, 80) + "...";
      for (char &c : v)
        if ((unsigned char)c < 0x20 || c == 0x7f)
          c = '?'; // the message stays one line
      if (problem.empty())
        problem = std::string(name) + "=\"" + v +
                  "\": expected an integer from " + std::to_string(lo) +
                  " to " + std::to_string(hi);
      return false;
    }
    return true;
  };
  long long ws = 0, r = 0;
  const bool has_ws = env_int("WORLD_SIZE", 1, 1 << 24, ws);
  const bool has_r = env_int("RANK", 0, has_ws ? ws - 1 : 1 << 24, r);
  if (problem.empty() && has_ws && ws != size)
    problem = "WORLD_SIZE=" + std::to_string(ws) + " but MPI started " +
              std::to_string(size) + (size == 1 ? " rank" : " ranks") +
              "; launch the program with mpirun -np " + std::to_string(ws) +
              " or srun";
  // Per rank: whether it found a problem, and its RANK (-1 when unset).
  int64_t mine[2] = {problem.empty() ? 0 : 1,
                     has_r && has_ws ? int64_t(r) : -1};
  std::vector<int64_t> all(size_t(2 * size));
  mpiCheck(MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T,
                         MPI_COMM_WORLD));
  int first_bad = -1;
  for (int q = 0; q < size && first_bad < 0; ++q)
    if (all[size_t(2 * q)])
      first_bad = q;
  if (first_bad >= 0) {
    // The first rank's own words, on every rank.
    char text[256] = {};
    if (rank == first_bad)
      std::snprintf(text, sizeof text, "%s", problem.c_str());
    mpiCheck(MPI_Bcast(text, sizeof text, MPI_CHAR, first_bad, MPI_COMM_WORLD));
    throw std::runtime_error(
        size > 1 ? "MPI rank " + std::to_string(first_bad) + ": " + text
                 : std::string(text));
  }
  for (int q = 0; q < size; ++q) {
    const int64_t env_rank = all[size_t(2 * q + 1)];
    if (env_rank >= 0 && env_rank != q) {
      std::string same;
      for (int o = 0; o < size; ++o)
        if (o != q && all[size_t(2 * o + 1)] == env_rank)
          same = " (as on MPI rank " + std::to_string(o) + ")";
      throw std::runtime_error(
          "RANK=" + std::to_string(env_rank) + " on MPI rank " +
          std::to_string(q) + same +
          ": RANK must be each rank's own MPI rank; unset RANK and "
          "WORLD_SIZE under mpirun, or set them per rank");
    }
  }
}

Mesh::Mesh(std::vector<int64_t> shape, MPI_Comm world)
    : shape_(std::move(shape)), world_(world) {
  int size = 0;
  mpiCheck(MPI_Comm_rank(world_, &rank_));
  mpiCheck(MPI_Comm_size(world_, &size));
  int64_t product = 1;
  std::string dims;
  for (int64_t d : shape_) {
    if (d <= 0)
      throw std::runtime_error("mesh axis sizes must be positive");
    product *= d;
    dims += (dims.empty() ? "" : "x") + std::to_string(d);
  }
  if (product != size)
    throw std::runtime_error("the plan's mesh " + dims + " needs " +
                             std::to_string(product) + " ranks, but " +
                             std::to_string(size) + " were started");
  coords_.assign(shape_.size(), 0);
  int64_t rest = rank_;
  for (size_t a = shape_.size(); a-- > 0;) {
    coords_[a] = rest % shape_[a];
    rest /= shape_[a];
  }
  for (size_t a = 0; a < shape_.size(); ++a)
    axisComms_.push_back(split({a}));
}

Mesh::~Mesh() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) // a Mesh that outlives MPI_Finalize has nothing left to free
    return;
  for (MPI_Comm &c : axisComms_)
    MPI_Comm_free(&c);
  for (auto &g : groups_)
    MPI_Comm_free(&g.second);
}

MPI_Comm Mesh::split(const std::vector<size_t> &axes) {
  // color: row-major index over the coordinates NOT in `axes`; key: over those
  // in `axes`.
  int64_t color = 0, key = 0;
  for (size_t a = 0; a < shape_.size(); ++a) {
    bool in = false;
    for (size_t x : axes)
      in |= x == a;
    if (!in)
      color = color * shape_[a] + coords_[a];
  }
  for (size_t x : axes)
    key = key * shape_.at(x) + coords_.at(x);
  MPI_Comm comm;
  mpiCheck(MPI_Comm_split(world_, int(color), int(key), &comm));
  mpiCheck(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return comm;
}

MPI_Comm Mesh::group(const std::vector<size_t> &axes) {
  for (auto &g : groups_)
    if (g.first == axes)
      return g.second;
  // Collective over the world: every rank must ask for the same groups in the
  // same order.
  groups_.emplace_back(axes, split(axes));
  return groups_.back().second;
}

int Mesh::rank_of(const std::vector<int64_t> &coords) const {
  int64_t r = 0;
  for (size_t a = 0; a < shape_.size(); ++a)
    r = r * shape_[a] + coords.at(a);
  return int(r);
}

int Mesh::rank_with(size_t axis, int64_t c) const {
  std::vector<int64_t> at = coords_;
  at.at(axis) = c;
  return rank_of(at);
}

} // namespace autoddl::rt
