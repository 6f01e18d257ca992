// K-FAC for linear layers on the CPU (Kfac.h, docs/kfac.md).
#include "backends/cpu/kfac/Kfac.h"

#include "backends/cpu/Collectives.h" // all_reduce_forward, all_gather_forward
#include "backends/cpu/kernels/Linear.h" // gemm (cblas_sgemm), cblas_ssyrk
#include "backends/host/MpiCheck.h"      // mpiCheck, comm_size, comm_rank

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

// LAPACK from OpenBLAS (Debian's libopenblas0 exports the LAPACK symbols; no
// LAPACKE header is needed). The trailing size_t is gfortran's hidden length
// of the character argument: passed for the routines built from Fortran,
// ignored by OpenBLAS's C implementations of potrf.
extern "C" {
void spotrf_(const char *uplo, const int *n, float *a, const int *lda,
             int *info, size_t uplo_len);
void spotri_(const char *uplo, const int *n, float *a, const int *lda,
             int *info, size_t uplo_len);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda,
             int *info, size_t uplo_len);
void dpotri_(const char *uplo, const int *n, double *a, const int *lda,
             int *info, size_t uplo_len);
}

namespace autoddl::rt {
namespace {

int lapack_int(int64_t d) {
  if (d > int64_t(1) << 30)
    throw std::invalid_argument("kfac: factor dimension " + std::to_string(d) +
                                " is too large for LAPACK's int");
  return int(d);
}

bool all_finite(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      return false;
  return true;
}

/// Cholesky inverse of the symmetric M[d,d] + diag I in T, in place: LAPACK
/// sees the row-major matrix as its transpose, which is the same symmetric
/// matrix; potri leaves the inverse in the 'L' triangle (column-major), which
/// is the row-major upper one, mirrored here into the other.
template <class T, class Potrf, class Potri>
bool cholesky_inverse_inplace(T *m, int64_t d, double diag, Potrf potrf,
                              Potri potri) {
  const int n = lapack_int(d);
  for (int64_t i = 0; i < d; ++i)
    m[i * d + i] += T(diag);
  int info = 0;
  potrf("L", &n, m, &n, &info, 1);
  if (info != 0)
    return false;
  potri("L", &n, m, &n, &info, 1);
  if (info != 0)
    return false;
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = i + 1; j < d; ++j)
      m[j * d + i] = m[i * d + j];
  for (int64_t i = 0; i < d * d; ++i)
    if (!std::isfinite(double(m[i])))
      return false;
  return true;
}

/// Ranks of a communicator; MPI_COMM_NULL is this rank alone.
int ranks(MPI_Comm comm) { return comm == MPI_COMM_NULL ? 1 : comm_size(comm); }

/// Sums the two squared norms over the ranks holding a parameter's shards.
void sum_over(double (&sums)[2], MPI_Comm comm) {
  if (comm != MPI_COMM_NULL)
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, comm));
}

/// kfac_precondition_with's operations on host floats, gathering over `tp`.
struct PreconditionOps {
  MPI_Comm tp;
  std::vector<float> t, full, bias;
  int ranks() const { return rt::ranks(tp); }
  int rank() const { return comm_rank(tp); }
  static const float *inverse(const KfacLayer &l, bool g) {
    return g ? l.G_inv.data() : l.A_inv.data();
  }
  void gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
            const float *B, int64_t ldb, float *C, int64_t ldc) {
    rt::gemm(false, false, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
  }
  float *scratch(int64_t n) {
    t.resize(size_t(n));
    return t.data();
  }
  void copy(float *dst, const float *src, int64_t n) {
    std::copy(src, src + n, dst);
  }
  const float *gather(const float *shard, int64_t R, int64_t C, bool rows) {
    full.resize(size_t(R * C * ranks()));
    all_gather_forward(full.data(), shard, Shape{R, C}, rows ? 0 : 1, tp);
    return full.data();
  }
  const float *gather_bias(const float *shard, int64_t n) {
    bias.resize(size_t(n * ranks()));
    all_gather_forward(bias.data(), shard, {n}, 0, tp);
    return bias.data();
  }
};

} // namespace

// The dimensions are checked before any buffer is sized (in is the first
// member).
KfacLayer::KfacLayer(int64_t in_, int64_t out_)
    : in((kfac_check_layer(in_, out_), in_)), out(out_), A(size_t(in_ * in_)),
      G(size_t(out_ * out_)), A_inv(size_t(in_ * in_)),
      G_inv(size_t(out_ * out_)) {}

void kfac_accumulate(float *F, const float *X, int64_t S, int64_t d,
                     float scale, bool upper) {
  if (S == 0)
    return;
  if (upper)
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, int(d), int(S), scale, X,
                int(d), 1.0f, F, int(d));
  else
    gemm(true, false, d, d, S, scale, X, d, X, d, 1.0f, F, d);
}

void kfac_accumulate_gathered(float *F, const float *X_shard, int64_t S,
                              int64_t d_shard, float scale, MPI_Comm tp,
                              bool upper) {
  const int p = ranks(tp);
  if (p == 1) {
    kfac_accumulate(F, X_shard, S, d_shard, scale, upper);
    return;
  }
  std::vector<float> full(size_t(S * d_shard * p));
  all_gather_forward(full.data(), X_shard, {S, d_shard}, 1, tp);
  kfac_accumulate(F, full.data(), S, d_shard * p, scale, upper);
}

void kfac_symmetrize(float *F, int64_t d) {
  for (int64_t i = 1; i < d; ++i)
    for (int64_t j = 0; j < i; ++j)
      F[i * d + j] = F[j * d + i];
}

void kfac_factor_all_reduce_mean(float *F, int64_t n, MPI_Comm comm) {
  const int p = ranks(comm);
  if (p == 1)
    return;
  all_reduce_forward(F, n, comm);
  const float inv = float(1.0 / p);
  for (int64_t i = 0; i < n; ++i)
    F[i] *= inv;
}

bool kfac_cholesky_inverse(float *inv, const float *F, int64_t d, double diag) {
  if (!all_finite(F, d * d))
    return false;
  std::copy(F, F + d * d, inv);
  return cholesky_inverse_inplace(inv, d, diag, spotrf_, spotri_);
}

bool kfac_cholesky_inverse_fp64(float *inv, const float *F, int64_t d,
                                double diag) {
  if (!all_finite(F, d * d))
    return false;
  std::vector<double> m(F, F + d * d);
  if (!cholesky_inverse_inplace(m.data(), d, diag, dpotrf_, dpotri_))
    return false;
  for (int64_t i = 0; i < d * d; ++i)
    if (!std::isfinite(float(m[size_t(i)])))
      return false; // finite in fp64, beyond fp32's range
  std::transform(m.begin(), m.end(), inv, [](double v) { return float(v); });
  return true;
}

KfacInverseOutcome kfac_invert_factor(float *inv, const float *F, int64_t d,
                                      double diag, bool has_previous) {
  // Computed into a copy: a failed attempt must leave the previous inverse.
  std::vector<float> tmp(size_t(d * d));
  const bool ok32 = kfac_cholesky_inverse(tmp.data(), F, d, diag);
  const bool ok64 = !ok32 && kfac_cholesky_inverse_fp64(tmp.data(), F, d, diag);
  const KfacInverseOutcome o = kfac_inverse_outcome(ok32, ok64, has_previous);
  if (ok32 || ok64)
    std::copy(tmp.begin(), tmp.end(), inv);
  return o;
}

void kfac_set_damping(KfacLayer &l, double damping) {
  double trA = 0, trG = 0;
  for (int64_t i = 0; i < l.in; ++i)
    trA += l.A[size_t(i * l.in + i)];
  for (int64_t i = 0; i < l.out; ++i)
    trG += l.G[size_t(i * l.out + i)];
  l.damping = kfac_damping(trA, l.in, trG, l.out, damping);
}

void kfac_zero_factors(KfacLayer &l) {
  std::fill(l.A.begin(), l.A.end(), 0.0f);
  std::fill(l.G.begin(), l.G.end(), 0.0f);
}

void kfac_inverses_installed(KfacLayer &) {} // fp32 preconditioning only

void kfac_precondition_split(float *dW_out, const float *dW_shard,
                             float *db_out, const float *db_shard,
                             const KfacLayer &l, bool transpose_weight,
                             KfacSplit split, MPI_Comm tp) {
  PreconditionOps ops{tp, {}, {}, {}};
  kfac_precondition_with(ops, dW_out, dW_shard, db_out, db_shard, l,
                         transpose_weight, split);
}

void kfac_sgd_step(float *p, const float *d, float *buf, int64_t n,
                   const KfacConfig &c, int64_t step) {
  const float decay = float(1.0 - c.lr * c.weight_decay);
  const float lr = float(c.lr), mu = float(c.momentum);
  for (int64_t i = 0; i < n; ++i) {
    float g = d[i];
    if (mu != 0.0f) {
      buf[i] = step == 1 ? g : mu * buf[i] + g;
      g = buf[i];
    }
    p[i] = p[i] * decay - lr * g;
  }
}

void kfac_lamb_step(float *p, const float *d, float *m, float *v, int64_t n,
                    const KfacConfig &c, int64_t t, MPI_Comm norm_comm,
                    MPI_Comm shard_comm) {
  const float b1 = float(c.beta1), b2 = float(c.beta2);
  const float oneMinusB1 = float(1.0 - c.beta1),
              oneMinusB2 = float(1.0 - c.beta2);
  const float bc1 = float(1.0 - std::pow(c.beta1, double(t)));
  const float bc2 = float(1.0 - std::pow(c.beta2, double(t)));
  const float eps = float(c.eps), wd = float(c.weight_decay);
  auto update = [&](int64_t i) {
    return (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps) + wd * p[i];
  };
  double sums[2] = {0, 0}; // ||p||^2, ||u||^2
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + oneMinusB1 * d[i];
    v[i] = b2 * v[i] + oneMinusB2 * d[i] * d[i];
    const float u = update(i);
    sums[0] += double(p[i]) * p[i];
    sums[1] += double(u) * u;
  }
  sum_over(sums, shard_comm); // this tp block's, over its dp shards
  sum_over(sums, norm_comm);
  const float step =
      float(c.lr * kfac_trust_ratio(std::sqrt(sums[0]), std::sqrt(sums[1])));
  for (int64_t i = 0; i < n; ++i)
    p[i] -= step * update(i);
}

void kfac_adam_graft_step(float *p, const float *g, const float *d, float *m,
                          float *v, int64_t n, const KfacConfig &c, int64_t t,
                          MPI_Comm norm_comm, MPI_Comm shard_comm) {
  const float b1 = float(c.beta1), b2 = float(c.beta2);
  const float oneMinusB1 = float(1.0 - c.beta1),
              oneMinusB2 = float(1.0 - c.beta2);
  const float bc1 = float(1.0 - std::pow(c.beta1, double(t)));
  const float bc2 = float(1.0 - std::pow(c.beta2, double(t)));
  const float eps = float(c.eps);
  auto adam = [&](int64_t i) {
    return (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
  };
  double sums[2] = {0, 0}; // ||u||^2, ||d||^2
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + oneMinusB1 * g[i];
    v[i] = b2 * v[i] + oneMinusB2 * g[i] * g[i];
    if (d) {
      const float u = adam(i);
      sums[0] += double(u) * u;
      sums[1] += double(d[i]) * d[i];
    }
  }
  float scale = 1;
  if (d) { // every rank holding the parameter has a direction, or none
    sum_over(sums, shard_comm);
    sum_over(sums, norm_comm);
    scale = float(kfac_graft_scale(std::sqrt(sums[0]), std::sqrt(sums[1])));
  }
  const float decay = float(1.0 - c.lr * c.weight_decay), lr = float(c.lr);
  for (int64_t i = 0; i < n; ++i)
    p[i] = p[i] * decay - lr * (d ? scale * d[i] : adam(i));
}

} // namespace autoddl::rt
