// SparseOpsCheck: the graph ops of backends/cuda/kernels/Sparse.h (spmm, spmm
// with activation values, sddmm, edge softmax; forward and backward) and
// GatAttention.h (GATConv's head_dot and gat_aggregate) against the CPU
// kernels of backends/cpu/kernels/{Sparse,GatAttention}.h on fresh random
// graphs (seed printed; --seed N repeats a run): square and row-block
// (rectangular) adjacencies, empty rows, a dense row, feature widths 7, 16
// and 64; each in the decider's format variant and in both forced ones
// (AUTODDL_SPMM_VARIANT hybrid, tc), which describe() must name. Built
// twice: bf16 (tensor cores) and -DAUTODDL_FP32 (CUDA cores, fp32 FMAs).
// Error measure and bounds as KernelCheck (KernelCheckUtil.h): act_t
// results 1e-2 (bf16) / 1e-5 (fp32) relative in the norm. Backward outputs
// start from random values (the kernels add). Exit 0 pass, 1 fail, 77 no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/sparse/SparseReference.h"
// The CPU kernels declare the same names in autoddl::rt (Csr differs), so
// the reference lives in namespace cpu; it calls ::autoddl::sparse.
namespace cpu {
namespace autoddl {
namespace sparse = ::autoddl::sparse;
}
#include "backends/cpu/kernels/GatAttention.h"
#include "backends/cpu/kernels/Sparse.h"
} // namespace cpu

#include "backends/cuda/kernels/GatAttention.h"
#include "backends/cuda/kernels/Sparse.h"
#include "tests/unit/cuda/KernelCheckUtil.h"

namespace {
using namespace kcheck;
namespace ref = cpu::autoddl::rt;

std::mt19937 gRng;
bool gOk = true;
std::string gVariant = "auto"; // AUTODDL_SPMM_VARIANT of this pass

/// A random rows x cols CSR with sorted distinct columns: degree uniform in
/// [0, 2 * avgDegree], every 7th row empty, row 1 dense.
ref::Csr random_graph(int32_t rows, int32_t cols, int avgDegree) {
  ref::Csr a;
  a.rows = rows;
  a.cols = cols;
  a.rowPtr.push_back(0);
  std::uniform_int_distribution<int> deg(0, 2 * avgDegree);
  std::uniform_int_distribution<int32_t> col(0, cols - 1);
  for (int32_t i = 0; i < rows; ++i) {
    std::vector<int32_t> c;
    if (i == 1) {
      for (int32_t j = 0; j < cols; ++j)
        c.push_back(j);
    } else if (i % 7 != 3) {
      for (int k = deg(gRng); k > 0; --k)
        c.push_back(col(gRng));
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
    }
    a.colIdx.insert(a.colIdx.end(), c.begin(), c.end());
    a.rowPtr.push_back(int32_t(a.colIdx.size()));
  }
  a.values = random_values(gRng, int64_t(a.colIdx.size()), -1.0f, 1.0f);
  return a;
}

bool check(const std::string &what, const std::vector<float> &got,
           const std::vector<float> &want) {
  return report(what, rel_error(got, want), kActTol);
}

/// A device act_t copy of v.
rt::DeviceBuffer<act_t> dev(const std::vector<float> &v) {
  rt::DeviceBuffer<act_t> b(int64_t(v.size()));
  upload(b.data(), v);
  return b;
}

void check_graph(int32_t rows, int32_t cols, int avgDegree, int64_t F) {
  const ref::Csr a = random_graph(rows, cols, avgDegree);
  const int64_t nnz = a.nnz();
  rt::Csr d = rt::csr_to_device(a.rows, a.cols, a.rowPtr, a.colIdx, a.values);
  // GATConv's kernels read the columns (the harness uploads them alike).
  d.col_idx = rt::DeviceBuffer<int32_t>(nnz);
  upload(d.col_idx.data(), a.colIdx);
  const std::string tag = gVariant + " " + std::to_string(rows) + "x" +
                          std::to_string(cols) + " nnz " + std::to_string(nnz) +
                          " F " + std::to_string(F) + ":";
  const std::vector<float> x = random_values(gRng, int64_t(cols) * F, -1, 1),
                           dy = random_values(gRng, int64_t(rows) * F, -1, 1),
                           xr = random_values(gRng, int64_t(rows) * F, -1, 1),
                           vals = random_values(gRng, nnz, 0, 1);
  auto dx = dev(x), ddy = dev(dy), dxr = dev(xr), dvals = dev(vals);

  { // spmm
    std::vector<float> want(size_t(rows * F));
    ref::spmm_forward(want.data(), a, x.data(), F);
    rt::DeviceBuffer<act_t> y(rows * F);
    rt::spmm_forward(y.data(), d, dx.data(), F);
    gOk &= check(tag + " spmm_forward", download(y.data(), rows * F), want);
    std::vector<float> gx = random_values(gRng, int64_t(cols) * F, -1, 1),
                       gv = random_values(gRng, nnz, -1, 1);
    auto dgx = dev(gx), dgv = dev(gv);
    ref::spmm_backward(gx.data(), gv.data(), a, dy.data(), x.data(), F);
    rt::spmm_backward(dgx.data(), dgv.data(), d, ddy.data(), dx.data(), F);
    gOk &= check(tag + " spmm_backward dx", download(dgx.data(), cols * F), gx);
    gOk &= check(tag + " spmm_backward dvalues", download(dgv.data(), nnz), gv);
  }
  { // spmm with activation values
    std::vector<float> want(size_t(rows * F));
    ref::spmm_values_forward(want.data(), a, vals.data(), x.data(), F);
    rt::DeviceBuffer<act_t> y(rows * F);
    rt::spmm_values_forward(y.data(), d, dvals.data(), dx.data(), F);
    gOk &=
        check(tag + " spmm_values_forward", download(y.data(), rows * F), want);
    std::vector<float> gx = random_values(gRng, int64_t(cols) * F, -1, 1),
                       gv = random_values(gRng, nnz, -1, 1);
    auto dgx = dev(gx), dgv = dev(gv);
    ref::spmm_values_backward(gx.data(), gv.data(), a, vals.data(), dy.data(),
                              x.data(), F);
    rt::spmm_values_backward(dgx.data(), dgv.data(), d, dvals.data(),
                             ddy.data(), dx.data(), F);
    gOk &= check(tag + " spmm_values_backward dx",
                 download(dgx.data(), cols * F), gx);
    gOk &= check(tag + " spmm_values_backward dvalues",
                 download(dgv.data(), nnz), gv);
  }
  { // sage's mean: the reference's spmm with 1 / (the row's entries)
    std::vector<float> means(static_cast<size_t>(nnz)), want(size_t(rows * F));
    for (int32_t i = 0; i < rows; ++i)
      for (int32_t e = a.rowPtr[i]; e < a.rowPtr[i + 1]; ++e)
        means[size_t(e)] = 1.0f / float(a.rowPtr[i + 1] - a.rowPtr[i]);
    ref::spmm_mean_forward(want.data(), a, x.data(), F);
    rt::DeviceBuffer<act_t> y(rows * F);
    rt::spmm_mean_forward(y.data(), d, dx.data(), F);
    gOk &=
        check(tag + " spmm_mean_forward", download(y.data(), rows * F), want);
    std::vector<float> gx = random_values(gRng, int64_t(cols) * F, -1, 1);
    auto dgx = dev(gx);
    ref::spmm_mean_backward(gx.data(), a, dy.data(), F);
    rt::spmm_mean_backward(dgx.data(), d, ddy.data(), F);
    gOk &= check(tag + " spmm_mean_backward dx", download(dgx.data(), cols * F),
                 gx);
    std::vector<float> viaValues(size_t(rows * F));
    ref::spmm_values_forward(viaValues.data(), a, means.data(), x.data(), F);
    gOk &= check(tag + " spmm_mean_forward = spmm_values with 1/deg", viaValues,
                 want);
  }
  { // sddmm: x [rows, K], y [cols, K]
    std::vector<float> want(static_cast<size_t>(nnz));
    ref::sddmm_forward(want.data(), a, xr.data(), x.data(), F);
    rt::DeviceBuffer<act_t> out(nnz);
    rt::sddmm_forward(out.data(), d, dxr.data(), dx.data(), F);
    gOk &= check(tag + " sddmm_forward", download(out.data(), nnz), want);
    std::vector<float> g1 = random_values(gRng, int64_t(rows) * F, -1, 1),
                       g2 = random_values(gRng, int64_t(cols) * F, -1, 1);
    auto dg1 = dev(g1), dg2 = dev(g2);
    ref::sddmm_backward(g1.data(), g2.data(), a, vals.data(), xr.data(),
                        x.data(), F);
    rt::sddmm_backward(dg1.data(), dg2.data(), d, dvals.data(), dxr.data(),
                       dx.data(), F);
    gOk &=
        check(tag + " sddmm_backward dx", download(dg1.data(), rows * F), g1);
    gOk &=
        check(tag + " sddmm_backward dy", download(dg2.data(), cols * F), g2);
  }
  { // edge softmax
    const float scale = 1.0f / std::sqrt(float(F));
    const std::vector<float> s = random_values(gRng, nnz, -4, 4);
    std::vector<float> want(size_t(nnz), 0.0f);
    ref::edge_softmax_forward(want.data(), a, s.data(), scale);
    auto ds = dev(s);
    rt::DeviceBuffer<act_t> out(nnz); // zero: empty rows write nothing
    rt::edge_softmax_forward(out.data(), d, ds.data(), scale);
    const std::vector<float> got = download(out.data(), nnz);
    gOk &= check(tag + " edge_softmax_forward", got, want);
    const std::vector<float> dout = random_values(gRng, nnz, -1, 1);
    std::vector<float> g = random_values(gRng, nnz, -1, 1);
    auto dg = dev(g), dd = dev(dout), dwant = dev(want);
    // Both from the same (act_t-rounded) forward result.
    std::vector<float> outAct(want.size());
    for (size_t e = 0; e < want.size(); ++e)
      outAct[e] = round_act(want[e]);
    ref::edge_softmax_backward(g.data(), a, outAct.data(), dout.data(), scale);
    rt::edge_softmax_backward(dg.data(), d, dwant.data(), dd.data(), scale);
    gOk &= check(tag + " edge_softmax_backward", download(dg.data(), nnz), g);
  }
  { // GATConv: H heads of C (8 heads where F allows), x [cols, F] the sources
    const int64_t H = F % 8 == 0 ? 8 : 1, C = F / H;
    const std::vector<float> att = random_values(gRng, H * C, -1, 1),
                             sDst = random_values(gRng, rows * H, -2, 2),
                             sSrc = random_values(gRng, cols * H, -2, 2);
    auto datt = dev(att), dsd = dev(sDst), dss = dev(sSrc);
    std::vector<float> s(size_t(cols * H));
    ref::head_dot_forward(s.data(), x.data(), att.data(), cols, H, C);
    rt::DeviceBuffer<act_t> sd(cols * H);
    rt::head_dot_forward(sd.data(), dx.data(), datt.data(), cols, H, C);
    gOk &= check(tag + " head_dot_forward", download(sd.data(), cols * H), s);
    std::vector<float> gx = random_values(gRng, cols * F, -1, 1),
                       ga = random_values(gRng, H * C, -1, 1);
    auto dgx = dev(gx);
    rt::DeviceBuffer<float> dga(H * C);
    upload(dga.data(), ga);
    ref::head_dot_backward(gx.data(), ga.data(), sSrc.data(), x.data(),
                           att.data(), cols, H, C);
    rt::head_dot_backward(dgx.data(), dga.data(), dss.data(), dx.data(),
                          datt.data(), cols, H, C);
    gOk &= check(tag + " head_dot_backward dx", download(dgx.data(), cols * F),
                 gx);
    gOk &=
        check(tag + " head_dot_backward datt", download(dga.data(), H * C), ga);
    std::vector<float> want(size_t(rows * F));
    ref::gat_aggregate_forward(want.data(), a, sDst.data(), sSrc.data(),
                               x.data(), H, C, 0.2f);
    rt::DeviceBuffer<act_t> y(rows * F);
    rt::gat_aggregate_forward(y.data(), d, dsd.data(), dss.data(), dx.data(), H,
                              C, 0.2f);
    gOk &= check(tag + " gat_aggregate_forward", download(y.data(), rows * F),
                 want);
    std::vector<float> g1 = random_values(gRng, rows * H, -1, 1),
                       g2 = random_values(gRng, cols * H, -1, 1),
                       g3 = random_values(gRng, cols * F, -1, 1);
    auto dg1 = dev(g1), dg2 = dev(g2), dg3 = dev(g3);
    ref::gat_aggregate_backward(g1.data(), g2.data(), g3.data(), a, sDst.data(),
                                sSrc.data(), x.data(), dy.data(), H, C, 0.2f);
    rt::gat_aggregate_backward(dg1.data(), dg2.data(), dg3.data(), d,
                               dsd.data(), dss.data(), dx.data(), ddy.data(), H,
                               C, 0.2f);
    gOk &= check(tag + " gat_aggregate_backward ds_dst",
                 download(dg1.data(), rows * H), g1);
    gOk &= check(tag + " gat_aggregate_backward ds_src",
                 download(dg2.data(), cols * H), g2);
    gOk &= check(tag + " gat_aggregate_backward dx",
                 download(dg3.data(), cols * F), g3);
  }
  // Both formats were used: each names its variant and why.
  const std::string desc = rt::describe(d);
#ifdef AUTODDL_FP32
  const std::string want = "variant every window on CUDA cores";
#else
  const std::string want = gVariant == "auto"     ? " decided; first use"
                           : gVariant == "hybrid" ? "variant hybrid forced"
                                                  : "variant all-tc forced";
#endif
  size_t seen = 0;
  for (size_t at = desc.find(want); at != std::string::npos;
       at = desc.find(want, at + 1))
    ++seen;
  if (seen != 2) {
    std::printf("FAIL %s describe() names \"%s\" %zu times, not twice: %s\n",
                tag.c_str(), want.c_str(), seen, desc.c_str());
    gOk = false;
  }
}

} // namespace

int main(int argc, char **argv) {
  unsigned seed = 0;
  int status = 0;
  if (!seed_from_args(argc, argv, "SparseOpsCheck", seed, status))
    return status;
  if (!cuda_device_present("SparseOpsCheck"))
    return 77;
  gRng.seed(seed);
  for (const char *variant : {"auto", "hybrid", "tc"}) {
    setenv("AUTODDL_SPMM_VARIANT", variant, 1);
    gVariant = variant;
    check_graph(1000, 1000, 8, 16);
    check_graph(2708, 2708, 5, 7);  // gcn-cora's shape, 7 classes
    check_graph(37, 37, 30, 64);    // rows not a multiple of 8, dense
    check_graph(300, 1000, 10, 16); // a row block of a larger graph (dp)
  }
  setenv("AUTODDL_SPMM_VARIANT", "all-tc", 1); // not a variant's name here
  try {
    rt::csr_to_device(1, 1, {0, 1}, {0}, {1.0f});
    std::printf("FAIL AUTODDL_SPMM_VARIANT=all-tc was accepted\n");
    gOk = false;
  } catch (const std::invalid_argument &e) {
    std::printf("ok   bad AUTODDL_SPMM_VARIANT: %s\n", e.what());
  }
  unsetenv("AUTODDL_SPMM_VARIANT");
  std::printf("SparseOpsCheck (%s): %s\n", kMode, gOk ? "PASS" : "FAIL");
  return gOk ? 0 : 1;
}
