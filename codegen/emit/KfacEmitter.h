//===- KfacEmitter.h - K-FAC's part of the train.cpp emitter ---*- C++ -*-===//
//
// K-FAC in the generated programs (KfacEmitter.cpp): the layer table the
// linears' emitter fills (record), and what is emitted from it, per stage
// (stageFunction), per device (placement) and for the program
// (programText). It reads the EmitContext and writes only its own table.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace autoddl::codegen::emit {

class KfacEmitter {
public:
  explicit KfacEmitter(const EmitContext &cx) : cx_(cx) {}

  /// Refuses a K-FAC plan without layers to precondition.
  void check() const;
  /// Records linear c (if the plan lists it) as a row of the layer table:
  /// its operands, its output gradient `dy`, `rows` samples of `in` -> `out`
  /// features (weight [out,in] where `tw`).
  void record(const OpCall &c, const std::string &dy, int64_t rows, int64_t in,
              int64_t out, bool tw);
  /// Whether stage `st` has K-FAC layers (and so a stage<st>_kfac).
  bool onStage(int st) const { return cases_.count(st) > 0; }
  /// Applies `rename` to stage st's operands (its layers' table names).
  template <typename Rename> void renameOperands(int st, Rename rename) {
    if (auto k = cases_.find(st); k != cases_.end())
      for (Case &c : k->second) {
        c.x = rename(c.x);
        c.dy = rename(c.dy);
      }
  }
  /// Stage `st`'s K-FAC operand function (empty without K-FAC layers).
  std::string stageFunction(int st) const;
  // A K-FAC item placed on a device: run in the refresh cycle's step `phase`
  // (0: the refresh step), in the canonical order of `key` within its slot;
  // `entry`, its instruction-table entry (ScheduleTable.h).
  struct Call {
    int phase;
    std::tuple<int, int, int> key; // kind (curvature, reduce, invert), row, G
    std::string entry;
    int saved = -1; // kfac_curvature_saved's layer row
  };
  // (device, slot) -> calls; slot k: before instruction k, k = the list's
  // length: after the last.
  using Placement = std::map<std::pair<int, size_t>, std::vector<Call>>;
  Placement placement(const pipeline::Schedule &s) const;
  /// kfac_program(): the plan's settings and the layer table, its rows as
  /// loops over a layer index where `layerTables` (LayerLoop.cpp).
  std::string programText(bool layerTables) const;

private:
  struct Placing;
  int rowOf(int layer) const;
  void placeCurvature(const pipeline::Schedule &s, Placing &p) const;
  void placeReductions(const pipeline::Schedule &s, Placing &p) const;

  const EmitContext &cx_;
  // Per linear op its row of the layer table, and the rows.
  std::map<size_t, int> index_;
  std::vector<std::string> rows_;     // each row's fields after its name
  std::vector<std::string> rowNames_; // each row's op name
  std::map<std::string, int> byName_; // op name -> row
  std::vector<int> stage_;            // per row: its model stage
  // Per model stage, the cases of its curvature function: a layer's row, its
  // input (factor A's operand), output gradient (G's) and rows.
  struct Case {
    int row;
    std::string x, dy;
    int64_t rows;
  };
  std::map<int, std::vector<Case>> cases_;
};

} // namespace autoddl::codegen::emit
