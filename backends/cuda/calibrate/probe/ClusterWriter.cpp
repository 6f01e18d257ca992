//===- ClusterWriter.cpp - calibration measurements -> cluster JSON -------===//
#include "ClusterWriter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace calib {

namespace {

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Fixed decimals: no measurement here resolves more than a few digits.
std::string num(double v, int decimals = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Dense datasheet rates of GPUs whose names we know (TFLOP/s, GB/s).
struct Datasheet {
  const char *nameContains;
  double bf16, tf32, fp32, hbmGBps;
  const char *source;
};
const Datasheet kDatasheets[] = {
    {"H200", 989.5, 494.7, 66.9, 4800,
     "NVIDIA H200 datasheet (SXM): BF16 1,979 / TF32 989 TFLOPS with "
     "sparsity, halved for dense; FP32 67 TFLOPS; HBM3e 4.8 TB/s"},
    {"H100", 989.5, 494.7, 66.9, 3350,
     "NVIDIA H100 datasheet (SXM): BF16 1,979 / TF32 989 TFLOPS with "
     "sparsity, halved for dense; FP32 67 TFLOPS; HBM3 3.35 TB/s"},
    {"A100", 312, 156, 19.5, 2039,
     "NVIDIA A100 datasheet (SXM 80GB): BF16 312, TF32 156, FP32 19.5 "
     "TFLOPS dense; HBM2e 2,039 GB/s"},
};

const Datasheet *datasheetFor(const std::string &model) {
  for (const Datasheet &d : kDatasheets)
    if (model.find(d.nameContains) != std::string::npos)
      return &d;
  return nullptr;
}

double clampFraction(double f) { return std::min(1.0, std::max(1e-3, f)); }

void appendSeries(std::ostringstream &o, const char *op,
                  const std::vector<SizeTime> &pts, const Fit &fit, bool last) {
  o << "      " << quote(op) << ": {\"fit_fixed_us\": " << num(fit.fixedUs)
    << ", \"fit_algbw_GBps\": " << num(fit.algbwGBps(), 1)
    << ", \"fit_max_rel_error\": " << num(fit.maxRelError) << ", \"points\": [";
  for (size_t i = 0; i < pts.size(); ++i)
    o << (i ? ", " : "") << "[" << num(pts[i].bytes, 0) << ", "
      << num(pts[i].timeUs) << "]";
  o << "]}" << (last ? "\n" : ",\n");
}

void appendGroup(std::ostringstream &o, const char *key, const GroupSeries &g,
                 bool last) {
  LinkFit f = fitLink(g);
  o << "    " << quote(key) << ": {\n      \"ranks\": " << g.ranks
    << ", \"busbw_GBps\": " << num(f.busbwGBps, 1)
    << ", \"latency_us\": " << num(f.latencyUs)
    << ", \"overhead_us\": " << num(f.overheadUs)
    << ", \"p2p_GBps\": " << num(f.p2pGBps, 1) << ",\n";
  appendSeries(o, "all_reduce", g.allReduce, f.allReduce, false);
  appendSeries(o, "all_gather", g.allGather, f.allGather, false);
  appendSeries(o, "send_recv", g.sendRecv, f.sendRecv, true);
  o << "    }" << (last ? "\n" : ",\n");
}

} // namespace

Fit fitAlphaBeta(const std::vector<SizeTime> &points) {
  double sw = 0, swx = 0, swxx = 0, swy = 0, swxy = 0;
  for (const SizeTime &p : points) {
    if (p.timeUs <= 0)
      continue;
    double w = 1.0 / (p.timeUs * p.timeUs);
    sw += w;
    swx += w * p.bytes;
    swxx += w * p.bytes * p.bytes;
    swy += w * p.timeUs;
    swxy += w * p.bytes * p.timeUs;
  }
  double det = sw * swxx - swx * swx;
  Fit f;
  if (!(std::fabs(det) > 0))
    return f;
  f.fixedUs = (swxx * swy - swx * swxy) / det;
  f.usPerByte = (sw * swxy - swx * swy) / det;
  for (const SizeTime &p : points)
    if (p.timeUs > 0)
      f.maxRelError = std::max(
          f.maxRelError,
          std::fabs(f.fixedUs + f.usPerByte * p.bytes - p.timeUs) / p.timeUs);
  return f;
}

LinkFit fitLink(const GroupSeries &g) {
  LinkFit l;
  l.allReduce = fitAlphaBeta(g.allReduce);
  l.allGather = fitAlphaBeta(g.allGather);
  l.sendRecv = fitAlphaBeta(g.sendRecv);
  int n = std::max(2, g.ranks);
  l.busbwGBps = l.allReduce.algbwGBps() * 2.0 * (n - 1) / n;
  // a_AR = c + 2(n-1)·alpha, a_AG = c + (n-1)·alpha (docs/cost-model.md §2.3).
  l.latencyUs =
      std::max(0.0, (l.allReduce.fixedUs - l.allGather.fixedUs) / (n - 1));
  l.overheadUs = std::max(0.0, l.allGather.fixedUs - (n - 1) * l.latencyUs);
  l.p2pGBps = l.sendRecv.algbwGBps();
  return l;
}

std::vector<GemmShape> defaultGemmShapes() {
  std::vector<GemmShape> out;
  auto add = [&](GemmShape s) {
    if (std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  };
  const long long vocab = 50257;
  for (long long c : {768LL, 1024LL, 1280LL, 1600LL})
    for (long long tokens : {4096LL, 8192LL, 16384LL})
      for (long long tp : {1LL, 2LL}) {
        // (in, out) of each linear; column-parallel ones split out, the
        // row-parallel ones split in; the tied head is split over the vocab.
        const long long linears[][2] = {{c, 3 * c / tp},
                                        {c / tp, c},
                                        {c, 4 * c / tp},
                                        {4 * c / tp, c},
                                        {c, (vocab + tp - 1) / tp}};
        for (const auto &l : linears) {
          long long m = tokens, k = l[0], n = l[1];
          add({m, n, k}); // forward
          add({m, k, n}); // dgrad dX = dY W^T
          add({k, n, m}); // wgrad dW = X^T dY
        }
      }
  add({4096, 4096, 4096});
  add({8192, 8192, 8192});
  return out;
}

bool readShapesFile(const std::string &path, std::vector<GemmShape> &out,
                    std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot read the file";
    return false;
  }
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    GemmShape s;
    if (!(ls >> s.m)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue; // blank or comment
    } else if (ls >> s.n >> s.k) {
      std::string rest;
      if (!(ls >> rest) && s.m > 0 && s.n > 0 && s.k > 0) {
        out.push_back(s);
        continue;
      }
    }
    error = path + ":" + std::to_string(lineNo) +
            ": expected three positive integers M N K";
    return false;
  }
  if (out.empty()) {
    error = path + ": no shapes";
    return false;
  }
  return true;
}

std::string clusterJson(const Measurements &m) {
  const Datasheet *ds = datasheetFor(m.gpuModel);
  std::ostringstream o;
  const std::string measured =
      "measured by autoddl calibrate on " + m.date + " (" + m.probe + "): ";
  o << "{\n  \"name\": " << quote(m.name) << ",\n";
  o << "  \"description\": "
    << quote("Measured by autoddl calibrate (backends/cuda/calibrate) on " +
             std::to_string(m.nodes) + " node(s) of " +
             std::to_string(m.gpusPerNode) + "x " + m.gpuModel + ", " + m.date)
    << ",\n";
  o << "  \"nodes\": " << m.nodes << ",\n  \"gpus_per_node\": " << m.gpusPerNode
    << ",\n";

  // GPU. Peaks: datasheet where known (efficiency = measured / peak), else the
  // measured rates themselves (efficiency 1).
  double bf16 = ds ? ds->bf16 : m.bf16Tflops;
  double tf32 = ds ? ds->tf32 : m.tf32Tflops;
  double fp32 = ds ? ds->fp32 : m.fp32Tflops;
  double hbm = ds ? ds->hbmGBps : m.copyGBps;
  std::string peakSource =
      ds ? std::string(ds->source)
         : measured + "no datasheet known for this GPU: the measured 8192^3 "
                      "GEMM rates stand in for the peaks";
  o << "  \"gpu\": {\n    \"model\": " << quote(m.gpuModel) << ",\n";
  o << "    \"sm_count\": " << m.smCount << ",\n";
  o << "    \"peak_tflops\": {\"bf16\": " << num(bf16, 1)
    << ", \"fp16\": " << num(bf16, 1) << ", \"tf32\": " << num(tf32, 1)
    << ", \"fp32\": " << num(std::max(fp32, 0.1), 1) << "},\n";
  o << "    \"memory_GB\": " << num(m.memoryBytes / 1e9, 1) << ",\n";
  o << "    \"memory_bandwidth_GBps\": " << num(hbm, 0) << ",\n";
  if (m.l2Bytes > 0)
    o << "    \"l2_cache_MB\": " << num(m.l2Bytes / 1e6, 1) << ",\n";
  o << "    \"memory_efficiency\": " << num(clampFraction(m.copyGBps / hbm))
    << ",\n";
  o << "    \"gemm_efficiency\": " << num(clampFraction(m.bf16Tflops / bf16))
    << ",\n";
  o << "    \"kernel_launch_us\": " << num(m.launchUs, 2) << ",\n";
  o << "    \"source\": {\n";
  o << "      \"peak_tflops\": " << quote(peakSource) << ",\n";
  o << "      \"memory_bandwidth_GBps\": "
    << quote(ds ? std::string(ds->source)
                : measured + "device-to-device copy, bytes read + written")
    << ",\n";
  o << "      \"sm_count\": "
    << quote(measured + "cudaDeviceProp::multiProcessorCount") << ",\n";
  o << "      \"memory_GB\": "
    << quote(measured + "cudaDeviceProp::totalGlobalMem") << ",\n";
  o << "      \"memory_efficiency\": "
    << quote(measured +
             "the faster of a copy kernel and cudaMemcpy, 1 GiB onto another 1 "
             "GiB, moved " +
             num(m.copyGBps, 0) + " GB/s counting read + write")
    << ",\n";
  o << "      \"gemm_efficiency\": "
    << quote(measured + "cuBLASLt bf16 8192^3 GEMM at " + num(m.bf16Tflops, 1) +
             " TFLOP/s (tf32 " + num(m.tf32Tflops, 1) + ", fp32 " +
             num(m.fp32Tflops, 1) + ") on random data")
    << ",\n";
  o << "      \"kernel_launch_us\": "
    << quote(measured +
             "mean time per launch of back-to-back empty kernels, one stream")
    << "\n    }\n  },\n";

  // Links.
  if (m.hasIntra && m.gpusPerNode > 1) {
    LinkFit f = fitLink(m.intra);
    o << "  \"intra_node\": {\n    \"kind\": \"measured\",\n";
    o << "    \"bandwidth_GBps\": " << num(f.busbwGBps, 1) << ",\n";
    o << "    \"latency_us\": " << num(f.latencyUs, 2) << ",\n";
    if (f.p2pGBps > 0)
      o << "    \"p2p_bandwidth_GBps\": " << num(f.p2pGBps, 1) << ",\n";
    o << "    \"source\": "
      << quote(measured + "NCCL over the node's " +
               std::to_string(m.intra.ranks) +
               " GPUs (NCCL_NVLS_ENABLE=0); fits t = a + S/B over message "
               "sizes: all_reduce busbw " +
               num(f.busbwGBps, 1) +
               " GB/s; alpha = (a_all_reduce - "
               "a_all_gather)/(n-1); send/recv 0->1 bandwidth " +
               num(f.p2pGBps, 1) + " GB/s")
      << "\n  },\n";
  }
  if (m.hasInter && m.nodes > 1) {
    LinkFit f = fitLink(m.inter);
    o << "  \"inter_node\": {\n    \"kind\": \"measured\",\n";
    o << "    \"nics_per_node\": " << m.gpusPerNode << ",\n";
    o << "    \"nic_bandwidth_GBps\": " << num(f.busbwGBps, 1) << ",\n";
    o << "    \"latency_us\": " << num(f.latencyUs, 2) << ",\n";
    o << "    \"source\": {\"nics_per_node\": "
      << quote("assumed: one NIC per GPU (not measurable from inside NCCL)")
      << ", \"*\": "
      << quote(measured + "NCCL all_reduce over one GPU per node, every "
                          "local rank's group at once; busbw of the fit = one "
                          "GPU's share of the node's NICs")
      << "}\n  },\n";
  }
  double overhead = m.hasIntra   ? fitLink(m.intra).overheadUs
                    : m.hasInter ? fitLink(m.inter).overheadUs
                                 : 0.0;
  o << "  \"collectives\": {\"overhead_us\": " << num(overhead, 2)
    << ", \"source\": "
    << quote(m.hasIntra || m.hasInter
                 ? measured + "fixed time of the all_gather fit less its "
                              "ring steps"
                 : measured + "one GPU: no collective measured")
    << "},\n";

  o << "  \"calibration\": [";
  for (size_t i = 0; i < m.gemms.size(); ++i) {
    const GemmResult &g = m.gemms[i];
    o << (i ? ",\n" : "\n") << "    {\"op\": \"gemm\", \"precision\": "
      << "\"bf16\", \"shape\": [" << g.shape.m << ", " << g.shape.n << ", "
      << g.shape.k << "], \"time_us\": " << num(g.timeUs, 2) << ", \"source\": "
      << quote("measured: cuBLASLt, " + num(g.tflops(), 1) + " TFLOP/s") << "}";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

std::string rawJson(const Measurements &m) {
  std::ostringstream o;
  o << "{\n  \"date\": " << quote(m.date)
    << ",\n  \"probe\": " << quote(m.probe)
    << ",\n  \"gpu\": " << quote(m.gpuModel) << ",\n  \"nodes\": " << m.nodes
    << ", \"gpus_per_node\": " << m.gpusPerNode
    << ", \"sm_count\": " << m.smCount
    << ",\n  \"memory_bytes\": " << num(m.memoryBytes, 0)
    << ",\n  \"copy_GBps\": " << num(m.copyGBps, 1)
    << ",\n  \"launch_us\": " << num(m.launchUs)
    << ",\n  \"gemm_8192_tflops\": {\"bf16\": " << num(m.bf16Tflops, 1)
    << ", \"tf32\": " << num(m.tf32Tflops, 1)
    << ", \"fp32\": " << num(m.fp32Tflops, 1) << "},\n  \"gemm_bf16\": [";
  for (size_t i = 0; i < m.gemms.size(); ++i) {
    const GemmResult &g = m.gemms[i];
    o << (i ? ",\n" : "\n") << "    {\"m\": " << g.shape.m
      << ", \"n\": " << g.shape.n << ", \"k\": " << g.shape.k
      << ", \"time_us\": " << num(g.timeUs)
      << ", \"tflops\": " << num(g.tflops(), 1) << "}";
  }
  o << "\n  ],\n  \"collectives\": {\n";
  if (m.hasIntra)
    appendGroup(o, "intra_node", m.intra, !m.hasInter);
  if (m.hasInter)
    appendGroup(o, "inter_node", m.inter, true);
  o << "  }\n}\n";
  return o.str();
}

} // namespace calib
