//===- SbpDialect.cpp - dialect registration, attribute syntax, hooks -----===//
//
// The only translation unit that compiles the TableGen'd definitions, so the
// generated code is built once.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/SbpDialect.h"

#include "ir/dialect/SbpLayout.h"
#include "ir/dialect/Verifiers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace autoddl::sbp;

#include "ir/dialect/SbpDialect.cpp.inc"
#include "ir/dialect/SbpEnums.cpp.inc"
#include "ir/dialect/SbpInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Compact layout syntax: S(0), B, P, P(max)
//===----------------------------------------------------------------------===//

static FailureOr<SbpParallel> parseAxisLayout(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (keyword == "B")
    return SbpParallel::broadcast();
  if (keyword == "S") {
    int64_t dim;
    if (parser.parseLParen() || parser.parseInteger(dim) ||
        parser.parseRParen())
      return failure();
    if (dim < 0)
      return parser.emitError(loc)
             << "expected a split dimension >= 0, got " << dim;
    return SbpParallel::split(dim);
  }
  if (keyword == "P") {
    if (failed(parser.parseOptionalLParen()))
      return SbpParallel::partial();
    SMLoc reductionLoc = parser.getCurrentLocation();
    StringRef name;
    if (parser.parseKeyword(&name))
      return failure();
    std::optional<ReductionKind> reduction = symbolizeReductionKind(name);
    if (!reduction)
      return parser.emitError(reductionLoc)
             << "expected a reduction (sum, max, min), got '" << name << "'";
    if (parser.parseRParen())
      return failure();
    return SbpParallel::partial(*reduction);
  }
  return parser.emitError(loc)
         << "expected S(<dim>), B or P, got '" << keyword << "'";
}

/// `[S(0), B]`: one layout per mesh axis.
static FailureOr<NdSbpAttr> parseAxisLayoutList(AsmParser &parser,
                                                FlatSymbolRefAttr mesh) {
  SmallVector<SbpParallel> axes;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        FailureOr<SbpParallel> axis = parseAxisLayout(parser);
        if (failed(axis))
          return failure();
        axes.push_back(*axis);
        return success();
      }))
    return failure();
  SmallVector<Attribute> attrs;
  for (const SbpParallel &axis : axes)
    attrs.push_back(toAttr(parser.getContext(), axis));
  NdSbpAttr layout = NdSbpAttr::getChecked(
      [&] { return parser.emitError(parser.getCurrentLocation()); },
      parser.getContext(), mesh, attrs);
  if (!layout)
    return failure();
  return layout;
}

static void printAxisLayoutList(AsmPrinter &printer, NdSbpAttr layout) {
  printer << "[";
  llvm::interleaveComma(layout.getAxes(), printer, [&](Attribute axis) {
    print(printer.getStream(), fromAttr(axis));
  });
  printer << "]";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

#define GET_ATTRDEF_CLASSES
#include "ir/dialect/SbpAttrs.cpp.inc"

LogicalResult SplitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t dim) {
  return verifySplitDim(emitError, dim);
}

LogicalResult NdSbpAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                FlatSymbolRefAttr mesh,
                                ArrayRef<Attribute> axes) {
  return verifyAxisLayouts(emitError, axes);
}

LogicalResult
SignatureAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      FlatSymbolRefAttr mesh, ArrayRef<NdSbpAttr> inputs,
                      ArrayRef<NdSbpAttr> outputs) {
  if (failed(verifySameMesh(emitError, mesh, inputs)))
    return failure();
  return verifySameMesh(emitError, mesh, outputs);
}

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t stage, FlatSymbolRefAttr mesh) {
  return verifyStage(emitError, stage);
}

// #sbp.nd<@mesh, [S(0), B]>
Attribute NdSbpAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  FailureOr<NdSbpAttr> layout = parseAxisLayoutList(parser, mesh);
  if (failed(layout) || parser.parseGreater())
    return {};
  return *layout;
}

void NdSbpAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", ";
  printAxisLayoutList(printer, *this);
  printer << ">";
}

// #sbp.sig<@mesh, ([S(0), B], [B, S(1)]) -> ([S(0), S(1)])>
Attribute SignatureAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  auto parseLayouts = [&](SmallVectorImpl<NdSbpAttr> &layouts) {
    return parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, [&] {
      FailureOr<NdSbpAttr> layout = parseAxisLayoutList(parser, mesh);
      if (failed(layout))
        return failure();
      layouts.push_back(*layout);
      return success();
    });
  };
  SmallVector<NdSbpAttr> inputs, outputs;
  if (parseLayouts(inputs) || parser.parseArrow() || parseLayouts(outputs) ||
      parser.parseGreater())
    return {};
  return SignatureAttr::getChecked(
      [&] { return parser.emitError(parser.getCurrentLocation()); },
      parser.getContext(), mesh, inputs, outputs);
}

void SignatureAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", ";
  auto printLayouts = [&](ArrayRef<NdSbpAttr> layouts) {
    printer << "(";
    llvm::interleaveComma(layouts, printer, [&](NdSbpAttr layout) {
      printAxisLayoutList(printer, layout);
    });
    printer << ")";
  };
  printLayouts(getInputs());
  printer << " -> ";
  printLayouts(getOutputs());
  printer << ">";
}

//===----------------------------------------------------------------------===//
// sbp.mesh axes: [dp = 2, tp = 4]
//===----------------------------------------------------------------------===//

static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &names,
                                 DenseI64ArrayAttr &shape) {
  SmallVector<Attribute> nameAttrs;
  SmallVector<int64_t> sizes;
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&] {
        std::string name;
        int64_t size;
        if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
            parser.parseInteger(size))
          return failure();
        nameAttrs.push_back(parser.getBuilder().getStringAttr(name));
        sizes.push_back(size);
        return success();
      }))
    return failure();
  names = parser.getBuilder().getArrayAttr(nameAttrs);
  shape = parser.getBuilder().getDenseI64ArrayAttr(sizes);
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, MeshOp, ArrayAttr names,
                          DenseI64ArrayAttr shape) {
  printer << "[";
  for (unsigned axis = 0; axis < names.size(); ++axis) {
    if (axis)
      printer << ", ";
    printer.printKeywordOrString(cast<StringAttr>(names[axis]).getValue());
    printer << " = " << (axis < shape.size() ? shape[axis] : 0);
  }
  printer << "]";
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

#define GET_OP_CLASSES
#include "ir/dialect/SbpOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

void SbpDialect::initialize() {
  registerAttributes();
  registerOps();
}

void SbpDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/dialect/SbpAttrs.cpp.inc"
      >();
}

void SbpDialect::registerOps() {
  addOperations<
#define GET_OP_LIST
#include "ir/dialect/SbpOps.cpp.inc"
      >();
}

LogicalResult SbpDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  return verifyDiscardableAttribute(op, attr);
}

LogicalResult SbpDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  return verifyArgumentAttribute(op, argIndex, attr);
}
