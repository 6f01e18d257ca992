// The device mesh of a plan, over MPI: each rank's mesh coordinates and one
// communicator per mesh-axis group (DESIGN §6).
//
// Rank order is row-major over the mesh axes: with mesh shape (d0, d1, ...,
// dk-1), the rank at coordinates (c0, ..., ck-1) is ((c0 * d1 + c1) * d2 + c2)
// ... so the LAST axis varies fastest (neighbouring ranks differ on the last
// axis; put the axis that needs the fastest links last). The communicator of
// axis a joins the ranks that agree on every other coordinate; within it a
// rank's index is its coordinate on axis a, so S(i) shards are in rank order
// along the axis.
#ifndef AUTODDL_BACKENDS_HOST_MESH_H
#define AUTODDL_BACKENDS_HOST_MESH_H

#include <cstdint>
#include <mpi.h>
#include <vector>

namespace autoddl::rt {

/// Initialises MPI (if not yet) with errors returned to mpiCheck rather than
/// fatal, and checks a torchrun-style environment when one is set: WORLD_SIZE
/// and RANK must agree with MPI's (the CPU backend forms its world through the
/// MPI launcher). Throws std::runtime_error on disagreement.
void mpi_init(int *argc, char ***argv);

class Mesh {
public:
  /// Throws std::runtime_error when the product of `shape` differs from the
  /// size of `world`.
  Mesh(std::vector<int64_t> shape, MPI_Comm world);
  ~Mesh();
  Mesh(const Mesh &) = delete;
  Mesh &operator=(const Mesh &) = delete;

  const std::vector<int64_t> &shape() const { return shape_; }
  int rank() const { return rank_; }
  const std::vector<int64_t> &coords() const { return coords_; }
  int64_t coord(size_t axis) const { return coords_.at(axis); }
  /// The communicator of one mesh axis (size shape[axis], rank = coord(axis)).
  MPI_Comm axis(size_t a) const { return axisComms_.at(a); }
  /// The communicator joining the ranks that agree on every axis NOT in `axes`;
  /// a rank's index in it is row-major over its coordinates on `axes` (in the
  /// order given). Owned by the Mesh.
  MPI_Comm group(const std::vector<size_t> &axes);
  /// World rank at `coords`.
  int rank_of(const std::vector<int64_t> &coords) const;
  /// World rank of this rank's neighbour on `axis` at coordinate `c` (pipeline
  /// send/recv).
  int rank_with(size_t axis, int64_t c) const;

private:
  MPI_Comm split(const std::vector<size_t> &axes);
  std::vector<int64_t> shape_, coords_;
  int rank_ = 0;
  MPI_Comm world_;
  std::vector<MPI_Comm> axisComms_;
  std::vector<std::pair<std::vector<size_t>, MPI_Comm>> groups_;
};

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_HOST_MESH_H
