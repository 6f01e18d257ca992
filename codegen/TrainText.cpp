//===- TrainText.cpp - fixed text of a generated CUDA train.cpp ----------===//
//
// The pieces of the CUDA program's fixed text (CudaTrainText.cpp) that are not
// its own: the parameter table's record, pipeline tags, the flags, the
// checkpoints. The CPU program's fixed part is compiled runtime source
// (backends/cpu/harness, backends/common/harness).
//
//===----------------------------------------------------------------------===//
namespace autoddl::codegen {

// Shared by both backends: the parameter table's record and the pipeline's
// directions.
extern const char *const kTrainSpecText = R"cpp(struct ParamSpec {
  Param *p;
  const char *name;
  Shape full;
  int split_dim;
  const char *init;
  double std;
  uint64_t devices; // bit d: pipeline device d holds it
  int segments = 1; // > 1: split_dim is equal parts (q|k|v), each split over tp
};

/// The block of the full parameter tp rank `rank` holds: S(split_dim) (parts
/// of ceil(size / tp) where tp does not divide: a padded vocabulary, whose
/// last blocks are shorter), or with segments > 1 part `rank` of every
/// segment (the full shape viewed with split_dim as [segments, size /
/// segments]; the same row-major elements).
static Slice param_slice(const ParamSpec &s, int64_t tp, int64_t rank) {
  if (s.split_dim < 0)
    return Slice::whole(s.full);
  if (s.segments <= 1)
    return Slice::whole(s.full).split_padded(s.split_dim, tp, rank);
  Shape view = s.full;
  view[size_t(s.split_dim)] /= s.segments;
  view.insert(view.begin() + s.split_dim, int64_t(s.segments));
  return Slice::whole(view).split(s.split_dim + 1, tp, rank);
}

/// Chimera's second pipeline runs up the devices.
enum Direction { kDown, kUp };

)cpp";

// Shared by both backends: which pipeline device runs a stage, and message tags.
extern const char *const kTrainSharedPipelineText = R"cpp(/// The pipeline device running `stage` in direction `dir` (Schedule::deviceOf).
static int device_of(int64_t stage, Direction dir) {
  return int(dir == kUp ? kPP - 1 - stage : stage % kPP);
}

static bool holds_stage(int64_t stage) {
  return device_of(stage, kDown) == g.rpp ||
         (kChimera && device_of(stage, kUp) == g.rpp);
}

enum TagKind { kActivation, kGradient };
/// A unique tag per (micro-batch, boundary, direction of data, tensor).
[[maybe_unused]] static int tag(int64_t mb, int64_t boundary, TagKind kind, int64_t k) {
  return int(((mb * kStages + boundary) * 2 + kind) * kMaxBoundary + k);
}

)cpp";

// Shared by both backends: the program's flags.
extern const char *const kTrainOptionsText = R"cpp(
// ---- parameters, optimizer, checkpoints ----

struct Options {
  int64_t steps = 10;
  std::string data, out, save, resume, optimizer = "adamw";
  int64_t save_every = 0;
  bool save_initial = false, trace = false, quiet = false;
  double lr = 1e-3, weight_decay = 0.0, momentum = 0.9;
};

)cpp";

// Shared by both backends.
extern const char *const kTrainAllParamsText = R"cpp(static std::vector<Param *> all_params() {
  std::vector<Param *> ps;
  for (const ParamSpec &s : param_specs())
    ps.push_back(s.p);
  return ps;
}

)cpp";

// Shared by both backends: checkpoints (after each backend's
// checkpoint_entries and copy_params, which moves the CUDA program's state
// between the device and the host copies the entries point at).
extern const char *const kTrainCheckpointText = R"cpp(static void save_checkpoint(const Options &o, int64_t steps_done) {
  const std::string dir = o.save + "/step-" + std::to_string(steps_done);
  if (g.mesh->rank() == 0)
    make_directories(dir);
  const std::vector<CheckpointEntry> entries = checkpoint_entries(true);
  copy_params(true);
  checkpoint_save(dir + "/model.safetensors", entries,
                  {{"format", "autoddl"},
                   {"model", kModelName},
                   {"step", std::to_string(steps_done)},
                   {"optimizer", o.optimizer}},
                  MPI_COMM_WORLD);
}

static int64_t load_checkpoint(const std::string &dir) {
  auto meta = checkpoint_load(dir + "/model.safetensors",
                              checkpoint_entries(true));
  auto it = meta.find("step");
  if (it == meta.end())
    throw std::runtime_error(dir + "/model.safetensors: no step in metadata");
  if (meta["model"] != kModelName)
    throw std::runtime_error(dir + "/model.safetensors: a checkpoint of model " +
                             meta["model"] + ", not " + kModelName);
  copy_params(false);
  return std::stoll(it->second);
}

/// Bad input is found the same way on every rank; the lowest rank that found
/// it reports it. Whether any rank did.
static bool report_setup_error(bool bad, const std::string &message) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int mine = bad ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!any)
    return false;
  int first = bad ? rank : 1 << 30, who = 0;
  MPI_Allreduce(&first, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == who)
    std::fprintf(stderr, "error: %s\n", message.c_str());
  return true;
}

)cpp";

// Shared by both backends.
extern const char *const kTrainParseText = R"cpp(// ---- main ----

static Options parse_options(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(a + ": missing value");
      return argv[++i];
    };
    auto integer = [&]() {
      std::string v = next();
      char *end = nullptr;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 0)
        throw std::invalid_argument(a + ": expected a non-negative integer, "
                                        "got \"" + v + "\"");
      return int64_t(x);
    };
    auto real = [&]() {
      std::string v = next();
      char *end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end)
        throw std::invalid_argument(a + ": expected a number, got \"" + v + "\"");
      return x;
    };
    if (a == "--steps") o.steps = integer();
    else if (a == "--data") o.data = next();
    else if (a == "--out") o.out = next();
    else if (a == "--trace") o.trace = true;
    else if (a == "--save") o.save = next();
    else if (a == "--save-every") o.save_every = integer();
    else if (a == "--save-initial") o.save_initial = true;
    else if (a == "--resume") o.resume = next();
    else if (a == "--lr") o.lr = real();
    else if (a == "--weight-decay") o.weight_decay = real();
    else if (a == "--optimizer") o.optimizer = next();
    else if (a == "--seed") seed = uint64_t(integer());
    else if (a == "--quiet") o.quiet = true;
    else throw std::invalid_argument("unknown flag " + a +
        " (flags: --steps N --data FILE --out DIR --trace --save DIR "
        "--save-every K --save-initial --resume DIR/step-N --lr X "
        "--weight-decay X --optimizer adamw|sgd --seed S --quiet)");
  }
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    throw std::invalid_argument("--optimizer: expected adamw or sgd, got " +
                                o.optimizer);
  if (kZero && o.optimizer != "adamw")
    throw std::invalid_argument("--optimizer sgd: the plan shards AdamW state "
                                "(ZeRO); use adamw");
  if ((o.save_every || o.save_initial) && o.save.empty())
    throw std::invalid_argument("--save-every/--save-initial need --save DIR");
  return o;
}

)cpp";

} // namespace autoddl::codegen
