// autoddl-graph: writes the community graph a graph model's program generates
// (backends/common/CommunityGraph.h) as files that the program reads back
// (--graph-adjacency/--graph-features/--graph-labels) and that numpy and
// PyTorch Geometric load: the same graph for both sides of a comparison
// (bench/gnn). docs/model-format.md "A graph from files".
//
//   autoddl-graph (--like NAME | --nodes N --nnz E --features F --classes C)
//                 [--seed S] [--threads T] -o DIR
#include "backends/common/CommunityGraph.h"
#include "backends/common/FileIo.h"
#include "tools/autoddl-graph/NpyWriter.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>

namespace {

using namespace autoddl;

/// The statistics of a public graph: nodes, stored entries of the symmetric
/// adjacency with self loops (both directions of each undirected edge, one
/// self loop a node), feature width and classes.
struct Like {
  const char *name;
  int64_t nodes, nnz, features, classes;
};
constexpr Like kLikes[] = {
    // PyG's Reddit: 114,615,892 directed entries.
    {"reddit", 232965, 114615892 + 232965, 602, 41},
    // ogbn-arxiv: 1,166,243 directed edges, 2,315,598 once symmetrised.
    {"ogbn-arxiv", 169343, 2315598 + 169343, 128, 40},
    // ogbn-products: 61,859,140 undirected edges, both directions stored.
    {"ogbn-products", 2449029, 2 * 61859140 + 2449029, 100, 47},
};

const char *kUsage =
    "usage: autoddl-graph (--like reddit|ogbn-arxiv|ogbn-products | --nodes N "
    "--nnz E --features F --classes C) [--seed S] [--threads T] -o DIR\n"
    "Writes DIR/adjacency.npz (CSR: indptr, indices, shape, format; self loops "
    "included), DIR/features.npy (float32 [N, F]), DIR/labels.npy (int32 [N]) "
    "and DIR/graph.json: the graph a gcn/gat/sage program of those sizes "
    "generates from --seed S (default 1234, the programs' default). Even nodes "
    "train, odd nodes are held out.\n";

struct Args {
  int64_t nodes = 0, nnz = 0, features = 0, classes = 0, threads = 0;
  uint64_t seed = 1234;
  std::string like, out;
};

int64_t number(const std::string &flag, const char *text) {
  char *end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno || end == text || *end || v < 0)
    throw std::invalid_argument(flag + ": '" + text +
                                "' is not a non-negative integer");
  return int64_t(v);
}

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc)
      throw std::invalid_argument(f + ": missing value (or unknown flag)");
    const char *v = argv[++i];
    if (f == "--like")
      a.like = v;
    else if (f == "--nodes")
      a.nodes = number(f, v);
    else if (f == "--nnz")
      a.nnz = number(f, v);
    else if (f == "--features")
      a.features = number(f, v);
    else if (f == "--classes")
      a.classes = number(f, v);
    else if (f == "--seed")
      a.seed = uint64_t(number(f, v));
    else if (f == "--threads")
      a.threads = number(f, v);
    else if (f == "-o" || f == "--out")
      a.out = v;
    else
      throw std::invalid_argument(f + ": unknown flag");
  }
  if (!a.like.empty()) {
    const Like *hit = nullptr;
    for (const Like &l : kLikes)
      hit = a.like == l.name ? &l : hit;
    if (!hit)
      throw std::invalid_argument("--like: unknown graph '" + a.like +
                                  "' (reddit, ogbn-arxiv, ogbn-products)");
    a.nodes = a.nodes ? a.nodes : hit->nodes;
    a.nnz = a.nnz ? a.nnz : hit->nnz;
    a.features = a.features ? a.features : hit->features;
    a.classes = a.classes ? a.classes : hit->classes;
  }
  if (a.out.empty())
    throw std::invalid_argument("-o: the output folder is required");
  const char *missing = !a.nodes      ? "--nodes"
                        : !a.nnz      ? "--nnz"
                        : !a.features ? "--features"
                        : !a.classes  ? "--classes"
                                      : nullptr;
  if (missing)
    throw std::invalid_argument(std::string(missing) +
                                ": required and positive (or --like)");
  if (a.nodes > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("--nodes: at most 2^31 - 1 (int32 indices)");
  return a;
}

int run(const Args &a) {
  rt::check_output_dir(a.out, "-o");
  const auto t0 = std::chrono::steady_clock::now();
  const rt::PlantedGraph g = rt::community_graph(
      a.seed, a.nodes, a.nnz, a.features, a.classes, 0, a.nodes, a.threads);
  const auto t1 = std::chrono::steady_clock::now();
  rt::make_directories(a.out);
  const int64_t shape[2] = {g.nodes, g.nodes};
  using graphtool::NpyArray;
  graphtool::writeNpz(
      a.out + "/adjacency.npz",
      {{"indptr", NpyArray{"<i4",
                           {g.nodes + 1},
                           g.row_ptr.data(),
                           g.row_ptr.size() * sizeof(int32_t)}},
       {"indices", NpyArray{"<i4",
                            {g.nnz()},
                            g.col_idx.data(),
                            g.col_idx.size() * sizeof(int32_t)}},
       {"shape", NpyArray{"<i8", {2}, shape, sizeof(shape)}},
       // scipy.sparse.load_npz reads format and data; numpy and the programs
       // need neither, so data (all ones) is left out to halve the file.
       {"format", NpyArray{"|S3", {}, "csr", 3}}});
  graphtool::writeNpy(
      a.out + "/features.npy",
      {"<f4", {g.nodes, g.features}, g.x.data(), g.x.size() * sizeof(float)});
  graphtool::writeNpy(
      a.out + "/labels.npy",
      {"<i4", {g.nodes}, g.labels.data(), g.labels.size() * sizeof(int32_t)});
  const double gen = std::chrono::duration<double>(t1 - t0).count(),
               all = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
  char json[512];
  std::snprintf(json, sizeof json,
                "{\"like\": \"%s\", \"nodes\": %lld, \"adjacency_entries\": "
                "%lld, \"features\": %lld, \"classes\": %lld, \"seed\": %llu, "
                "\"self_loops\": true, \"split\": \"even nodes train, odd "
                "nodes are held out\", \"generate_seconds\": %.3f, "
                "\"total_seconds\": %.3f}\n",
                a.like.c_str(), (long long)g.nodes, (long long)g.nnz(),
                (long long)g.features, (long long)g.classes,
                (unsigned long long)a.seed, gen, all);
  rt::write_file_atomically(a.out + "/graph.json", std::string(json));
  std::printf("autoddl-graph: %s: %lld nodes, %lld entries, %lld features, "
              "%lld classes (generated in %.1f s, written in %.1f s)\n",
              a.out.c_str(), (long long)g.nodes, (long long)g.nnz(),
              (long long)g.features, (long long)g.classes, gen, all - gen);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "autoddl-graph: %s\n", e.what());
    return 1;
  }
}
