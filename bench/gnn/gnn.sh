#!/usr/bin/env bash
# GNN training end to end against PyTorch Geometric (issue 50 item 1): full-graph training of a
# 2-layer GCN and GraphSAGE (mean; hidden 256) on graphs with the statistics of Reddit,
# ogbn-arxiv and ogbn-products (tools/autoddl-graph: power-law degrees, planted communities), the
# same files read by our generated CUDA program (--graph-adjacency/--graph-features/--graph-labels)
# and by the peer (bench/gnn/pyg_peer.py: PyG's fastest configuration that runs, chosen by timing).
#
#   bash bench/gnn/gnn.sh stage DIR [AUTODDL]   # here: model JSONs, plans, CUDA projects into DIR
#   bash bench/gnn/gnn.sh device DIR            # GPU machine: build, graphs, both sides, table
#
# DIR is ignored by git (.gpu/gnn) and carried to the GPU machine. Environment:
#   GRAPHS   graphs to run (default "ogbn-arxiv reddit ogbn-products")
#   MODELS   models (default "gcn sage"; "gat", ours against PyG's GATConv, 8 heads x 8, and
#            "transformer_conv", our dot-product attention against PyG's TransformerConv, also
#            stage; both are costly for PyG on the large graphs: per-edge tensors)
#   EPOCHS   full-graph steps a run trains, both sides (default 50); LR (default 0.01, Adam /
#            AdamW without weight decay on both sides); WARMUP epochs left out of the timing (5)
#   GDIR     where the graph files go on the GPU machine (default DIR-graphs; ~3.5 GB for all)
#   DEADLINE_S  no graph is started after DEADLINE_S - 90 seconds (default 530: the table is
#            written within a 10-minute call)
#   PEER_BUDGET_S  seconds the peer may spend choosing among its eager variants per graph and
#            model (default 20); torch.compile is tried on the fastest eager one for every model
#            on the first graph; PEER_COMPILE=all: on later graphs too, for the models where it
#            won on the first (each compilation costs tens of seconds)
# Results in $OUT (or DIR/results): gnn.json (one record per graph and model: our step and
# accuracy, the peer's winning variant with its epoch and accuracy, every variant tried), gnn.txt
# (the table), the logs, each program's metrics.json and the peer's JSON per graph.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: gnn.sh stage DIR [AUTODDL] | device DIR}
dir=${2:?DIR}
graphs=${GRAPHS:-ogbn-arxiv reddit ogbn-products}
models=${MODELS:-gcn sage}

# like NAME: "nodes entries features classes" of autoddl-graph --like NAME (tools/autoddl-graph).
like() {
  case $1 in
  reddit) echo "232965 114848857 602 41" ;;
  ogbn-arxiv) echo "169343 2484941 128 40" ;;
  ogbn-products) echo "2449029 126167309 100 47" ;;
  *) echo "gnn.sh: unknown graph $1" >&2; exit 2 ;;
  esac
}
# template MODEL: the autoddl template of a bench model name.
template() {
  case $1 in
  gcn | sage | gat | transformer_conv) echo "$1" ;;
  *) echo "gnn.sh: unknown model $1" >&2; exit 2 ;;
  esac
}

case $mode in
stage)
  autoddl=${3:-$root/build/tools/autoddl/autoddl}
  [ -x "$autoddl" ] || { echo "gnn.sh: $autoddl is not an executable autoddl" >&2; exit 2; }
  rm -rf "$dir" && mkdir -p "$dir/models" "$dir/src"
  for gname in $graphs; do
    read -r n nnz f c <<<"$(like "$gname")"
    for m in $models; do
      name=$m-$gname
      # gat: PyG's GAT example's widths (8 heads of 8, concatenated); the others hidden 256.
      width='"hidden_sizes": [256]' what="hidden 256"
      [ "$m" = gat ] && width='"hidden_sizes": [8], "heads": 8' what="8 heads x 8"
      cat >"$dir/models/$name.json" <<JSON
{"template": "$(template "$m")", "name": "$name",
 "description": "bench/gnn: 2-layer $m, $what, on a graph with $gname's statistics",
 "config": {"num_nodes": $n, "nnz": $nnz, "in_features": $f, $width,
            "num_classes": $c}}
JSON
      "$autoddl" plan "$dir/models/$name.json" --cluster dgx-h100-ndr --gpus 1 --global-batch 1 \
        --no-why -o "$dir/$name.plan.json" >"$dir/$name.plan.txt"
      "$autoddl" codegen "$dir/$name.plan.json" --model "$dir/models/$name.json" --backend cuda \
        -o "$dir/src/$name" >/dev/null
      echo "$name: $(grep -m1 'predicted' "$dir/$name.plan.txt" | sed 's/^ *//')"
    done
  done
  echo "$graphs" >"$dir/graphs.txt"
  echo "$models" >"$dir/models.txt"
  ;;
device)
  dir=$(realpath "$dir")
  out=${OUT:-$dir/results} gdir=${GDIR:-$dir-graphs} b=$dir-build
  epochs=${EPOCHS:-50} lr=${LR:-0.01} warmup=${WARMUP:-5}
  export NCCL_NVLS_ENABLE=0
  graphs=${GRAPHS:-$(cat "$dir/graphs.txt")} models=${MODELS:-$(cat "$dir/models.txt")}
  mkdir -p "$out" "$b" "$gdir"
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
  # The graph writer: the runtime's own generator, one g++ line (no CMake needed), and the graphs
  # written while the programs build (both use every core; the build is the longer).
  g++ -O2 -std=c++17 -pthread -I"$root" -o "$b/autoddl-graph" "$root"/tools/autoddl-graph/*.cpp \
    "$root/backends/common/CommunityGraph.cpp" "$root/backends/common/FileIo.cpp" -lz
  (for gname in $graphs; do
    [ -s "$gdir/$gname/graph.json" ] || "$b/autoddl-graph" --like "$gname" -o "$gdir/$gname"
  done) >"$out/graphs.log" 2>&1 &
  gen=$!
  # The projects' folders only (a CMakeLists.txt of an earlier call is not one).
  bash "$root/bench/cuda/shared_runtime_cmake.sh" "$dir"/src/*/ >"$dir/src/CMakeLists.txt"
  { cmake -S "$dir/src" -B "$b/build" -DCMAKE_BUILD_TYPE=Release &&
    nice cmake --build "$b/build" -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
    { tail -20 "$out/build.log"; exit 1; }
  echo "gnn.sh: built in $(($(date +%s) - t0)) s"
  wait $gen || { cat "$out/graphs.log"; exit 1; }
  cat "$out/graphs.log"
  echo "gnn.sh: graphs ready at $(($(date +%s) - t0)) s"
  deadline=${DEADLINE_S:-530} done_graphs=""
  for gname in $graphs; do
    # A graph takes up to ~90 s (both sides): none is started past the deadline, so that the
    # table of the graphs done is written within a 10-minute device call.
    if [ $(($(date +%s) - t0)) -gt $((deadline - 90)) ]; then
      echo "gnn.sh: $gname skipped: $(($(date +%s) - t0)) s spent, deadline $deadline s" >&2
      continue
    fi
    gf=(--graph-adjacency "$gdir/$gname/adjacency.npz" --graph-features "$gdir/$gname/features.npy"
      --graph-labels "$gdir/$gname/labels.npy")
    for m in $models; do
      "$b/build/train_$m-$gname" --steps "$epochs" --lr "$lr" --out "$out/ours-$m-$gname" \
        --quiet "${gf[@]}" >"$out/ours-$m-$gname.log" 2>&1 ||
        echo "gnn.sh: ours $m on $gname failed (see $out/ours-$m-$gname.log)" >&2
    done
    echo "gnn.sh: ours on $gname done at $(($(date +%s) - t0)) s"
    # torch.compile (tens of seconds to compile) is tried on the first graph for every model;
    # with PEER_COMPILE=all, on the later graphs too for the models where it won there.
    if [ -z "${compile+x}" ]; then
      compile=$models
    elif [ "${PEER_COMPILE:-first}" != all ]; then
      compile=""
    elif [ -z "${compile_decided:-}" ]; then
      compile=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["models"]
print(" ".join(k for k, r in m.items() if r.get("winner", "").endswith("/compile")))' \
        "$out/pyg-$first.json" 2>/dev/null || true)
      compile_decided=1
    fi
    first=${first:-$gname}
    python3 "$root/bench/gnn/pyg_peer.py" --graph "$gdir/$gname" --models $models \
      --epochs "$epochs" --lr "$lr" --warmup "$warmup" --budget-s "${PEER_BUDGET_S:-20}" \
      --compile $compile --out "$out/pyg-$gname.json" >"$out/pyg-$gname.log" 2>&1 ||
      echo "gnn.sh: the peer on $gname failed (see $out/pyg-$gname.log)" >&2
    tail -n 3 "$out/pyg-$gname.log"
    echo "gnn.sh: peer on $gname done at $(($(date +%s) - t0)) s"
    done_graphs="$done_graphs $gname"
    # The table so far (a call cut short keeps it).
    python3 "$root/bench/gnn/gnn_table.py" --stage "$dir" --out "$out" --warmup "$warmup" \
      --graphs $done_graphs --models $models >"$out/gnn.txt"
  done
  cat "$out/gnn.txt" 2>/dev/null || echo "gnn.sh: no graph done" >&2
  echo "gnn.sh: total $(($(date +%s) - t0)) s"
  ;;
*) echo "gnn.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
