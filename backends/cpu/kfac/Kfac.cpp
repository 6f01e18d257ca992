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

/// out[Rn,Cn] = L[r0:r0+Rn, :] M[nL,nR] R[:, c0:c0+Cn] for symmetric L
/// [nL,nL] and R [nR,nR]: a block of the sandwich L M R, in the cheaper of
/// the two orders.
void block_sandwich(float *out, const float *L, int64_t nL, int64_t r0,
                    int64_t Rn, const float *M, int64_t nR, const float *R,
                    int64_t c0, int64_t Cn) {
  const double leftFirst = double(Rn) * nL * nR + double(Rn) * nR * Cn;
  const double rightFirst = double(nL) * nR * Cn + double(Rn) * nL * Cn;
  if (leftFirst <= rightFirst) {
    std::vector<float> t(size_t(Rn * nR)); // L[rows,:] M
    gemm(false, false, Rn, nR, nL, 1.0f, L + r0 * nL, nL, M, nR, 0.0f, t.data(),
         nR);
    gemm(false, false, Rn, Cn, nR, 1.0f, t.data(), nR, R + c0, nR, 0.0f, out,
         Cn);
  } else {
    std::vector<float> t(size_t(nL * Cn)); // M R[:,cols]
    gemm(false, false, nL, Cn, nR, 1.0f, M, nR, R + c0, nR, 0.0f, t.data(), Cn);
    gemm(false, false, Rn, Cn, nL, 1.0f, L + r0 * nL, nL, t.data(), Cn, 0.0f,
         out, Cn);
  }
}

/// The block [o0, o0+Ol) x [k0, k0+Kl) of the preconditioned gradient of the
/// whole dW (its own layout), and of the bias over [o0, o0+Ol).
void precondition_block(float *dW_out, const float *dW, float *db_out,
                        const float *db, const KfacLayer &l,
                        bool transpose_weight, int64_t o0, int64_t Ol,
                        int64_t k0, int64_t Kl) {
  if (transpose_weight) // [out,in]: G^-1 dW A^-1
    block_sandwich(dW_out, l.G_inv.data(), l.out, o0, Ol, dW, l.in,
                   l.A_inv.data(), k0, Kl);
  else // [in,out]: A^-1 dW G^-1
    block_sandwich(dW_out, l.A_inv.data(), l.in, k0, Kl, dW, l.out,
                   l.G_inv.data(), o0, Ol);
  if (db_out) // db_out[Ol] = G^-1[o0:o0+Ol, :] db
    gemm(false, false, Ol, 1, l.out, 1.0f, l.G_inv.data() + o0 * l.out, l.out,
         db, 1, 0.0f, db_out, 1);
}

/// Ranks of a communicator; MPI_COMM_NULL is this rank alone.
int ranks(MPI_Comm comm) { return comm == MPI_COMM_NULL ? 1 : comm_size(comm); }

/// Sums the two squared norms over the ranks holding a parameter's shards.
void sum_over(double (&sums)[2], MPI_Comm comm) {
  if (comm != MPI_COMM_NULL)
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, comm));
}

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

void kfac_precondition(float *dW_out, const float *dW, float *db_out,
                       const float *db, const KfacLayer &l,
                       bool transpose_weight) {
  kfac_precondition_split(dW_out, dW, db_out, db, l, transpose_weight,
                          KfacSplit::None, MPI_COMM_NULL);
}

void kfac_precondition_split(float *dW_out, const float *dW_shard,
                             float *db_out, const float *db_shard,
                             const KfacLayer &l, bool transpose_weight,
                             KfacSplit split, MPI_Comm tp) {
  const int p = ranks(tp);
  const KfacBlock blk =
      kfac_split_block(l.in, l.out, split, p, p == 1 ? 0 : comm_rank(tp));
  const int64_t o0 = blk.o0, Ol = blk.Ol, k0 = blk.k0, Kl = blk.Kl;
  if (!l.has_inverse()) { // first-order: the shard as it is
    std::copy(dW_shard, dW_shard + Ol * Kl, dW_out);
    if (db_out)
      std::copy(db_shard, db_shard + Ol, db_out);
    return;
  }
  if (p == 1 || split == KfacSplit::None) {
    precondition_block(dW_out, dW_shard, db_out, db_shard, l, transpose_weight,
                       o0, Ol, k0, Kl);
    return;
  }
  // The whole gradient: the shards concatenated along the split dimension
  // (dim 0 of [out,in] for Out, ...; Conv1D [in,out] the other way round).
  const bool rows = (split == KfacSplit::Out) == transpose_weight;
  const Shape shard = transpose_weight ? Shape{Ol, Kl} : Shape{Kl, Ol};
  std::vector<float> full(size_t(l.in * l.out));
  all_gather_forward(full.data(), dW_shard, shard, rows ? 0 : 1, tp);
  std::vector<float> dbFull;
  const float *db = db_shard;
  if (db_out && split == KfacSplit::Out) { // a column-parallel bias is split
    dbFull.resize(size_t(l.out));
    all_gather_forward(dbFull.data(), db_shard, {Ol}, 0, tp);
    db = dbFull.data();
  }
  precondition_block(dW_out, full.data(), db_out, db, l, transpose_weight, o0,
                     Ol, k0, Kl);
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

} // namespace autoddl::rt
