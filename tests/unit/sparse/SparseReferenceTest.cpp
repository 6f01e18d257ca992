// CPU reference SpMM / SDDMM (backends/cpu/sparse): hand-computed cases and
// bounds.
#include "backends/cpu/sparse/SparseReference.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>

using namespace autoddl::sparse;

namespace {

// A = [[1, 0, 2],
//      [0, 0, 0],
//      [3, 0, 4]] stored with row 2 unsorted and its (2,0) entry split into 1
//      + 2.
CsrMatrix<double> smallMatrix() {
  CsrMatrix<double> a;
  a.rows = 3, a.cols = 3;
  a.rowPtr = {0, 2, 2, 5};
  a.colIdx = {0, 2, 2, 0, 0};
  a.values = {1, 2, 4, 1, 2};
  return a;
}

TEST(SparseReference, SpmmMatchesHandComputedProduct) {
  const CsrMatrix<double> a = smallMatrix();
  // X = [[1, 2], [3, 4], [5, 6]] (3 x 2).
  const double x[] = {1, 2, 3, 4, 5, 6};
  double y[6];
  spmmReference(a, x, 2, 2, y, 2);
  // Row 0: 1*[1,2] + 2*[5,6] = [11, 14]; row 1 empty: [0, 0];
  // row 2: 4*[5,6] + (1+2)*[1,2] = [23, 30] (duplicates add up).
  const double expected[] = {11, 14, 0, 0, 23, 30};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y[i], expected[i]) << "element " << i;
}

TEST(SparseReference, SpmmRowsAndAbsBoundAgreeWithFullProduct) {
  CsrMatrix<double> a = smallMatrix();
  a.values[1] = -2; // (0, 2) = -2
  const double x[] = {1, -2, 3, 4, -5, 6};
  double full[6], rows[4], bound[4];
  spmmReference(a, x, 2, 2, full, 2);
  spmmReferenceRows(a, x, 2, 2, {2, 0}, rows);
  spmmAbsBoundRows(a, x, 2, 2, {2, 0}, bound);
  EXPECT_EQ(rows[0], full[4]);
  EXPECT_EQ(rows[1], full[5]);
  EXPECT_EQ(rows[2], full[0]);
  EXPECT_EQ(rows[3], full[1]);
  // Row 0 bound: |1|*|[1,-2]| + |-2|*|[-5,6]| = [11, 14].
  EXPECT_EQ(bound[2], 11);
  EXPECT_EQ(bound[3], 14);
}

TEST(SparseReference, SddmmIsDotProductPerStoredEntry) {
  const CsrMatrix<double> a = smallMatrix();
  const double x[] = {1, 2, 3, 4, 5, 6};  // rows of X (3 x 2)
  const double y[] = {1, 0, 0, 1, -1, 2}; // rows of Y (3 x 2)
  double out[5];
  sddmmReference(a, x, 2, y, 2, 2, out);
  // Entry order of the stored CSR: (0,0) (0,2) (2,2) (2,0) (2,0).
  EXPECT_EQ(out[0], 1.0 * 1 + 2.0 * 0);  // X0 . Y0
  EXPECT_EQ(out[1], 1.0 * -1 + 2.0 * 2); // X0 . Y2
  EXPECT_EQ(out[2], 5.0 * -1 + 6.0 * 2); // X2 . Y2
  EXPECT_EQ(out[3], 5.0 * 1 + 6.0 * 0);  // X2 . Y0
  EXPECT_EQ(out[4], out[3]); // the duplicate gets the same dot product
}

TEST(SparseReference, CanonicalizeSortsAndMergesDuplicates) {
  const CsrMatrix<double> c = canonicalizeCsr(smallMatrix());
  EXPECT_EQ(c.rowPtr, (std::vector<int32_t>{0, 2, 2, 4}));
  EXPECT_EQ(c.colIdx, (std::vector<int32_t>{0, 2, 0, 2}));
  // (2,0) = 1 + 2 = 3; (2,2) = 4.
  EXPECT_EQ(c.values, (std::vector<double>{1, 2, 3, 4}));
}

TEST(SparseReference, ValidateNamesTheDefect) {
  CsrMatrix<double> a = smallMatrix();
  EXPECT_EQ(validateCsr(a), "");
  a.colIdx[3] = 3;
  EXPECT_NE(validateCsr(a).find("column index 3 at entry 3"),
            std::string::npos);
  a = smallMatrix();
  a.rowPtr[2] = 1;
  a.rowPtr[1] = 2;
  EXPECT_NE(validateCsr(a).find("decreases at row 1"), std::string::npos);
  a = smallMatrix();
  a.values.pop_back();
  EXPECT_NE(validateCsr(a).find("value array"), std::string::npos);
}

TEST(SparseReference, Fp32AgreesWithFp64WithinSummationBound) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(-1, 1);
  CsrMatrix<double> a64;
  CsrMatrix<float> a32;
  a64.rows = a32.rows = 64, a64.cols = a32.cols = 50;
  a64.rowPtr = a32.rowPtr = {0};
  for (int r = 0; r < 64; ++r) {
    const int deg = r * 3; // up to 189 terms per row
    for (int k = 0; k < deg; ++k) {
      const int c = int(rng() % 50);
      const float v = float(u(rng));
      a64.colIdx.push_back(c), a32.colIdx.push_back(c);
      a64.values.push_back(v), a32.values.push_back(v);
    }
    a64.rowPtr.push_back(int32_t(a64.colIdx.size()));
  }
  a32.rowPtr = a64.rowPtr;
  const int n = 9;
  std::vector<double> x64(50 * n), y64(64 * n), bound(64 * n);
  std::vector<float> x32(50 * n), y32(64 * n);
  for (int i = 0; i < 50 * n; ++i)
    x64[i] = x32[i] = float(u(rng));
  spmmReference(a64, x64.data(), n, n, y64.data(), n);
  spmmReference(a32, x32.data(), n, n, y32.data(), n);
  std::vector<int32_t> all(64);
  for (int i = 0; i < 64; ++i)
    all[i] = i;
  spmmAbsBoundRows(a64, x64.data(), n, n, all, bound.data());
  for (int r = 0; r < 64; ++r)
    for (int f = 0; f < n; ++f) {
      // Recursive fp32 summation of deg products: |err| <= (deg + 1) * 2^-24 *
      // sum|a x| (Higham, gamma_n with u = 2^-24, products rounded once each).
      const double tol =
          (r * 3 + 1) * std::ldexp(1.0, -24) * bound[r * n + f] * 1.01;
      EXPECT_LE(std::abs(y32[r * n + f] - y64[r * n + f]), tol)
          << r << "," << f;
    }
}

} // namespace
