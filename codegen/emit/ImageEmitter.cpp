//===- ImageEmitter.cpp - image ops ---------------------------------------===//
//
// conv2d, pool2d, flatten / reshape and transpose: the same calls on both
// backends (backends/{cpu,cuda}/kernels/Conv.h, Shape.h); the CUDA
// program's channels-last conv2d and pool2d (ChannelsLast.cpp) add a flag.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

namespace autoddl::codegen::emit {

/// conv2d
void OpEmitters::emitConv2d(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  // Replicated over tp: every rank convolves its whole micro-batch.
  const auto &xsh = xs[0], &wsh = xs[1];
  const std::string shape = fmt::format(
      "Conv2dShape{{{}, {}, {}, {}, {}, {}, {}, {}, {}{}}}", xsh[0], xsh[1],
      xsh[2], xsh[3], wsh[0], wsh[2], wsh[3], attrOf(op, ops::attr::kStride),
      attrOf(op, ops::attr::kPadding),
      cx_.nhwcOps.count(i) ? ", /*channelsLast=*/true" : "");
  const std::string b = op.operands.size() > 2 ? x[2] : "nullptr";
  const std::string db = op.operands.size() > 2 ? dx[2] : "nullptr";
  F(fmt::format("conv2d_forward({}, {}, {}, {}, {});", y, x[0], x[1], b,
                shape));
  if (!cx_.isInput(op.operands[0]))
    BI(fmt::format("conv2d_backward({}, nullptr, nullptr, {}, {}, {}, {}{});",
                   dx[0], dy, x[0], x[1], shape, storeFlags(c, {0})));
  BW(fmt::format("conv2d_backward(nullptr, {}, {}, {}, {}, {}, {});", dx[1], db,
                 dy, x[0], x[1], shape));
}

/// pool2d
void OpEmitters::emitPool2d(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const auto &a = xs[0];
  const char *isMax =
      attrOr(op, ops::attr::kPoolKind, "max") == "max" ? "true" : "false";
  const int64_t kernel = attrOr(op, ops::attr::kKernel, 2),
                stride = attrOf(op, ops::attr::kStride);
  // Channels-last: the planes' channel count, their values that far apart.
  const std::string last =
      cx_.nhwcOps.count(i) ? fmt::format(", /*channels_last=*/{}", a[1]) : "";
  F(fmt::format("pool2d_forward({}, {}, {}, {}, {}, {}, {}, {}{});", y, x[0],
                a[0] * a[1], a[2], a[3], kernel, stride, isMax, last));
  if (cx_.isInput(op.operands[0]))
    return;
  const std::string store = storeFlags(c, {0});
  BI(fmt::format("pool2d_backward({}, {}, {}, {}, {}, {}, {}, {}, {}{}{});",
                 dx[0], x[0], dy, a[0] * a[1], a[2], a[3], kernel, stride,
                 isMax, last.empty() && !store.empty() ? ", 0" : last, store));
}

/// flatten, reshape
void OpEmitters::emitFlatten(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  // The same row-major elements: the target's copy (a stream copy on cuda).
  std::string copy =
      fmt::format(fmt::runtime(cx_.target.copyElements), fmt::arg("dst", y),
                  fmt::arg("src", x[0]), fmt::arg("n", n));
  F(copy.substr(2, copy.size() - 3)); // F indents and ends the line

  if (!cx_.isInput(op.operands[0]))
    BI(fmt::format("add_into({}, {}, {}{});", dx[0], dy, n,
                   storeFlags(c, {0})));
}

/// transpose
void OpEmitters::emitTranspose(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const std::string perm = shapeInit(attrOr(op, ops::attr::kPerm, {}));
  F(fmt::format("transpose_forward({}, {}, {}, {});", y, x[0], shapeInit(xs[0]),
                perm));
  if (!cx_.isInput(op.operands[0]))
    BI(fmt::format("transpose_backward({}, {}, {}, {});", dx[0], dy,
                   shapeInit(xs[0]), perm));
}

} // namespace autoddl::codegen::emit
