//===- RunCheckpoint.cpp - a run's checkpoints: saved, compressed, loaded
//--===//
#include "backends/common/harness/RunCheckpoint.h"

#include "backends/common/Fp8State.h"
#include "backends/common/Safetensors.h"
#include "backends/common/harness/DataOrder.h"
#include "backends/host/MpiCheck.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <sys/stat.h>

#include <mpi.h>

namespace autoddl::rt::harness {

namespace {

void split_entries(std::vector<CheckpointEntry> all,
                   std::vector<CheckpointEntry> &params,
                   std::vector<CheckpointEntry> &state) {
  for (CheckpointEntry &e : all)
    (is_optimizer_state(e.name) ? state : params).push_back(std::move(e));
}

/// The plan a checkpoint was written under (its metadata; resuming under
/// another plan of the same model is allowed but for K-FAC's inverses).
std::string plan_string(const ProgramSpec &s) {
  return "tp=" + std::to_string(s.tp) + " pp=" + std::to_string(s.pp) +
         " dp=" + std::to_string(s.dp) + " zero=" + std::to_string(s.zero) +
         " stages=" + std::to_string(s.stages);
}

/// The metadata both files of a checkpoint carry: what a load checks before
/// reading a tensor (the model, its vocabulary, the data position: the
/// global batches read, the skipped ones included, and how many were
/// skipped, so a resumed run reads what the writing run would have read).
std::map<std::string, std::string> manifest(const ProgramSpec &s,
                                            int64_t steps_done) {
  std::map<std::string, std::string> m = {
      {"model", s.model_name},
      {"step", std::to_string(steps_done)},
      {"plan", plan_string(s)},
      {"layout", "full"},
      {"samples", std::to_string(data_batch(steps_done) * s.global_batch)},
      {"data_skipped", std::to_string(data_skip())}};
  if (s.data == DataKind::Tokens)
    m["vocab"] = std::to_string(s.vocab);
  return m;
}

/// A --checkpoint-compress save between full ones: this rank's file of
/// the folder (CompressedCheckpoint.h), encoded and written on the writer
/// thread after the snapshot. Collective only to place the blocks (no data)
/// and make the folder, as a full save. `copies`: the entries are the
/// backend's host copies (kept until the next save); else the training
/// state itself, this rank's blocks copied here.
CheckpointFolder compressed_folder(const Options &o, int64_t steps_done,
                                   const ProgramSpec &s,
                                   const std::vector<CheckpointEntry> &params,
                                   const std::vector<CheckpointEntry> &state,
                                   CompressState &compress, bool copies,
                                   CheckpointFolder f) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  struct Part {
    std::vector<CheckpointEntry> entries;
    CheckpointBlocks blocks;
    std::shared_ptr<const CompressState::Base> base;
    std::vector<std::vector<float>> owned; // the copies entries point into
    std::map<std::string, std::string> meta;
  };
  auto part = std::make_shared<Part>();
  part->entries = params;
  part->entries.insert(part->entries.end(), state.begin(), state.end());
  part->blocks = checkpoint_blocks(part->entries, MPI_COMM_WORLD);
  part->base = compress.compressed_saved();
  if (!copies) {
    part->owned.reserve(part->entries.size());
    for (size_t i = 0; i < part->entries.size(); ++i) {
      CheckpointEntry &e = part->entries[i];
      if (part->blocks.writer[size_t(rank)][i] != rank)
        continue;
      part->owned.emplace_back(e.data, e.data + e.held_count());
      e.data = part->owned.back().data();
    }
  }
  part->meta = manifest(s, steps_done);
  part->meta["format"] = "autoddl-bitsnap";
  part->meta["bitsnap_version"] = kBitsnapVersion;
  part->meta["optimizer"] = o.optimizer;
  part->meta["base"] = compress.base_name();
  part->meta["ranks"] = std::to_string(ranks);
  f.own_files = [part, rank] {
    double raw = 0, encoded = 0;
    std::vector<float> blob = encode_part(part->entries, part->blocks, rank,
                                          *part->base, raw, encoded);
    // This part's sizes: rank 0 adds the folder's up (metrics.json).
    part->meta["raw_bytes"] = std::to_string(int64_t(raw));
    part->meta["encoded_bytes"] = std::to_string(int64_t(encoded));
    ShardedFile file;
    file.name = bitsnap_part_file(rank);
    const std::string tensor = "part." + std::to_string(rank);
    const int64_t count = int64_t(blob.size());
    file.layout =
        safetensors_layout(file.name, {{tensor, {count}}}, part->meta);
    file.owned.push_back(std::move(blob));
    file.runs.push_back({file.layout.tensors.at(tensor).offset,
                         file.owned.back().data(), count});
    std::vector<ShardedFile> files;
    files.push_back(std::move(file));
    return files;
  };
  prepare_checkpoint_folder(f, MPI_COMM_WORLD);
  return f;
}

/// The folder of a checkpoint: the state snapshotted into host memory, this
/// rank's part of each file, its files named as load_checkpoint reads them,
/// and the temporary folder made (collective). `async`: the backend's copy
/// may still run (folder.ready waits, on the writer thread).
CheckpointFolder snapshot_folder(const Options &o, int64_t steps_done,
                                 const ProgramSpec &s, Backend &b, bool async,
                                 CompressState *compress = nullptr) {
  std::vector<CheckpointEntry> params, state;
  split_entries(b.checkpoint_entries(true), params, state);
  CheckpointFolder f;
  f.dir = o.save + "/step-" + std::to_string(steps_done);
  f.ready = b.snapshot(async);
  // Each rank's own blocks are written from the backend's buffers when they
  // are copies (kept until the next save, which waits for this write
  // first); the CPU program's are its training state, copied here.
  const bool stable = b.entries_are_copies();
  if (compress) {
    if (!compress->next_is_full(o.checkpoint_full_every))
      return compressed_folder(o, steps_done, s, params, state, *compress,
                               stable, std::move(f));
    // The base: copied once the snapshot is there (on the writer thread),
    // or now from the training state.
    std::function<void()> copy_base = compress->full_saved(f.dir, params);
    if (stable)
      f.ready = [ready = std::move(f.ready), copy_base] {
        if (ready)
          ready();
        copy_base();
      };
    else
      copy_base();
  }
  // model.safetensors holds the parameters only, under the model's own
  // (Hugging Face) names, with the metadata transformers' loader expects
  // ("format": "pt"): from_pretrained(dir) loads it with no unexpected keys.
  std::map<std::string, std::string> meta = manifest(s, steps_done);
  meta["format"] = "pt";
  f.files.push_back(checkpoint_shard("model.safetensors", params, meta,
                                     MPI_COMM_WORLD, stable));
  meta["format"] = "autoddl";
  meta["optimizer"] = o.optimizer;
  f.files.push_back(checkpoint_shard("optimizer.safetensors", state, meta,
                                     MPI_COMM_WORLD, stable));
  if (s.hf_config && *s.hf_config)
    f.texts.push_back({"config.json", s.hf_config});
  prepare_checkpoint_folder(f, MPI_COMM_WORLD);
  return f;
}

bool is_fp8(const CheckpointEntry &e) { return is_fp8_scaling_entry(e.name); }

/// `state` without the FP8 scaling rows (their metas keep what they hold).
void drop_fp8_scaling(std::vector<CheckpointEntry> &state) {
  state.erase(std::remove_if(state.begin(), state.end(), is_fp8), state.end());
}

bool holds_fp8_scaling(const SafetensorsIndex &index) {
  return std::any_of(
      index.tensors.begin(), index.tensors.end(),
      [](const auto &t) { return is_fp8_scaling_entry(t.first); });
}

/// The FP8 linears' scaling state is each rank's own (its tensors' amaxes):
/// it is read from a checkpoint of this plan only. One that holds none (a
/// bf16 run's, or older) or is of another plan leaves the scales to start
/// again from their first casts, said in one line on rank 0; one of this
/// plan must hold this program's entries in their shapes. Before any block
/// is read.
void plan_fp8_scaling(std::vector<CheckpointEntry> &state,
                      const SafetensorsIndex &file_index,
                      const std::string &file, const ProgramSpec &s) {
  const auto wanted = std::count_if(state.begin(), state.end(), is_fp8);
  if (wanted == 0)
    return;
  int64_t held = 0;
  for (const auto &entry : file_index.tensors)
    held += is_fp8_scaling_entry(entry.first) ? 1 : 0;
  const auto plan = file_index.metadata.find("plan");
  std::string why;
  if (held == 0)
    why = "holds no FP8 scaling state (a bf16 run's checkpoint, or an older "
          "one)";
  else if (plan == file_index.metadata.end() || plan->second != plan_string(s))
    why = "holds the FP8 scaling state of plan " +
          quote_value(plan == file_index.metadata.end() ? "" : plan->second) +
          ", kept per rank; this run's plan is \"" + plan_string(s) + "\"";
  if (!why.empty()) {
    drop_fp8_scaling(state);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      std::fprintf(stderr,
                   "autoddl: note: %s %s: the FP8 linears' scales start "
                   "again from their first casts\n",
                   file.c_str(), why.c_str());
    return;
  }
  if (held != wanted)
    throw std::runtime_error(file + ": the FP8 scaling state of " +
                             std::to_string(held) +
                             " linears, but this program has " +
                             std::to_string(wanted) + " FP8 linears");
  for (const CheckpointEntry &e : state) {
    if (!is_fp8(e))
      continue;
    auto it = file_index.tensors.find(e.name);
    if (it == file_index.tensors.end())
      throw std::runtime_error(file + ": no tensor \"" + e.name +
                               "\": the FP8 scaling state of other linears");
    if (it->second.shape != e.file_shape())
      throw std::runtime_error(
          file + ": tensor \"" + e.name + "\" has shape " +
          shape_str(it->second.shape) + ", this program's FP8 scaling state " +
          shape_str(e.file_shape()) + " (a row of " +
          std::to_string(kFp8RowFloats) + " floats a rank)");
  }
}

/// After the load: every FP8 scaling row this rank read is state its casts
/// can run on (Fp8State.h's fp8_row_error), before the backend takes it.
void check_fp8_scaling(const std::vector<CheckpointEntry> &state,
                       const std::string &file) {
  for (const CheckpointEntry &e : state) {
    if (!is_fp8_scaling_entry(e.name) || !e.data)
      continue;
    const std::string why = fp8_row_error(e.data);
    if (!why.empty())
      throw std::runtime_error(
          file + ": tensor \"" + e.name + "\", row " +
          std::to_string(e.slice.offset.empty() ? 0 : e.slice.offset[0]) +
          ": " + why);
  }
}

} // namespace

Checkpointer::Checkpointer(const Options &o, const ProgramSpec &s, Backend &b,
                           RunMetrics &m)
    : o_(o), s_(s), b_(b), m_(m) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  root_ = rank == 0;
}

void Checkpointer::save(int64_t steps_done) {
  Timer stall;
  CheckpointTiming t;
  t.step = steps_done;
  t.async = !o_.save_sync;
  std::string busy;
  if (root_ && writer_.busy(&busy) && !o_.quiet)
    std::printf("checkpoint step-%lld: the write of %s is still in flight; "
                "waiting for it\n",
                (long long)steps_done, busy.c_str());
  // Every rank's previous part must be written before its buffers are
  // overwritten by this snapshot.
  t.waited_seconds = writer_.wait();
  CheckpointFolder f =
      snapshot_folder(o_, steps_done, s_, b_, t.async,
                      o_.checkpoint_compress ? &compress_ : nullptr);
  if (f.own_files) // compressed: its sizes once written (finish)
    compressed_dirs_.push_back(f.dir);
  writer_.start(std::move(f), t.async);
  t.stall_seconds = stall.seconds();
  m_.checkpoints.push_back(t);
}

void Checkpointer::finish() {
  writer_.wait();
  std::vector<std::string> dirs;
  dirs.swap(compressed_dirs_);
  if (!root_)
    return;
  const std::vector<CheckpointWriter::Done> done = writer_.done();
  for (size_t i = 0; i < done.size() && i < m_.checkpoints.size(); ++i)
    m_.checkpoints[i].write_seconds = done[i].write_seconds;
  // Each compressed folder's parts' sizes, from their metadata: every rank
  // encoded its own on its writer thread.
  for (const std::string &dir : dirs) {
    double raw = 0, encoded = 0;
    int ranks = 1;
    struct stat st; // gone since (removed by hand): no note
    if (::stat((dir + "/" + kBitsnapFile).c_str(), &st) != 0)
      continue;
    for (int r = 0; r < ranks; ++r) {
      auto meta = safetensors_index(dir + "/" + bitsnap_part_file(r)).metadata;
      if (r == 0)
        ranks = std::max(1, std::atoi(meta["ranks"].c_str()));
      raw += std::atof(meta["raw_bytes"].c_str());
      encoded += std::atof(meta["encoded_bytes"].c_str());
    }
    char note[160];
    std::snprintf(note, sizeof note, "%s: %.2fx (%.3f of %.3f MB)",
                  dir.substr(dir.find_last_of('/') + 1).c_str(),
                  encoded > 0 ? raw / encoded : 0.0, encoded / 1e6, raw / 1e6);
    compressed_ += (compressed_.empty() ? "" : "; ") + std::string(note);
  }
}

void add_buffer_entries(std::vector<CheckpointEntry> &e,
                        const std::vector<BufferSpec> &buffers, int64_t rpp) {
  for (const BufferSpec &b : buffers) {
    CheckpointEntry c{b.name, Slice::whole({b.n}),
                      (b.devices >> rpp) & 1 ? b.host : nullptr};
    c.buffer = true;
    e.push_back(std::move(c));
  }
}

void add_fp8_scaling_entries(std::vector<CheckpointEntry> &e,
                             const std::vector<const char *> &weights,
                             std::vector<float> &rows) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  rows.assign(weights.size() * size_t(kFp8RowFloats), 0.0f);
  for (size_t i = 0; i < weights.size(); ++i) {
    Slice row{{ranks, kFp8RowFloats}, {rank, 0}, {1, kFp8RowFloats}};
    e.push_back({fp8_scaling_entry(weights[i]), std::move(row),
                 rows.data() + i * size_t(kFp8RowFloats)});
  }
}

void add_checkpoint_entries(std::vector<CheckpointEntry> &e,
                            const ParamBlock &p, float *value, float *m,
                            float *v, bool with_state, const ProgramSpec &s,
                            int64_t /*rtp: p.slice says the block*/,
                            int64_t rdp) {
  e.push_back({p.name, p.slice, p.held ? value : nullptr, p.full});
  if (!with_state)
    return;
  // The moments are the parameter's full tensors whatever the plan; a ZeRO
  // shard is the flat range [rdp * padded / dp, ...) of the rank's tp block
  // (its tail past the block's n elements padding), so any plan loads it.
  const int64_t begin = s.zero ? rdp * (p.padded / s.dp) : 0;
  const int64_t count = s.zero ? p.padded / s.dp : -1;
  e.push_back({p.name + ".exp_avg", p.slice, p.held ? m : nullptr, p.full,
               begin, count});
  e.push_back({p.name + ".exp_avg_sq", p.slice, p.held ? v : nullptr, p.full,
               begin, count});
}

void save_checkpoint(const Options &o, int64_t steps_done, const ProgramSpec &s,
                     Backend &b) {
  write_checkpoint_folder(snapshot_folder(o, steps_done, s, b, false));
}

/// The checks of a checkpoint file's metadata that need no tensor: another
/// model, another vocabulary (one line, before any tensor is read).
void check_manifest(const std::string &file,
                    const std::map<std::string, std::string> &meta,
                    const ProgramSpec &s) {
  auto get = [&](const char *key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  if (get("model") != s.model_name)
    throw std::runtime_error(file + ": a checkpoint of model " +
                             quote_value(get("model")) + ", not " +
                             s.model_name);
  if (s.data == DataKind::Tokens && meta.count("vocab") &&
      get("vocab") != std::to_string(s.vocab))
    throw std::runtime_error(file + ": a checkpoint of a vocabulary of " +
                             get("vocab") + " tokens; this model's has " +
                             std::to_string(s.vocab));
}

namespace {

/// A --checkpoint-compress folder: its base (a full checkpoint beside it)
/// loaded first, then this rank's part decoded on top. Same plan only.
int64_t load_compressed(const std::string &dir, const ProgramSpec &s,
                        Backend &b, const std::string &optimizer) {
  const std::string file = dir + "/" + kBitsnapFile;
  const SafetensorsIndex index = safetensors_index(file);
  check_manifest(file, index.metadata, s);
  auto meta = index.metadata;
  if (meta["plan"] != plan_string(s))
    throw std::runtime_error(
        file + ": a compressed checkpoint of plan \"" + meta["plan"] +
        "\", stored per rank; this run's plan is \"" + plan_string(s) +
        "\": resume it under that plan, or resume its full base " +
        meta["base"] + " under any plan");
  if (meta.count("bitsnap_version") &&
      meta["bitsnap_version"] != kBitsnapVersion)
    throw std::runtime_error(file + ": a compressed checkpoint of encoding " +
                             quote_value(meta["bitsnap_version"]) +
                             ", which this program (encoding " +
                             kBitsnapVersion + ") does not read");
  const std::string base =
      dir.substr(0, dir.find_last_of('/') + 1) + meta["base"];
  const std::string base_model = base + "/model.safetensors";
  struct stat st;
  if (meta["base"].empty() || ::stat(base_model.c_str(), &st) != 0)
    throw std::runtime_error(file + ": its base " + base_model +
                             " is missing (a compressed checkpoint holds the "
                             "changes since that full one)");
  load_checkpoint(base, s, b, optimizer);
  std::vector<CheckpointEntry> all, state;
  split_entries(b.checkpoint_entries(true), all, state);
  // The parts hold FP8 scaling rows where their base does (one process
  // writes both: a run's first save and the one after a rollback are full);
  // a bf16 program's or an older one's hold none, and its base's load said
  // so (plan_fp8_scaling).
  if (!holds_fp8_scaling(safetensors_index(base + "/optimizer.safetensors")))
    drop_fp8_scaling(state);
  all.insert(all.end(), state.begin(), state.end());
  const CheckpointBlocks blocks = checkpoint_blocks(all, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::set<int> writers; // the parts holding this rank's blocks
  for (int w : blocks.writer[size_t(rank)])
    if (w >= 0)
      writers.insert(w);
  for (int w : writers) {
    const std::string name = "part." + std::to_string(w);
    // Rank w's own file; an older folder holds every part in `file`.
    std::string from = file;
    SafetensorsIndex other;
    const SafetensorsIndex *in = &index;
    if (w > 0 && !index.tensors.count(name)) {
      from = dir + "/" + bitsnap_part_file(w);
      if (::stat(from.c_str(), &st) != 0)
        throw std::runtime_error(file + ": no " + from +
                                 " (written by another number of ranks)");
      other = safetensors_index(from);
      in = &other;
    }
    auto part = in->tensors.find(name);
    if (part == in->tensors.end() || part->second.shape.size() != 1)
      throw std::runtime_error(from + ": no tensor \"" + name +
                               "\" (written by another number of ranks)");
    std::vector<float> blob(size_t(part->second.shape[0]));
    checkpoint_load(from, *in,
                    {{name, Slice::whole(part->second.shape), blob.data()}});
    decode_part(from, blob, w, all, blocks, rank);
  }
  check_fp8_scaling(all, file);
  b.copy_params(false);
  int64_t counts[2];
  const char *keys[2] = {"step", "data_skipped"};
  for (int i = 0; i < 2; ++i) {
    const std::string &v = meta[keys[i]];
    char *end = nullptr;
    errno = 0;
    counts[i] = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno == ERANGE || counts[i] < 0)
      throw std::runtime_error(file + ": " + keys[i] + " in its metadata is " +
                               quote_value(v) + ", not a count");
  }
  set_data_skip(counts[1]);
  return counts[0];
}

} // namespace

int64_t load_checkpoint(const std::string &dir, const ProgramSpec &s,
                        Backend &b, const std::string &optimizer) {
  struct stat st;
  if (::stat((dir + "/" + kBitsnapFile).c_str(), &st) == 0)
    return load_compressed(dir, s, b, optimizer);
  std::vector<CheckpointEntry> params, state;
  split_entries(b.checkpoint_entries(true), params, state);
  const std::string model_file = dir + "/model.safetensors";
  const std::string state_file = dir + "/optimizer.safetensors";
  // Both headers are read and checked before any block is: a bad file is
  // refused with nothing loaded.
  const SafetensorsIndex model = safetensors_index(model_file);
  check_manifest(model_file, model.metadata, s);
  auto meta = model.metadata;
  auto it = meta.find("step");
  if (it == meta.end())
    throw std::runtime_error(model_file + ": no step in metadata");
  const std::string &v = it->second;
  char *end = nullptr;
  errno = 0;
  const long long step = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno == ERANGE || step < 0)
    throw std::runtime_error(model_file + ": the step in its metadata is " +
                             quote_value(v) + ", not a step count");
  // The global batches skipped before this step (--data-skip, --on-nan
  // rollback); a checkpoint without the field predates it (none skipped).
  long long skipped = 0;
  if (meta.count("data_skipped")) {
    const std::string &d = meta["data_skipped"];
    errno = 0;
    skipped = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end || errno == ERANGE || skipped < 0)
      throw std::runtime_error(model_file +
                               ": data_skipped in its metadata is " +
                               quote_value(d) + ", not a count of batches");
  }
  if (meta.count("samples") &&
      meta["samples"] != std::to_string((step + skipped) * s.global_batch))
    throw std::runtime_error(
        model_file + ": its data position is sample " + meta["samples"] +
        " after step " + v + " (" + std::to_string(skipped) +
        " batches skipped); this plan's global batch of " +
        std::to_string(s.global_batch) + " would read other data");
  const SafetensorsIndex opt = safetensors_index(state_file);
  auto state_meta = opt.metadata;
  check_manifest(state_file, state_meta, s);
  // SGD's momentum and AdamW's moments have the same shapes: only the
  // metadata tells them apart (a checkpoint without it predates the field).
  if (auto saved = state_meta.find("optimizer");
      saved != state_meta.end() && saved->second != optimizer)
    throw std::runtime_error(
        state_file + ": optimizer state of " + quote_value(saved->second) +
        ", but this run trains with --optimizer " + optimizer +
        " (resume with --optimizer " + quote_value(saved->second) + ")");
  if (state_meta["step"] != v)
    throw std::runtime_error(state_file + ": of step " +
                             quote_value(state_meta["step"]) + ", but " +
                             model_file + " is of step " + v);
  for (const auto &[name, t] : opt.tensors) {
    // Before this format, ZeRO state was saved flat in its plan's layout.
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".zero") == 0)
      throw std::runtime_error(
          state_file + ": ZeRO state in an older plan-specific layout (\"" +
          name +
          "\"), which this program does not read; resume it with "
          "the autoddl that wrote it, or start from its parameters "
          "with --init " +
          model_file);
    // K-FAC's inverses are of the layers' blocks as the writing plan's
    // ranks computed them, not full logical tensors.
    if (name.find(".kfac_") != std::string::npos && state_meta.count("plan") &&
        state_meta["plan"] != plan_string(s))
      throw std::runtime_error(
          state_file + ": K-FAC inverses of plan \"" + state_meta["plan"] +
          "\", stored per plan; this run's plan is \"" + plan_string(s) +
          "\": resume under that plan, or start from the parameters with "
          "--init " +
          model_file);
  }
  plan_fp8_scaling(state, opt, state_file, s);
  checkpoint_load(model_file, model, params);
  checkpoint_load(state_file, opt, state);
  check_fp8_scaling(state, state_file);
  b.copy_params(false);
  set_data_skip(skipped);
  return step;
}

/// --resume auto: the newest complete checkpoint under --save (none: a fresh
/// start), said on rank 0 in one line; skipped incomplete ones one line each.
void resolve_resume_auto(Options &o) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<std::string> skipped;
  std::string dir;
  try {
    dir = newest_checkpoint(o.save, skipped);
  } catch (const std::runtime_error &e) {
    throw std::runtime_error(std::string("--resume auto: ") + e.what());
  }
  if (rank == 0) {
    for (const std::string &why : skipped)
      std::printf("--resume auto: skipping an incomplete checkpoint: %s\n",
                  why.c_str());
    if (dir.empty())
      std::printf("--resume auto: no checkpoint under %s; starting fresh\n",
                  o.save.c_str());
    else
      std::printf("--resume auto: resuming from %s\n", dir.c_str());
    std::fflush(stdout);
  }
  o.resume = dir;
}

int64_t load_start(Options &o, const ProgramSpec &s, Backend &b) {
  if (o.resume == "auto")
    resolve_resume_auto(o);
  set_data_skip(0);
  if (!o.resume.empty()) {
    const int64_t step = load_checkpoint(o.resume, s, b, o.optimizer);
    set_data_skip(data_skip() + o.data_skip); // the checkpoint's, and more
    return step;
  }
  set_data_skip(o.data_skip);
  if (o.init.empty())
    return 0;
  // Any model.safetensors with the model's tensors under its names (another
  // run's, transformers' save_pretrained, autoddl's --weights onnx): extra
  // tensors are ignored, a missing one or another shape is refused by name;
  // a missing buffer keeps its start (the export's running statistics).
  std::vector<CheckpointEntry> params, state;
  split_entries(b.checkpoint_entries(false), params, state);
  const SafetensorsIndex index = safetensors_index(o.init);
  params.erase(std::remove_if(params.begin(), params.end(),
                              [&](const CheckpointEntry &e) {
                                return e.buffer && !index.tensors.count(e.name);
                              }),
               params.end());
  checkpoint_load(o.init, index, params);
  b.copy_params(false);
  return 0;
}

} // namespace autoddl::rt::harness
