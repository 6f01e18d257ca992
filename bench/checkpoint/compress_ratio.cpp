// What a BitSnap checkpoint of DIR would store (issue 46 item 4), with
// backends/common/CheckpointCompress.h's encodings: the parameters
// (model.safetensors) as a bitmask-sparse delta against BASE's, the AdamW
// moments (optimizer.safetensors, *.exp_avg / *.exp_avg_sq) cluster-quantized
// as stored (SignedLog). One line per DIR: bytes raw and encoded, the ratio,
// the share of parameters changed since BASE, the quantization's error: the
// largest over the moments of ||q(x) - x|| / ||x|| (L2, per tensor), for m
// and for v apart, and the encode's seconds. Then, per DIR and companding
// (Linear: the k-means of the raw values, before log-domain levels), what a
// resumed AdamW step sees: each element's relative error of m, |q(m)/m - 1|,
// and of sqrt(v), |sqrt(q(v)/v) - 1| (nonzero elements, all moments pooled):
// median, 99th percentile, largest; and the error of AdamW's update
// direction m / (sqrt(v) + eps) they give. Lossless delta: no error.
//
//   c++ -O2 -std=c++17 -I ROOT bench/checkpoint/compress_ratio.cpp (and)
//     ROOT/backends/common/{CheckpointCompress,Safetensors,FileIo,MiniJson}.cpp
//   ./a.out BASE/step-K DIR/step-M ...
#include "backends/common/CheckpointCompress.h"
#include "backends/common/Safetensors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace autoddl::rt;

namespace {

/// Relative errors pooled over a checkpoint's moments: a histogram of
/// log10(error) in 0.01 bins from 1e-9 (smaller errors in the first bin), so
/// 355M's 700M elements need no list; quantiles to 2.3 %.
struct ErrorHistogram {
  static constexpr int kBins = 1300;
  std::vector<int64_t> bins = std::vector<int64_t>(kBins, 0);
  int64_t count = 0;
  double worst = 0;
  void add(double e) {
    const int b = e > 0 ? int(std::floor(100 * (std::log10(e) + 9))) : 0;
    ++bins[size_t(std::clamp(b, 0, kBins - 1))];
    ++count;
    worst = std::max(worst, e);
  }
  double quantile(double q) const {
    int64_t seen = 0;
    for (int b = 0; b < kBins; ++b)
      if ((seen += bins[size_t(b)]) >= q * double(count))
        return std::pow(10.0, (b + 1) / 100.0 - 9);
    return worst;
  }
};

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s BASE_STEP_DIR STEP_DIR...\n", argv[0]);
    return 2;
  }
  try {
    const SafetensorsFile base =
        safetensors_read(std::string(argv[1]) + "/model.safetensors");
    std::printf("%-40s %10s %10s %7s %8s %10s %10s %7s %9s %9s %7s %9s\n",
                "folder", "param_MB", "delta_MB", "ratio", "changed",
                "moment_MB", "quant_MB", "ratio", "m_relerr", "v_relerr",
                "total", "encode_s");
    for (int a = 2; a < argc; ++a) {
      const std::string dir = argv[a];
      const SafetensorsFile model =
          safetensors_read(dir + "/model.safetensors");
      const SafetensorsFile opt =
          safetensors_read(dir + "/optimizer.safetensors");
      auto start = std::chrono::steady_clock::now();
      ErrorHistogram errors[2][2]; // [Linear, SignedLog][m, v]
      // AdamW's update direction m / (sqrt(v) + eps) (bias corrections and
      // the step's own gradient left out): its L2 error over the quantized
      // pairs, and its largest elementwise change (in units of lr).
      double update_err[2] = {0, 0}, update_norm = 0, update_worst[2] = {0, 0};
      std::string m_name; // the last quantized m, decoded both ways
      const float *m_data = nullptr;
      std::vector<float> m_back[2];
      double raw = 0, delta = 0, changed = 0, count = 0;
      for (const auto &[name, t] : model.tensors) {
        auto b = base.tensors.find(name);
        if (b == base.tensors.end() || b->second.numel() != t.numel())
          throw std::runtime_error(argv[1] + std::string(": no tensor \"") +
                                   name + "\" of the shape in " + dir);
        const BitmaskDelta d = delta_encode(b->second.data, t.data, t.numel());
        raw += 4.0 * double(t.numel());
        delta += double(d.bytes());
        changed += double(d.changed.size());
        count += double(t.numel());
      }
      double mraw = 0, quant = 0, m_rel = 0, v_rel = 0;
      for (const auto &[name, t] : opt.tensors) {
        const bool v = name.size() > 11 &&
                       name.compare(name.size() - 11, 11, ".exp_avg_sq") == 0;
        const bool m = !v && name.size() > 8 &&
                       name.compare(name.size() - 8, 8, ".exp_avg") == 0;
        if (!m && !v)
          continue; // K-FAC's inverses: not moments
        const int threads =
            int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
        const ClusterQuantized q = cluster_quantize(
            t.data, t.numel(), Companding::SignedLog, 0, threads);
        mraw += 4.0 * double(t.numel());
        // A tensor its centroids would outweigh (a bias, a norm's scale)
        // stays raw, exact.
        if (q.bytes() >= 4 * t.numel()) {
          quant += 4.0 * double(t.numel());
          continue;
        }
        std::vector<float> back(size_t(t.numel()));
        cluster_dequantize(q, back.data());
        double err = 0, norm = 0;
        for (int64_t i = 0; i < t.numel(); ++i) {
          const double d = double(back[size_t(i)]) - double(t.data[i]);
          err += d * d;
          norm += double(t.data[i]) * double(t.data[i]);
        }
        const double rel = norm > 0 ? std::sqrt(err / norm) : 0;
        (v ? v_rel : m_rel) = std::max(v ? v_rel : m_rel, rel);
        quant += double(q.bytes());
        // Each element's error under both compandings (outside encode_s).
        const auto encoded = std::chrono::steady_clock::now();
        for (int c = 0; c < 2; ++c) {
          const ClusterQuantized cq =
              c == 0 ? cluster_quantize(t.data, t.numel(), Companding::Linear,
                                        32, threads)
                     : q;
          cluster_dequantize(cq, back.data());
          for (int64_t i = 0; i < t.numel(); ++i)
            if (t.data[i] != 0)
              errors[c][v].add(
                  v ? std::fabs(std::sqrt(double(back[size_t(i)]) /
                                          double(t.data[i])) -
                                1.0)
                    : std::fabs(double(back[size_t(i)]) / double(t.data[i]) -
                                1.0));
          if (!v) {
            m_back[c] = back;
            continue;
          }
          if (m_data == nullptr || m_name + "_sq" != name)
            continue;
          const double eps = 1e-8;
          for (int64_t i = 0; i < t.numel(); ++i) {
            const double u = m_data[i] / (std::sqrt(double(t.data[i])) + eps);
            const double du = m_back[c][size_t(i)] /
                                  (std::sqrt(double(back[size_t(i)])) + eps) -
                              u;
            update_err[c] += du * du;
            update_worst[c] = std::max(update_worst[c], std::fabs(du));
            if (c == 0)
              update_norm += u * u;
          }
        }
        if (!v)
          m_name = name, m_data = t.data;
        start += std::chrono::steady_clock::now() - encoded;
      }
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      std::printf("%-40s %10.2f %10.2f %6.1fx %7.2f%% %10.2f %10.2f %6.1fx "
                  "%9.2e %9.2e %6.1fx %9.2f\n",
                  dir.c_str(), raw / 1e6, delta / 1e6, raw / delta,
                  100 * changed / count, mraw / 1e6, quant / 1e6,
                  quant > 0 ? mraw / quant : 0, m_rel, v_rel,
                  (raw + mraw) / (delta + quant), seconds);
      for (int c = 0; c < 2; ++c)
        std::printf("  %-10s m: median %.2e p99 %.2e max %.2e   sqrt(v): "
                    "median %.2e p99 %.2e max %.2e\n",
                    c == 0 ? "linear" : "signed-log",
                    errors[c][0].quantile(0.5), errors[c][0].quantile(0.99),
                    errors[c][0].worst, errors[c][1].quantile(0.5),
                    errors[c][1].quantile(0.99), errors[c][1].worst);
      for (int c = 0; c < 2; ++c)
        std::printf("  %-10s update m/(sqrt(v)+1e-8): relative L2 error %.2e, "
                    "largest change %.2e\n",
                    c == 0 ? "linear" : "signed-log",
                    update_norm > 0 ? std::sqrt(update_err[c] / update_norm)
                                    : 0,
                    update_worst[c]);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
