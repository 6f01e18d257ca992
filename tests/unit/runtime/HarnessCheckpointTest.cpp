// Checkpoints through the harness (backends/common/harness/ProgramRun.h), under
// mpirun: save_checkpoint writes every rank's block of the parameters and
// their AdamW moments; load_checkpoint reads them back, under the same tp
// split or another, and refuses another model's checkpoint.
#include "backends/common/harness/ProgramRun.h"
#include "backends/common/harness/RunCheckpoint.h" // add_fp8_scaling_entries

#include "backends/common/FileIo.h"
#include "backends/common/Fp8State.h"
#include "backends/common/Safetensors.h"
#include "backends/host/Mesh.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <unistd.h>
#include <utility>

#include <mpi.h>

using namespace autoddl::rt;
using namespace autoddl::rt::harness;

namespace {

struct HostParam : ParamBlock {
  std::vector<float> value, m, v;
};

/// A backend holding two parameters in host memory, split over tp = `tp`
/// ranks of the world (dp = world / tp).
class HostBackend : public Backend {
public:
  HostBackend(const char *model, int64_t tp, int zero) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    spec.model_name = model;
    spec.tp = tp;
    spec.dp = size / tp;
    spec.zero = zero;
    rtp = rank % tp;
    rdp = rank / tp;
    ParamSpecOf<HostParam> rows[] = {
        {&params[0], "w", Shape{5, 6}, 0, "normal", 0.02, 0x1},
        {&params[1], "b", Shape{6}, -1, "ones", 0, 0x1}};
    for (auto &row : rows) {
      lay_out(row, spec, rtp, 0);
      HostParam &p = *row.p;
      p.value.assign(size_t(p.padded), 0.0f);
      const int64_t state = zero ? p.padded / spec.dp : p.n;
      p.m.assign(size_t(state), 0.0f);
      p.v.assign(size_t(state), 0.0f);
    }
  }

  /// Fills every held element with a value keyed by its full index (the
  /// state by its block).
  void fill(float salt) {
    for (HostParam &p : params) {
      const Shape &local = p.slice.local;
      const int64_t cols = local.size() > 1 ? local[1] : 1;
      for (int64_t i = 0; i < p.n; ++i) {
        const int64_t row = local.size() > 1 ? i / cols : 0;
        const int64_t col = local.size() > 1 ? i % cols : i;
        const int64_t fullCols = p.full.size() > 1 ? p.full[1] : p.full[0];
        const int64_t r =
            row + (p.slice.offset.empty() ? 0 : p.slice.offset[0]);
        p.value[size_t(i)] = salt + float(r * fullCols + col);
      }
      // Replicated state is the same on every rank holding it (a replicated
      // parameter's on every tp rank); ZeRO state is each dp rank's shard.
      const int64_t key = spec.zero ? (p.split_dim < 0 ? 0 : rtp) + 10 * rdp
                          : p.slice.offset.empty() ? 0
                                                   : p.slice.offset[0];
      for (size_t i = 0; i < p.m.size(); ++i) {
        // A ZeRO shard's tail past the block's n elements is padding, zero
        // in a run (its gradient is) and not in the checkpoint.
        const bool pad =
            spec.zero && rdp * int64_t(p.m.size()) + int64_t(i) >= p.n;
        p.m[i] = pad ? 0.0f : salt + 0.5f * float(i + 100 * size_t(key));
        p.v[i] = 2 * p.m[i];
      }
    }
  }

  void start(int *, char ***) override {}
  int64_t setup(int, char **, Options &) override { return 0; }
  void begin_run(const Options &, RunMetrics &) override {}
  void run_step(int64_t) override {}
  void optimizer_step(const Options &, int64_t, double) override {}
  std::vector<CheckpointEntry> checkpoint_entries(bool with_state) override {
    std::vector<CheckpointEntry> e;
    for (HostParam &p : params)
      add_checkpoint_entries(e, p, p.value.data(), p.m.data(), p.v.data(),
                             with_state, spec, rtp, rdp);
    if (with_state && !kfac_inverse.empty()) // as KfacRun's entries
      e.push_back({"w.kfac_A_inv", Slice::whole({2, 2}), kfac_inverse.data()});
    if (with_state && !fp8_state.empty()) // as the CUDA program's
      add_fp8_scaling_entries(e, {"w"}, fp8_rows);
    return e;
  }
  /// The FP8 rows as the CUDA program moves them: all saved, the non-empty
  /// ones restored.
  void copy_params(bool to_host) override {
    ++(to_host ? saves : loads);
    if (fp8_state.empty() || fp8_rows.size() != fp8_state.size())
      return;
    if (to_host)
      fp8_rows = fp8_state;
    else if (!fp8_row_empty(fp8_rows.data()))
      fp8_state = fp8_rows;
  }
  void write_outputs(const Options &, RunMetrics &) override {}
  void shutdown(bool) override {}

  ProgramSpec spec;
  int64_t rtp = 0, rdp = 0;
  HostParam params[2];
  std::vector<float> kfac_inverse; // a K-FAC run's (else empty)
  // An fp8 run's: one FP8 linear's scaling state ("on the device") and its
  // checkpoint row.
  std::vector<float> fp8_state, fp8_rows;
  int saves = 0, loads = 0;
};

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/// Once every rank is done with the checkpoint directory, rank 0 removes it.
void removeCheckpoints(const std::string &dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (worldRank() == 0)
    std::filesystem::remove_all(dir);
}

/// A directory every rank names the same (rank 0's pid), removed after.
std::string sharedDir(const char *name) {
  int pid = int(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() /
          ("autoddl_harness_" + std::string(name) + std::to_string(pid)))
      .string();
}

/// `f` throws std::runtime_error saying exactly `what`.
template <typename F> void expectError(F f, const std::string &what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected: " << what;
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()), what);
  }
}

/// Model "tiny" split over `tp`, filled with `salt`.
HostBackend filled(int64_t tp, int zero, float salt) {
  HostBackend b("tiny", tp, zero);
  b.fill(salt);
  return b;
}

/// Options of a run saving into sharedDir(name).
/// Both parameters' values and Adam moments as in `want`.
void expectSameParams(const HostBackend &got, const HostBackend &want) {
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(got.params[k].value, want.params[k].value) << k;
    EXPECT_EQ(got.params[k].m, want.params[k].m) << k;
    EXPECT_EQ(got.params[k].v, want.params[k].v) << k;
  }
}

Options savingInto(const char *name) {
  Options o;
  o.save = sharedDir(name);
  return o;
}

TEST(HarnessCheckpoint, RoundTripUnderTheSameSplit) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int zero : {0, 1}) {
    HostBackend b("tiny", 2, zero);
    b.fill(1.0f);
    const HostBackend saved = b;
    Options o;
    o.save = sharedDir("same") + "_z" + std::to_string(zero);
    save_checkpoint(o, 3, b.spec, b);
    MPI_Barrier(MPI_COMM_WORLD); // rank 0 writes the file; then all read it
    EXPECT_EQ(b.saves, 1);
    b.fill(-50.0f); // every value changes
    EXPECT_NE(b.params[0].value, saved.params[0].value);
    EXPECT_EQ(load_checkpoint(o.save + "/step-3", b.spec, b, o.optimizer), 3);
    EXPECT_EQ(b.loads, 1);
    expectSameParams(b, saved);
    removeCheckpoints(o.save);
  }
}

TEST(HarnessCheckpoint, ParametersResumeUnderAnotherSplit) {
  HostBackend split("tiny", 2, 0);
  split.fill(3.0f);
  Options o;
  o.save = sharedDir("other");
  save_checkpoint(o, 1, split.spec, split);
  MPI_Barrier(MPI_COMM_WORLD);
  HostBackend whole("tiny", 1, 0); // every rank holds whole tensors
  whole.fill(-9.0f);
  EXPECT_EQ(load_checkpoint(o.save + "/step-1", whole.spec, whole, o.optimizer),
            1);
  HostBackend expect("tiny", 1, 0);
  expect.fill(3.0f);
  EXPECT_EQ(whole.params[0].value, expect.params[0].value);
  EXPECT_EQ(whole.params[1].value, expect.params[1].value);
  // Another model's checkpoint is refused, naming the file and both models.
  HostBackend other("other-model", 2, 0);
  try {
    load_checkpoint(o.save + "/step-1", other.spec, other, o.optimizer);
    ADD_FAILURE() << "loaded another model's checkpoint";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              o.save + "/step-1/model.safetensors: a checkpoint of model "
                       "\"tiny\", not other-model");
  }
  EXPECT_THROW(
      load_checkpoint(o.save + "/step-2", whole.spec, whole, o.optimizer),
      std::runtime_error);
  // Another optimizer's state (SGD's momentum has AdamW's shapes) is refused,
  // naming both.
  try {
    load_checkpoint(o.save + "/step-1", whole.spec, whole, "sgd");
    ADD_FAILURE() << "resumed AdamW's state into an SGD run";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              o.save + "/step-1/optimizer.safetensors: optimizer state of "
                       "\"adamw\", but this run trains with --optimizer sgd "
                       "(resume with --optimizer \"adamw\")");
  }
  removeCheckpoints(o.save);
}

// The AdamW moments are full tensors under every plan: ZeRO shards saved under
// tp2 load into whole tensors (tp1, no ZeRO), and saved again from there they
// load back into the same shards, padding zero.
TEST(HarnessCheckpoint, ZeroStateResumesUnderAnotherPlan) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  HostBackend sharded = filled(2, 1, 4.0f);
  Options o;
  o.save = sharedDir("zero");
  save_checkpoint(o, 5, sharded.spec, sharded);
  MPI_Barrier(MPI_COMM_WORLD);
  HostBackend whole = filled(1, 0, -1.0f);
  EXPECT_EQ(load_checkpoint(o.save + "/step-5", whole.spec, whole, "adamw"), 5);
  // w [5, 6] over tp2: rows 0..2 (18 elements) on tp rank 0, rows 3..4 on
  // tp rank 1; each block's flat elements in dp shards of padded / dp.
  const HostParam &w = whole.params[0];
  const int64_t shard = sharded.params[0].padded / sharded.spec.dp;
  for (int64_t g = 0; g < 30; ++g) {
    const int64_t t = g < 18 ? 0 : 1, k = g - 18 * t;
    const int64_t key = t + 10 * (k / shard);
    EXPECT_EQ(w.m[size_t(g)], 4.0f + 0.5f * float(k % shard + 100 * key)) << g;
  }
  save_checkpoint(o, 6, whole.spec, whole);
  MPI_Barrier(MPI_COMM_WORLD);
  HostBackend back = filled(2, 1, 9.0f);
  EXPECT_EQ(load_checkpoint(o.save + "/step-6", back.spec, back, "adamw"), 6);
  expectSameParams(back, sharded);
  removeCheckpoints(o.save);
}

// K-FAC's inverses are kept per plan (the layers' factor blocks and the
// refresh cycle the plan chose): another plan refuses them in one line.
TEST(HarnessCheckpoint, KfacStateRefusedUnderAnotherPlan) {
  HostBackend split = filled(2, 0, 1.0f);
  split.kfac_inverse.assign(4, 0.5f);
  Options o;
  o.save = sharedDir("kfac");
  o.optimizer = "kfac";
  save_checkpoint(o, 2, split.spec, split);
  MPI_Barrier(MPI_COMM_WORLD);
  HostBackend same = filled(2, 0, 0.0f);
  same.kfac_inverse.assign(4, 0.0f);
  EXPECT_EQ(load_checkpoint(o.save + "/step-2", same.spec, same, "kfac"), 2);
  EXPECT_EQ(same.kfac_inverse, split.kfac_inverse);
  HostBackend whole = filled(1, 0, 0.0f);
  whole.kfac_inverse.assign(4, 0.0f);
  const std::string dir = o.save + "/step-2";
  expectError(
      [&] { load_checkpoint(dir, whole.spec, whole, "kfac"); },
      dir + "/optimizer.safetensors: K-FAC inverses of plan \"tp=2 pp=1 dp=" +
          std::to_string(split.spec.dp) +
          " zero=0 stages=1\", stored per plan; this run's plan is \"tp=1 "
          "pp=1 dp=" +
          std::to_string(whole.spec.dp) +
          " zero=0 stages=1\": resume under that plan, or start from the "
          "parameters with --init " +
          dir + "/model.safetensors");
  EXPECT_EQ(whole.kfac_inverse, std::vector<float>(4, 0.0f)); // nothing read
  removeCheckpoints(o.save);
}

// transformers' from_pretrained loads model.safetensors with no unexpected
// keys: parameters only, "format": "pt"; the AdamW moments are in
// optimizer.safetensors; config.json is the model's Hugging Face config.
TEST(HarnessCheckpoint, ParametersApartFromOptimizerState) {
  HostBackend b("tiny", 1, 0);
  b.spec.hf_config = "{\"model_type\": \"gpt2\"}\n";
  b.fill(2.0f);
  Options o;
  o.save = sharedDir("layout");
  save_checkpoint(o, 4, b.spec, b);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string dir = o.save + "/step-4";
  const SafetensorsFile model = safetensors_read(dir + "/model.safetensors");
  const SafetensorsFile state =
      safetensors_read(dir + "/optimizer.safetensors");
  EXPECT_EQ(model.metadata.at("format"), "pt");
  EXPECT_EQ(model.tensors.size(), 2u);
  EXPECT_TRUE(model.tensors.count("w") && model.tensors.count("b"));
  EXPECT_EQ(state.tensors.size(), 4u);
  EXPECT_TRUE(state.tensors.count("w.exp_avg") &&
              state.tensors.count("b.exp_avg_sq"));
  EXPECT_EQ(read_file(dir + "/config.json"), b.spec.hf_config);
  // A checkpoint whose step is not a count is refused in one line.
  MPI_Barrier(MPI_COMM_WORLD);
  if (worldRank() == 0) {
    std::vector<NamedTensor> t;
    for (const auto &[name, tensor] : model.tensors)
      t.push_back({name, tensor.shape, tensor.data});
    safetensors_write(dir + "/model.safetensors", t,
                      {{"format", "pt"}, {"model", "tiny"}, {"step", "-3"}});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    load_checkpoint(dir, b.spec, b, o.optimizer);
    ADD_FAILURE() << "resumed a checkpoint of step -3";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              dir + "/model.safetensors: the step in its metadata is \"-3\", "
                    "not a step count");
  }
  removeCheckpoints(o.save);
}

// The writer thread writes what was snapshotted at the save, not what training
// changed after it: the same bytes as a synchronous save of that moment. Every
// rank writes its own blocks; rank 0 renames the folder once all have.
TEST(HarnessCheckpoint, AsyncWriteHoldsTheSnapshot) {
  const int rank = worldRank();
  HostBackend b = filled(2, 1, 5.0f);
  const Options o = savingInto("sync");
  save_checkpoint(o, 2, b.spec, b);
  std::vector<CheckpointEntry> all = b.checkpoint_entries(true);
  if (rank == 0)
    make_directories(o.save + "_async");
  MPI_Barrier(MPI_COMM_WORLD);
  CheckpointFolder f;
  f.dir = o.save + "_async/step-2";
  f.files.push_back(checkpoint_shard(
      "model.safetensors", {all[0], all[3]},
      safetensors_index(o.save + "/step-2/model.safetensors").metadata,
      MPI_COMM_WORLD,
      /*own_stable=*/false));
  int readies = 0;
  f.ready = [&] { ++readies; };
  prepare_checkpoint_folder(f, MPI_COMM_WORLD);
  b.fill(-7.0f); // training goes on: the snapshot must not see it
  CheckpointWriter writer;
  writer.start(std::move(f), /*async=*/true);
  std::string dir;
  writer.wait();
  EXPECT_FALSE(writer.busy(&dir));
  EXPECT_EQ(readies, 1);
  ASSERT_EQ(writer.done().size(), 1u);
  EXPECT_EQ(writer.done()[0].dir, o.save + "_async/step-2");
  EXPECT_GE(writer.done()[0].write_seconds, 0.0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    EXPECT_EQ(read_file(o.save + "_async/step-2/model.safetensors"),
              read_file(o.save + "/step-2/model.safetensors"));
    EXPECT_FALSE(std::filesystem::exists(o.save + "_async/.step-2.tmp"));
    std::filesystem::remove_all(o.save);
    std::filesystem::remove_all(o.save + "_async");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A checkpoint folder is replaced whole: an older step-N holding a file of the
// user's (or a link) is named and refused, and left as it was.
TEST(HarnessCheckpoint, OlderFolderWithOtherFilesIsNotReplaced) {
  const int rank = worldRank();
  HostBackend b = filled(1, 0, 1.0f);
  const Options o = savingInto("replace");
  save_checkpoint(o, 3, b.spec, b);
  save_checkpoint(o, 3, b.spec, b); // a checkpoint's own files: replaced
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    write_file_atomically(o.save + "/step-3/notes.txt", "mine\n");
    try {
      CheckpointFolder f;
      f.dir = o.save + "/step-3";
      write_checkpoint_folder(f);
      ADD_FAILURE() << "replaced a folder holding the user's file";
    } catch (const std::runtime_error &e) {
      EXPECT_EQ(std::string(e.what()),
                o.save +
                    "/step-3/notes.txt: not a file of a checkpoint; "
                    "refusing to replace " +
                    o.save + "/step-3");
    }
    EXPECT_EQ(read_file(o.save + "/step-3/notes.txt"), "mine\n");
    EXPECT_FALSE(std::filesystem::exists(o.save + "/.step-3.tmp"));
    std::filesystem::remove_all(o.save);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Rank 0 renames a folder only once every rank left its marker; a rank that
// never does (gone) ends the wait after AUTODDL_WATCHDOG_TIMEOUT, naming it,
// and no step-N appears.
TEST(HarnessCheckpoint, RankThatNeverWritesIsNamed) {
  const Options o = savingInto("gone");
  if (worldRank() == 0) {
    make_directories(o.save);
    CheckpointFolder f;
    f.dir = o.save + "/step-1";
    f.ranks = 2; // rank 1 of this pretend run never writes
    ::setenv("AUTODDL_WATCHDOG_TIMEOUT", "0.2", 1);
    expectError([&] { write_checkpoint_folder(f); },
                o.save + "/.step-1.tmp: rank 1 did not finish writing its "
                         "part of the checkpoint within 0.2 s of rank 0 "
                         "(AUTODDL_WATCHDOG_TIMEOUT)");
    ::unsetenv("AUTODDL_WATCHDOG_TIMEOUT");
    EXPECT_FALSE(std::filesystem::exists(o.save + "/step-1"));
    EXPECT_FALSE(std::filesystem::exists(o.save + "/.step-1.tmp"));
    std::filesystem::remove_all(o.save);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// --resume auto: the newest step-N whose files are whole; a newer truncated
// one and a killed write's temporary folder are passed over; a folder with
// only incomplete checkpoints is refused naming the file.
TEST(HarnessCheckpoint, NewestCompleteCheckpoint) {
  const int rank = worldRank();
  HostBackend b = filled(1, 0, 1.0f);
  Options o = savingInto("auto");
  std::vector<std::string> skipped;
  EXPECT_EQ(newest_checkpoint(o.save, skipped), ""); // no folder yet
  save_checkpoint(o, 2, b.spec, b);
  save_checkpoint(o, 10, b.spec, b);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string cut = o.save + "/step-10/model.safetensors";
  if (rank == 0) {
    const std::string bytes = read_file(cut);
    write_file_atomically(cut, bytes.substr(0, bytes.size() - 4));
    make_directories(o.save + "/.step-12.tmp");
    make_directories(o.save + "/step-x");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(newest_checkpoint(o.save, skipped), o.save + "/step-2");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rfind(cut + ": tensor \"", 0), 0u) << skipped[0];
  EXPECT_NE(skipped[0].find("a truncated file?"), std::string::npos);
  // The resumed run's step, through load_start.
  o.resume = "auto";
  EXPECT_EQ(load_start(o, b.spec, b), 2);
  EXPECT_EQ(o.resume, o.save + "/step-2");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    std::filesystem::remove_all(o.save + "/step-2");
  MPI_Barrier(MPI_COMM_WORLD);
  skipped.clear();
  try {
    newest_checkpoint(o.save, skipped);
    ADD_FAILURE() << "resumed from a folder of incomplete checkpoints";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  o.save + ": no complete checkpoint (" + cut + ": ", 0),
              0u)
        << e.what();
  }
  removeCheckpoints(o.save);
}

/// A linear's scaling state as a step leaves it, keyed by `salt` and the
/// rank (each rank's own): layouts 3, and per role a scale and its inverse,
/// slot 5, 6 amaxes recorded, a history holding an overflow's +inf.
std::vector<float> fp8Row(float salt) {
  Fp8Meta metas[kFp8Roles] = {};
  for (int k = 0; k < kFp8Roles; ++k) {
    Fp8Meta &m = metas[k];
    m.scale = salt + float(k + 10 * worldRank());
    m.scaleInv = 1.0f / m.scale;
    m.pos = 5;
    m.recorded = 6;
    for (int h = 0; h < 6; ++h)
      m.history[h] = 0.25f * float(h + k);
  }
  metas[1].history[2] = std::numeric_limits<float>::infinity();
  std::vector<float> row(static_cast<size_t>(kFp8RowFloats));
  fp8_row_from_metas(row.data(), 3, metas);
  return row;
}

/// A tiny backend of an fp8 program: its one FP8 linear's state fp8Row(salt).
HostBackend fp8Backend(int64_t tp, float salt) {
  HostBackend b = filled(tp, 0, salt);
  b.fp8_state = fp8Row(salt);
  return b;
}

// The row form of the metas: back to the same metas, bit for bit (the
// between-steps fields zero); a row of zeros is no state, and values no
// step leaves are named.
TEST(Fp8Scaling, RowRoundTripsTheMetas) {
  const std::vector<float> row = fp8Row(2.0f);
  EXPECT_EQ(fp8_row_error(row.data()), "");
  unsigned layouts = 0;
  Fp8Meta metas[kFp8Roles];
  std::memset(metas, 0xff, sizeof metas);
  fp8_metas_from_row(row.data(), layouts, metas);
  std::vector<float> again(static_cast<size_t>(kFp8RowFloats));
  fp8_row_from_metas(again.data(), layouts, metas);
  EXPECT_EQ(std::memcmp(again.data(), row.data(), row.size() * 4), 0);
  EXPECT_EQ(layouts, 3u);
  EXPECT_EQ(metas[2].pos, 5);
  EXPECT_EQ(metas[1].amax, 0.0f);
  EXPECT_EQ(metas[1].blocksDone, 0u);
  EXPECT_TRUE(std::isinf(metas[1].history[2]));
  const std::vector<float> zeros(size_t(kFp8RowFloats), 0.0f);
  EXPECT_TRUE(fp8_row_empty(zeros.data()));
  EXPECT_EQ(fp8_row_error(zeros.data()), "");
  auto broken = [&](int64_t at, float v) {
    std::vector<float> r = row;
    r[size_t(at)] = v;
    return fp8_row_error(r.data());
  };
  const int64_t weight = 1 + kFp8MetaFloats; // the weight meta's scale
  EXPECT_EQ(broken(0, 4.0f),
            "the weight copy's layouts are 4.000000, not a mask of 2 bits");
  EXPECT_EQ(broken(weight + 2, 32.0f),
            "the weight meta's history slot is 32.000000, not one of 0..31");
  EXPECT_EQ(broken(1 + 1, 0.0f), "the input meta's 1/scale is 0.000000, not "
                                 "a positive finite number");
  EXPECT_EQ(broken(weight + kFp8MetaFloats + 3, 1.5f),
            "the output gradient meta's count of amaxes is 1.500000, not one "
            "of 0..32");
  EXPECT_EQ(broken(weight + 4, std::nanf("")),
            "the weight meta's amax history holds nan");
}

// An fp8 run's scaling state resumes under the writing plan, each rank its
// own row, in optimizer.safetensors (model.safetensors stays the model's).
TEST(Fp8Scaling, ResumesUnderTheWritingPlan) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  HostBackend b = fp8Backend(1, 3.0f);
  const std::vector<float> saved = b.fp8_state;
  Options o = savingInto("fp8");
  save_checkpoint(o, 2, b.spec, b);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string dir = o.save + "/step-2";
  const SafetensorsIndex state =
      safetensors_index(dir + "/optimizer.safetensors");
  ASSERT_TRUE(state.tensors.count("w.fp8_scaling"));
  EXPECT_EQ(state.tensors.at("w.fp8_scaling").shape,
            (Shape{size, kFp8RowFloats}));
  EXPECT_FALSE(safetensors_index(dir + "/model.safetensors")
                   .tensors.count("w.fp8_scaling"));
  b.fp8_state = fp8Row(-7.0f);
  EXPECT_EQ(load_checkpoint(dir, b.spec, b, o.optimizer), 2);
  EXPECT_EQ(b.fp8_state, saved);
  removeCheckpoints(o.save);
}

// A checkpoint without the state (a bf16 run's) or of another plan (the
// state is each rank's) loads; the state starts again (kept as it was), said
// in one line on rank 0.
TEST(Fp8Scaling, AbsentOrOfAnotherPlanStartsAgain) {
  Options o = savingInto("fp8_absent");
  HostBackend bf16 = filled(1, 0, 1.0f);
  save_checkpoint(o, 1, bf16.spec, bf16);
  HostBackend split = fp8Backend(2, 1.0f);
  save_checkpoint(o, 2, split.spec, split);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int step : {1, 2}) {
    HostBackend b = fp8Backend(1, 5.0f);
    const std::vector<float> fresh = b.fp8_state;
    const std::string dir = o.save + "/step-" + std::to_string(step);
    testing::internal::CaptureStderr();
    EXPECT_EQ(load_checkpoint(dir, b.spec, b, o.optimizer), step);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(b.fp8_state, fresh);
    const std::string why =
        step == 1
            ? "holds no FP8 scaling state (a bf16 run's checkpoint, or "
              "an older one)"
            : "holds the FP8 scaling state of plan \"" +
                  std::string("tp=2 pp=1 dp=") + std::to_string(split.spec.dp) +
                  " zero=0 stages=1\", kept per rank; this run's plan "
                  "is \"tp=1 pp=1 dp=" +
                  std::to_string(b.spec.dp) + " zero=0 stages=1\"";
    EXPECT_EQ(err, worldRank() != 0
                       ? ""
                       : "autoddl: note: " + dir + "/optimizer.safetensors " +
                             why +
                             ": the FP8 linears' scales start again from "
                             "their first casts\n");
  }
  removeCheckpoints(o.save);
}

// Under the writing plan, an entry of another shape or a row no step leaves
// is refused in one line naming the file, the entry and the cause, before
// the state is taken.
TEST(Fp8Scaling, OtherShapeOrValuesRefused) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  HostBackend b = fp8Backend(1, 2.0f);
  Options o = savingInto("fp8_bad");
  save_checkpoint(o, 3, b.spec, b);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string dir = o.save + "/step-3",
                    file = dir + "/optimizer.safetensors";
  const SafetensorsFile good = safetensors_read(file);
  // rewrite(f): rank 0 writes the file's tensors, w.fp8_scaling's shape and
  // values as f(tensor) returns them.
  auto rewrite = [&](auto f) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (worldRank() == 0) {
      std::pair<Shape, std::vector<float>> fp8;
      std::vector<NamedTensor> t;
      for (const auto &[name, tensor] : good.tensors) {
        if (name != "w.fp8_scaling") {
          t.push_back({name, tensor.shape, tensor.data});
          continue;
        }
        fp8 = f(tensor);
        t.push_back({name, fp8.first, fp8.second.data()});
      }
      safetensors_write(file, t, good.metadata);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  };
  const std::vector<float> before = b.fp8_state;
  rewrite([](const Tensor &t) {
    const Shape wider{t.shape[0], t.shape[1] + 1};
    return std::make_pair(wider, std::vector<float>(size_t(numel(wider))));
  });
  expectError([&] { load_checkpoint(dir, b.spec, b, o.optimizer); },
              file + ": tensor \"w.fp8_scaling\" has shape [" +
                  std::to_string(size) +
                  ",110], this program's FP8 scaling "
                  "state [" +
                  std::to_string(size) + ",109] (a row of 109 floats a rank)");
  rewrite([](const Tensor &t) {
    std::vector<float> bad(t.data, t.data + numel(t.shape));
    for (int64_t r = 0; r < t.shape[0]; ++r) // the weight meta's slot
      bad[size_t(r * t.shape[1] + 1 + kFp8MetaFloats + 2)] = 40.0f;
    return std::make_pair(t.shape, bad);
  });
  expectError([&] { load_checkpoint(dir, b.spec, b, o.optimizer); },
              file + ": tensor \"w.fp8_scaling\", row " +
                  std::to_string(worldRank()) +
                  ": the weight meta's history slot is 40.000000, not one of "
                  "0..31");
  EXPECT_EQ(b.fp8_state, before); // nothing taken
  removeCheckpoints(o.save);
}

// A --checkpoint-compress folder resumes an fp8 program: an fp8 program's
// with its rows; a bf16 program's (no FP8 rows in its base nor its parts)
// decoded as written, the scaling starting again with the base's note.
TEST(Fp8Scaling, CompressedFoldersResume) {
  for (bool fp8 : {true, false}) {
    Options o = savingInto(fp8 ? "fp8_compressed" : "bf16_compressed");
    o.save_sync = true;
    o.checkpoint_compress = true;
    RunMetrics m;
    HostBackend w = fp8 ? fp8Backend(1, 1.0f) : filled(1, 0, 1.0f);
    {
      Checkpointer saver(o, w.spec, w, m);
      saver.save(1); // the full base
      w.fill(2.0f);
      if (fp8)
        w.fp8_state = fp8Row(2.0f);
      saver.save(2); // a compressed part on it
      saver.finish();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::string dir = o.save + "/step-2";
    ASSERT_TRUE(std::filesystem::exists(dir + "/" + kBitsnapFile));
    HostBackend b = fp8Backend(1, 5.0f);
    const std::vector<float> fresh = b.fp8_state;
    testing::internal::CaptureStderr();
    EXPECT_EQ(load_checkpoint(dir, b.spec, b, o.optimizer), 2) << fp8;
    const std::string err = testing::internal::GetCapturedStderr();
    expectSameParams(b, w);
    EXPECT_EQ(b.fp8_state, fp8 ? fp8Row(2.0f) : fresh) << fp8;
    EXPECT_EQ(err, fp8 || worldRank() != 0
                       ? ""
                       : "autoddl: note: " + o.save +
                             "/step-1/optimizer.safetensors holds no FP8 "
                             "scaling state (a bf16 run's checkpoint, or an "
                             "older one): the FP8 linears' scales start "
                             "again from their first casts\n");
    removeCheckpoints(o.save);
  }
}

TEST(HarnessSetupError, OnlyTheLowestBadRankReports) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_FALSE(report_setup_error(false, ""));
  testing::internal::CaptureStderr();
  const bool any = report_setup_error(rank >= size - 1, "bad on the last");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(any);
  EXPECT_EQ(err, rank == size - 1 ? "error: bad on the last\n" : "");
}

} // namespace
