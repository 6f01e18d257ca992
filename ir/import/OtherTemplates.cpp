//===- OtherTemplates.cpp - mlp, vgg and the graph models ----------------===//
#include "ir/import/JsonFields.h"
#include "ir/import/TemplateSupport.h"

#include <cmath>

namespace autoddl::import {

ModelGraph buildMlp(const MlpConfig &c, const BuildOptions &o) {
  requireNoSeq(o, "mlp");
  require(c.hiddenSizes.size() <= static_cast<size_t>(kMaxLayers), o,
          "too many hidden layers (limit " + std::to_string(kMaxLayers) + ")");
  GraphBuilder b(o.name, "mlp", o.place);
  int x = b.input("features", {o.batch, c.inputDim});
  int targets = b.input("targets", {o.batch}, ops::DType::I32);
  int64_t in = c.inputDim;
  for (size_t i = 0; i < c.hiddenSizes.size(); ++i) {
    b.setLayer(i);
    const std::string n = "layers." + std::to_string(i);
    x = torchLinear(b, n, n, x, in, c.hiddenSizes[i], c.bias, c.initStd);
    x = activation(b, n + ".act", x, c.activation, o);
    in = c.hiddenSizes[i];
  }
  b.setLayer(-1);
  int logits =
      torchLinear(b, "head", "head", x, in, c.numClasses, c.bias, c.initStd);
  int loss = b.op("cross_entropy", "loss", {logits, targets});
  return b.finish(loss, c.hiddenSizes.size(), o.batch, 0);
}

std::vector<int64_t> vggChannels(const std::string &variant) {
  // torchvision.models.vgg cfgs; 0 is "M" (2x2 max-pool, stride 2).
  if (variant == "vgg11")
    return {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
  if (variant == "vgg13")
    return {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
  if (variant == "vgg16")
    return {64, 64,  0,   128, 128, 0,   256, 256, 256,
            0,  512, 512, 512, 0,   512, 512, 512, 0};
  if (variant == "vgg19")
    return {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
            512, 512, 512, 512, 0,   512, 512, 512, 512, 0};
  return {};
}

ModelGraph buildVgg(const VggConfig &c, const BuildOptions &o) {
  requireNoSeq(o, "vgg");
  require(!c.convChannels.empty() &&
              c.convChannels.size() <= static_cast<size_t>(kMaxLayers),
          o,
          "expected between 1 and " + std::to_string(kMaxLayers) + " layers");
  GraphBuilder b(o.name, "vgg", o.place);
  int x = b.input("images", {o.batch, c.inChannels, c.imageSize, c.imageSize});
  int targets = b.input("targets", {o.batch}, ops::DType::I32);
  // Module indices follow torchvision's nn.Sequential: conv, relu per conv
  // layer, one index per pool; parameter names are "features.<index>.weight".
  int64_t module = 0, in = c.inChannels, layer = 0;
  for (int64_t ch : c.convChannels) {
    const std::string n = "features." + std::to_string(module);
    if (ch == 0) {
      b.setLayer(-1);
      x = b.op("pool2d", n, {x},
               {{"kind", std::string("max")},
                {"kernel", int64_t{2}},
                {"stride", int64_t{2}}});
      module += 1;
      continue;
    }
    b.setLayer(layer++);
    // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 /
    // (Cout·3·3)).
    double sd = std::sqrt(2.0 / (static_cast<double>(ch) * 9));
    x = b.op("conv2d", n,
             {x, b.param(n + ".weight", {ch, in, 3, 3}, "normal", sd),
              b.param(n + ".bias", {ch}, "zeros")},
             {{"stride", int64_t{1}}, {"padding", int64_t{1}}});
    x = b.op("relu", "features." + std::to_string(module + 1), {x});
    module += 2;
    in = ch;
  }
  // torchvision's AdaptiveAvgPool2d((7, 7)) is the identity for 224x224 inputs;
  // for other sizes the classifier takes the feature map as it is.
  b.setLayer(-1);
  x = b.op("flatten", "flatten", {x}, {{"start_dim", int64_t{1}}});
  const ops::Shape &flat = b.shape(x);
  int64_t features = flat[1];
  const int64_t widths[] = {c.fcHidden, c.fcHidden, c.numClasses};
  for (int i = 0; i < 3; ++i) {
    b.setLayer(layer++);
    const std::string n = "classifier." + std::to_string(3 * i);
    x = torchLinear(b, n, n, x, features, widths[i], true, c.initStd);
    if (i < 2)
      x = b.op("relu", "classifier." + std::to_string(3 * i + 1), {x});
    features = widths[i];
  }
  b.setLayer(-1);
  int loss = b.op("cross_entropy", "loss", {x, targets});
  return b.finish(loss, layer, o.batch, 0);
}

namespace {

/// A whole-graph model (gcn, gat, transformer_conv, sage): inputs features
/// [N, F], adjacency [N, N] (sparse) and targets [N]; `layer(i, x, in, out)`
/// builds layer i's convolution up to (not including) its bias; each layer
/// then adds its bias (parameter conv<i><biasName>), hidden layers the
/// activation `act`, and the loss is the cross-entropy over all nodes.
/// Hidden layer i is widths[i] wide, the output layer num_classes.
template <typename Layer>
ModelGraph buildGraphModel(const GcnConfig &c, const BuildOptions &o,
                           const std::string &family, Layer layer,
                           const std::string &biasName = ".bias",
                           const char *act = "relu",
                           std::vector<int64_t> widths = {}) {
  requireNoSeq(o, family);
  require(o.batch == 1, o,
          "a " + family +
              " trains on the whole graph at once: --batch must be 1");
  require(c.hiddenSizes.size() < static_cast<size_t>(kMaxLayers), o,
          "too many hidden layers (limit " + std::to_string(kMaxLayers) + ")");
  GraphBuilder b(o.name, family, o.place);
  const int64_t N = c.numNodes;
  int x = b.input("features", {N, c.inFeatures});
  int adj = b.sparseInput("adjacency", {N, N}, c.nnz);
  int targets = b.input("targets", {N}, ops::DType::I32);
  if (widths.empty())
    widths = c.hiddenSizes;
  widths.push_back(c.numClasses);
  int64_t in = c.inFeatures;
  for (size_t i = 0; i < widths.size(); ++i) {
    b.setLayer(i);
    const std::string n = "conv" + std::to_string(i + 1);
    x = layer(b, n, adj, x, in, widths[i]);
    x = b.op("bias_add", n + ".add_bias",
             {x, b.param(n + biasName, {widths[i]}, "zeros")});
    if (i + 1 < widths.size())
      x = b.op(act, n + ".act", {x});
    in = widths[i];
  }
  b.setLayer(-1);
  int loss = b.op("cross_entropy", "loss", {x, targets});
  return b.finish(loss, widths.size(), 1, 0);
}

/// A bias-free torch linear [out, in], glorot-initialised as in PyG.
int glorotLinear(GraphBuilder &b, const std::string &name, int x, int64_t in,
                 int64_t out) {
  double glorot = std::sqrt(2.0 / static_cast<double>(in + out));
  int w = b.param(name + ".weight", {out, in}, "normal", glorot);
  return b.op("linear", name, {x, w}, {{"transpose_weight", true}});
}

} // namespace

ModelGraph buildGcn(const GcnConfig &c, const BuildOptions &o) {
  return buildGraphModel(
      c, o, "gcn",
      [&](GraphBuilder &b, const std::string &n, int adj, int x, int64_t in,
          int64_t out) {
        // PyG GCNConv: lin (no bias, glorot) then propagate Â·(XW).
        x = glorotLinear(b, n + ".lin", x, in, out);
        return b.op("spmm", n + ".propagate", {adj, x}, {{"nnz", c.nnz}});
      });
}

ModelGraph buildTransformerConv(const GcnConfig &c, const BuildOptions &o) {
  return buildGraphModel(
      c, o, "transformer_conv",
      [&](GraphBuilder &b, const std::string &n, int adj, int x, int64_t in,
          int64_t out) {
        // Dot-product attention on the graph (one head, as a Transformer's
        // restricted to the edges): each node attends to its neighbours
        // (self loops included) with softmax(q_i·k_j / √d) and sums their v.
        int q = glorotLinear(b, n + ".q", x, in, out);
        int k = glorotLinear(b, n + ".k", x, in, out);
        int v = glorotLinear(b, n + ".v", x, in, out);
        int s = b.op("sddmm", n + ".scores", {adj, q, k}, {{"nnz", c.nnz}});
        int a = b.op("edge_softmax", n + ".softmax", {adj, s},
                     {{"nnz", c.nnz},
                      {"scale", 1.0 / std::sqrt(static_cast<double>(out))}});
        return b.op("spmm", n + ".propagate", {a, v}, {{"nnz", c.nnz}});
      });
}

ModelGraph buildGat(const GcnConfig &c, const BuildOptions &o) {
  // Hidden layers: `heads` heads of hidden_sizes[i] channels, concatenated.
  std::vector<int64_t> widths;
  for (int64_t h : c.hiddenSizes)
    widths.push_back(h * c.heads);
  const size_t layers = c.hiddenSizes.size() + 1;
  size_t at = 0; // the layer being built
  return buildGraphModel(
      c, o, "gat",
      [&](GraphBuilder &b, const std::string &n, int adj, int x, int64_t in,
          int64_t out) {
        // PyG GATConv: lin (glorot, no bias), the per-node terms a·Wh of each
        // head, then attention and messages over the adjacency's pattern. The
        // output layer has one head (concat=False over one head: itself).
        const int64_t heads = ++at < layers ? c.heads : 1;
        const int64_t channels = out / heads;
        int h = glorotLinear(b, n + ".lin", x, in, out);
        const double glorot =
            std::sqrt(2.0 / static_cast<double>(heads + channels));
        int src = b.op(
            "head_dot", n + ".alpha_src",
            {h, b.param(n + ".att_src", {heads, channels}, "normal", glorot)});
        int dst = b.op(
            "head_dot", n + ".alpha_dst",
            {h, b.param(n + ".att_dst", {heads, channels}, "normal", glorot)});
        return b.op("gat_aggregate", n + ".propagate", {adj, dst, src, h},
                    {{"nnz", c.nnz}, {"negative_slope", 0.2}});
      },
      ".bias", "elu", widths);
}

ModelGraph buildSage(const GcnConfig &c, const BuildOptions &o) {
  return buildGraphModel(
      c, o, "sage",
      [&](GraphBuilder &b, const std::string &n, int adj, int x, int64_t in,
          int64_t out) {
        // PyG SAGEConv (aggr "mean"): lin_l(mean_j x_j) + lin_r(x_i), lin_l's
        // bias added after the sum. The mean is linear, so lin_l runs first
        // where it narrows the rows (out < in): the spmm then moves out
        // features a node instead of in, the same function.
        int agg;
        if (out < in) {
          int l = glorotLinear(b, n + ".lin_l", x, in, out);
          agg = b.op("spmm", n + ".propagate", {adj, l},
                     {{"nnz", c.nnz}, {"reduce", std::string("mean")}});
        } else {
          int m = b.op("spmm", n + ".propagate", {adj, x},
                       {{"nnz", c.nnz}, {"reduce", std::string("mean")}});
          agg = glorotLinear(b, n + ".lin_l", m, in, out);
        }
        int r = glorotLinear(b, n + ".lin_r", x, in, out);
        return b.op("add", n + ".add_root", {agg, r});
      },
      ".lin_l.bias");
}

} // namespace autoddl::import
