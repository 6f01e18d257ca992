//===- SbpParallel.h - one mesh axis's layout as a plain value -----------===//
//
// The values the signature tables, the nd enumeration and boxing compute with.
// In the IR the same facts are the typed attributes #sbp.split, #sbp.broadcast
// and #sbp.partial (SbpAttrs.td); SbpLayout.h converts between the two.
//
// Included by SbpDialect.h before the generated interface declarations, which
// use these types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

#include "ir/dialect/SbpEnums.h.inc"

namespace autoddl::sbp {

/// S(dim), B, or P(reduction) along one mesh axis (OneFlow's SbpParallel).
struct SbpParallel {
  enum class Kind { Split, Broadcast, Partial };
  Kind kind = Kind::Broadcast;
  int64_t dim = 0;                              // Split only
  ReductionKind reduction = ReductionKind::Sum; // Partial only

  static SbpParallel split(int64_t dim) { return {Kind::Split, dim, {}}; }
  static SbpParallel broadcast() { return {}; }
  static SbpParallel partial(ReductionKind r = ReductionKind::Sum) {
    return {Kind::Partial, 0, r};
  }
  bool isSplit() const { return kind == Kind::Split; }
  bool isBroadcast() const { return kind == Kind::Broadcast; }
  bool isPartial() const { return kind == Kind::Partial; }
  bool isSplit(int64_t d) const { return isSplit() && dim == d; }

  friend bool operator==(const SbpParallel &a, const SbpParallel &b) {
    if (a.kind != b.kind)
      return false;
    if (a.isSplit())
      return a.dim == b.dim;
    if (a.isPartial())
      return a.reduction == b.reduction;
    return true;
  }
  friend bool operator!=(const SbpParallel &a, const SbpParallel &b) {
    return !(a == b);
  }
};

/// Shorthands for signature tables and tests: `using namespace sbp::shorthand;`
/// then S(0), B, P.
namespace shorthand {
inline SbpParallel S(int64_t dim) { return SbpParallel::split(dim); }
inline const SbpParallel B = SbpParallel::broadcast();
inline const SbpParallel P = SbpParallel::partial();
} // namespace shorthand

/// One legal combination of layouts of an op's operands and results along one
/// mesh axis, e.g. linear (S(0), B) -> S(0).
struct SbpSignature {
  llvm::SmallVector<SbpParallel, 4> inputs;
  llvm::SmallVector<SbpParallel, 1> outputs;

  friend bool operator==(const SbpSignature &a, const SbpSignature &b) {
    return a.inputs == b.inputs && a.outputs == b.outputs;
  }
  friend bool operator!=(const SbpSignature &a, const SbpSignature &b) {
    return !(a == b);
  }
};

namespace shorthand {
/// sig({S(0), B}, {S(0)}): a 1-D signature from operand and result layouts.
inline SbpSignature sig(std::initializer_list<SbpParallel> inputs,
                        std::initializer_list<SbpParallel> outputs) {
  SbpSignature s;
  s.inputs.assign(inputs);
  s.outputs.assign(outputs);
  return s;
}
} // namespace shorthand

/// The dual layout of a gradient: S(d) -> S(d), B -> P(sum), P -> B.
SbpParallel dual(const SbpParallel &layout);
/// Gradients flow backwards: the result gradients become inputs (dual of the
/// forward outputs) and the operand gradients outputs (dual of the forward
/// inputs).
SbpSignature dualSignature(const SbpSignature &forward);
/// Every operand and result broadcast: valid for every op.
SbpSignature allBroadcast(unsigned numInputs, unsigned numOutputs);

/// Whether a device computes its `out` piece from its `in` piece alone:
/// B -> S(d) (keep a slice), B -> P(sum) (keep on one device), S(d) -> P(sum)
/// (zero-fill around the slice).
bool isLocalTransition(const SbpParallel &in, const SbpParallel &out);

/// SbpOpInterface's defaults (ir/dialect/Signatures.cpp): `op`'s rows of the
/// one SBP rule table (ir/ops/SbpRules.h), its split granule, and its backward
/// signature (the dual, an operand without a gradient keeping its layout).
llvm::SmallVector<SbpSignature> tableSignatures(mlir::Operation *op);
int64_t tableSplitGranule(mlir::Operation *op, unsigned valueIndex,
                          int64_t dim);
SbpSignature tableBackwardSignature(mlir::Operation *op,
                                    const SbpSignature &forward);

/// "S(0)", "B", "P", "P(max)": the compact form of the IR and of diagnostics.
void print(llvm::raw_ostream &os, const SbpParallel &layout);
/// "(S(0), B) -> (S(0))".
void print(llvm::raw_ostream &os, const SbpSignature &signature);
std::string toString(const SbpParallel &layout);
std::string toString(const SbpSignature &signature);

} // namespace autoddl::sbp
