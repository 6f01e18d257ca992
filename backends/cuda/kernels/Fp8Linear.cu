// The linears in FP8 (Fp8.h): which run so, their casts and GEMMs.
//
// Per call (one linear, one micro-batch), with tw (w stored [O,K]):
//   forward          x -> xq[N,K] E4M3, w -> wq[O,K] E4M3 (transposed from
//                    [K,O] when !tw); out[N,O] = xq wq^T (+ bias, GELU or
//                    residual epilogue).
//   input gradient   dY -> dyq[N,O] E5M2, w -> wt[K,O] E4M3;
//                    dx[N,K] (+)= dyq wt^T (DGELU epilogue through a GELU).
//   weight gradient  dY -> dyT[O,N] E5M2, x -> xT[K,N] E4M3;
//                    dw[O,K] += dyT xT^T, or dw[K,O] += xT dyT^T (fp32).
// W's casts are once a step: between fp8_begin_step and fp8_end_step (the
// generated program's step) a linear's first FP8 GEMM casts W into the
// layouts its GEMMs read ([O,K], [K,O]) in one pass, into a copy the linear
// keeps on the device; the later GEMMs of the step read it (weight_operand).
// Weights change only between steps (the optimizer), so the copy is never
// stale inside one; outside a step (the checks' per-call path) every GEMM
// casts W itself. Every cast records its tensor's amax: a GEMM that falls
// back to bf16 (no FP8 algorithm for its epilogue) must not leave the other
// GEMMs' casts of the same tensor on a stale scale. So x enters its history
// twice a micro-batch, dY once (the input gradient's cast writes both of
// its layouts, and the weight gradient's call right after it reads dY^T
// from there), W once a step. The activations' FP8 copies do not outlive a
// call but that dY^T (in the scratch, until the next call): the backward
// re-casts x from the bf16 copy the program keeps anyway, so an fp8 plan
// holds no more activation memory than the bf16 one; it holds this file's
// scratch (the largest call's operands), the weights' copies (1 byte a
// weight element a layout) and three 152-byte metas per linear, as
// Transformer Engine keeps a weight's FP8 copy for the step.
#include "backends/common/Fp8Rule.h"
#include "backends/cuda/kernels/Fp8.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace autoddl::rt {
namespace {

enum Role { kX = 0, kW = 1, kDy = 2, kRoles = 3 };
static_assert(kRoles == kFp8Roles, "a checkpoint row's metas (Fp8State.h)");

/// The layouts of a weight's FP8 copy: [O,K] (the forward's b) and [K,O]
/// (the input gradient's b), bits of a mask.
enum Layout : unsigned { kRowsOK = 1, kRowsKO = 2 };

/// A registered linear: its metas, and its weight's FP8 copy for the step
/// (fp8_begin_step): the 1/scale in its first 256 bytes, then [O,K], then
/// [K,O], each 256-byte aligned, only the layouts in `uses`.
struct Fp8LinearState {
  int64_t meta = 0;                 // its first meta
  DeviceBuffer<unsigned char> copy; // allocated at its first cached cast
  int64_t elems = 0;                // K * O the copy holds
  unsigned uses = 0;                // layouts its FP8 GEMMs read
  unsigned cast = 0;                // of those, cast in step `castStep`
  int64_t castStep = -1;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const act_t *, Fp8LinearState> index; // by weight
  DeviceBuffer<Fp8Meta> metas;                             // kRoles a linear
  int64_t capacity = 0;
  // index.size(), read without the lock: a bf16 plan's linears (none
  // registered) skip the lookup on every call.
  std::atomic<int64_t> count{0};
  // Steps begun (fp8_begin_step); inStep: between begin and end.
  int64_t step = 0;
  bool inStep = false;
};
Registry &registry() {
  static auto *r = new Registry(); // never destroyed (see LtPlanCache)
  return *r;
}

/// What the scratch holds that the next calls may read instead of casting
/// again (the generated program's calls come in these orders):
/// - dyT: dY^T in b, left by an input-gradient call for the weight-gradient
///   call of the same linear right after it (a backward keeps the two calls
///   apart for schedules that run the weight gradients later);
/// - x: x in a (its 1/scale at sa), left by a forward for the next forwards
///   of the same x (LLaMA's q, k and v read one normed x; gate and up one);
/// - xT: x^T in a (its 1/scale at sa), left by a weight-gradient call for
///   the next ones of the same x, across the input-gradient calls between
///   them (which write b only while the weights' copies are in use).
/// A call that writes a region drops what it held. x and x^T are held only
/// within a step, across linear calls in a row of one direction reading that
/// x (fp8_note_linear, fp8_note_op: another op may write the buffer, as a
/// recomputed layer's scratch or a refilled activation set is).
struct Held {
  const act_t *src = nullptr, *w = nullptr; // w: dY^T's linear
  int64_t rows = 0, cols = 0;
  const void *at = nullptr; // where x^T is
  bool is(const act_t *s, int64_t r, int64_t c,
          const act_t *wt = nullptr) const {
    return src && src == s && rows == r && cols == c && w == wt;
  }
};
Held gDyT, gX, gXT;
constexpr unsigned kKeepDyT = 1, kKeepX = 2, kKeepXT = 4; // what Held keeps
void drop_held() { gDyT = gX = gXT = {}; }

/// A GEMM's two FP8 operands and the 1/scale each cast used, carved from
/// one grow-only buffer: the scales in its first 256 bytes, then a, then b
/// (256-byte aligned). So the scratch an fp8 program holds is the largest
/// call's a + b (fp8Scratch in backends/common/Fp8Rule.h, as priced for the
/// rule's linears; AUTODDL_FP8=all or a lower bar may need more).
/// keep: what the caller reads again or leaves for a later call (Held);
/// the rest is dropped.
struct Operands {
  void *a, *b;
  float *sa, *sb;
};
Operands operands(int64_t bytesA, int64_t bytesB, unsigned keep = 0) {
  if (!(keep & kKeepDyT))
    gDyT = {};
  if (!(keep & kKeepX))
    gX = {};
  static auto *buf = new DeviceBuffer<unsigned char>(); // never destroyed
  const int64_t offB = 256 + (bytesA + 255) / 256 * 256;
  if (buf->size() < offB + bytesB) {
    AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
    *buf = DeviceBuffer<unsigned char>(offB + bytesB);
    drop_held();
  }
  unsigned char *base = buf->data();
  // x^T stays in a while this call writes b past it (a's size).
  if (!(keep & kKeepXT) || gXT.at != base + 256 ||
      offB < 256 + gXT.rows * gXT.cols)
    gXT = {};
  // Each scale 128 bytes from the other (cuBLASLt reads them as operands).
  return {base + 256, base + offB, reinterpret_cast<float *>(base),
          reinterpret_cast<float *>(base + 128)};
}

bool device_has_fp8() {
  static const bool has = [] {
    int device = 0, major = 0, minor = 0;
    AUTODDL_CUDA_CHECK(cudaGetDevice(&device));
    AUTODDL_CUDA_CHECK(cudaDeviceGetAttribute(
        &major, cudaDevAttrComputeCapabilityMajor, device));
    AUTODDL_CUDA_CHECK(cudaDeviceGetAttribute(
        &minor, cudaDevAttrComputeCapabilityMinor, device));
    const bool ok = major * 10 + minor >= 89;
    if (!ok && fp8_registered_linears() > 0)
      std::fprintf(stderr,
                   "autoddl: note: compute capability %d.%d has no "
                   "FP8 tensor cores; the fp8 plan's linears run in "
                   "bf16\n",
                   major, minor);
    return ok;
  }();
  return has;
}

/// AUTODDL_FP8: "0" off, "all" every aligned registered linear (to measure
/// the rule, or train a small model in FP8), else the rule.
enum class Fp8Switch { Off, Rule, All };
Fp8Switch fp8_switch() {
  static const Fp8Switch v = [] {
    const char *e = std::getenv("AUTODDL_FP8");
    if (e && std::strcmp(e, "0") == 0)
      return Fp8Switch::Off;
    if (e && std::strcmp(e, "all") == 0)
      return Fp8Switch::All;
    return Fp8Switch::Rule;
  }();
  return v;
}

/// What a measurement may change to find where FP8 costs accuracy or time
/// (docs/fp8.md "Knobs"; harness::check_environment validates them):
/// AUTODDL_FP8_GEMMS, the GEMMs of an FP8 linear that run in FP8 (a comma
/// list of forward, dgrad, wgrad; the others bf16), AUTODDL_FP8_FAST_ACCUM=0
/// the forward's exact accumulation, AUTODDL_FP8_MIN_INTENSITY the size
/// rule's bar, AUTODDL_FP8_CAST_ONCE what a step casts once: 0 nothing
/// (every GEMM casts its operands), weights (the weights' copies), all (and
/// an input several linears read in turn: Held).
struct Fp8Knobs {
  bool forward = true, dgrad = true, wgrad = true, fastAccum = true;
  int castOnce = 2; // AUTODDL_FP8_CAST_ONCE: 0, 1 weights, 2 all
  double minIntensity = kFp8MinIntensity;
};
const Fp8Knobs &fp8_knobs() {
  static const Fp8Knobs k = [] {
    Fp8Knobs k;
    if (const char *g = std::getenv("AUTODDL_FP8_GEMMS"); g && *g) {
      // The accepted lists are harness::check_environment's (kEnvRules).
      const std::string list = std::string(",") + g + ",";
      k.forward = list.find(",forward,") != std::string::npos;
      k.dgrad = list.find(",dgrad,") != std::string::npos;
      k.wgrad = list.find(",wgrad,") != std::string::npos;
    }
    if (const char *a = std::getenv("AUTODDL_FP8_FAST_ACCUM"); a && *a)
      k.fastAccum = std::strcmp(a, "0") != 0;
    if (const char *c = std::getenv("AUTODDL_FP8_CAST_ONCE"); c && *c)
      k.castOnce = std::strcmp(c, "0") == 0         ? 0
                   : std::strcmp(c, "weights") == 0 ? 1
                                                    : 2;
    if (const char *m = std::getenv("AUTODDL_FP8_MIN_INTENSITY"); m && *m)
      k.minIntensity = std::strtod(m, nullptr);
    return k;
  }();
  return k;
}

/// Casts w to the [O,K] (forRows: the forward's b) or [K,O] (the input
/// gradient's b) layout, whichever way it is stored.
void cast_weight(void *dst, float *scaleInv, const act_t *w, int64_t K,
                 int64_t O, bool tw, bool toOK, Fp8Meta *meta, bool record) {
  const int64_t R = tw ? O : K, C = tw ? K : O; // as stored
  const bool asIs = tw == toOK;
  fp8_cast(asIs ? dst : nullptr, asIs ? nullptr : dst, scaleInv, w, R, C,
           Fp8Format::E4M3, meta, record);
}

/// The layouts in `uses`, and where layout `l` starts in a copy of them
/// (fp8WeightCopyBytes in backends/common/Fp8Rule.h: [O,K] first).
int layouts_in(unsigned uses) {
  return ((uses & kRowsOK) ? 1 : 0) + ((uses & kRowsKO) ? 1 : 0);
}
int64_t copy_offset(int64_t K, int64_t O, unsigned uses, Layout l) {
  return l == kRowsKO && (uses & kRowsOK) ? fp8WeightCopyBytes(K, O, 1) : 256;
}

/// An FP8 operand and the 1/scale its GEMM reads.
struct Fp8Operand {
  const void *data;
  const float *scaleInv;
};

/// W (stored [O,K] when tw, else [K,O]) in E4M3 in layout `want`. Within a
/// step (fp8_begin_step), unless AUTODDL_FP8_CAST_ONCE=0: the step's copy,
/// cast by the linear's first FP8 GEMM of the step into every layout its
/// GEMMs read, in one pass that records W's amax (once a step); a layout
/// first asked for later in a step (the first step learns them) grows the
/// copy and casts it again, not recording. The copy is host-side state
/// decided as a step is enqueued, so a captured step replays the casts where
/// its eager run made them. Outside a step: cast into dst now, recording.
Fp8Operand weight_operand(const act_t *w, int64_t K, int64_t O, bool tw,
                          Layout want, void *dst, float *dstScale) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  Fp8LinearState &l = r.index.at(w);
  Fp8Meta *meta = r.metas.data() + l.meta + kW;
  if (!r.inStep || fp8_knobs().castOnce < 1) {
    cast_weight(dst, dstScale, w, K, O, tw, want == kRowsOK, meta, true);
    return {dst, dstScale};
  }
  const int64_t elems = K * O;
  const bool castThisStep = l.castStep == r.step && l.elems == elems;
  auto at = [&](Layout x) {
    return l.copy.data() + copy_offset(K, O, l.uses, x);
  };
  auto *scaleInv = reinterpret_cast<float *>(l.copy.data());
  if (castThisStep && (l.cast & want))
    return {at(want), scaleInv};
  if ((l.uses | want) != l.uses || l.elems != elems) {
    // The first step (eager): the copy grows; a GEMM may still read it.
    AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
    l.uses |= want;
    l.elems = elems;
    l.copy = DeviceBuffer<unsigned char>(
        fp8WeightCopyBytes(K, O, layouts_in(l.uses)));
    scaleInv = reinterpret_cast<float *>(l.copy.data());
  }
  unsigned char *ok = (l.uses & kRowsOK) ? at(kRowsOK) : nullptr;
  unsigned char *ko = (l.uses & kRowsKO) ? at(kRowsKO) : nullptr;
  fp8_cast(tw ? ok : ko, tw ? ko : ok, scaleInv, w, tw ? O : K, tw ? K : O,
           Fp8Format::E4M3, meta, !castThisStep);
  l.cast = l.uses;
  l.castStep = r.step;
  l.elems = elems;
  return {at(want), scaleInv};
}

/// What is cast once now (AUTODDL_FP8_CAST_ONCE, within a step): 0
/// nothing, 1 the weights (weight_operand: the scratch then holds no
/// weight), 2 also the inputs several linears read in turn (Held).
int cast_once() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.inStep ? fp8_knobs().castOnce : 0;
}
bool weights_cached() { return cast_once() >= 1; }
} // namespace

void fp8_register_linear(const act_t *w) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.index.find(w); it != r.index.end()) {
    fp8_meta_init(r.metas.data() + it->second.meta, kRoles); // restarts
    it->second.castStep = -1; // and its copy is cast again
    return;
  }
  const int64_t n = int64_t(r.index.size());
  if ((n + 1) * kRoles > r.capacity) { // grow (before the first step only)
    const int64_t cap = std::max<int64_t>(64, 2 * r.capacity);
    DeviceBuffer<Fp8Meta> grown(cap);
    fp8_meta_init(grown.data(), cap);
    if (r.capacity > 0)
      copy_on_device(grown.data(), r.metas.data(),
                     r.capacity * int64_t(sizeof(Fp8Meta)));
    synchronize();
    r.metas = std::move(grown);
    r.capacity = cap;
  }
  fp8_meta_init(r.metas.data() + n * kRoles, kRoles); // a cleared slot's too
  r.index[w].meta = n * kRoles;
  r.count.store(int64_t(r.index.size()));
}

void fp8_clear_linears() {
  Registry &r = registry();
  synchronize(); // the copies may still be read
  std::lock_guard<std::mutex> lock(r.mu);
  r.index.clear();
  r.count.store(0);
  drop_held();
}

int64_t fp8_registered_linears() { return registry().count.load(); }

Fp8Meta *fp8_linear_metas(const act_t *w) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.index.find(w);
  return it == r.index.end() ? nullptr : r.metas.data() + it->second.meta;
}

namespace {
/// The registered linears' metas, copied to the host after the work enqueued
/// so far (slots [0, 3 * linears): fp8_clear_linears starts them again).
std::vector<Fp8Meta> metas_on_host(Registry &r) {
  std::vector<Fp8Meta> host(r.index.size() * kRoles);
  if (!host.empty())
    copy_to_host(host.data(), r.metas.data(),
                 int64_t(host.size() * sizeof(Fp8Meta)));
  return host;
}
} // namespace

void fp8_save_state(const act_t *const *ws, int64_t n, float *rows) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const std::vector<Fp8Meta> host = metas_on_host(r);
  for (int64_t i = 0; i < n; ++i) {
    float *row = rows + i * kFp8RowFloats;
    auto it = ws[i] ? r.index.find(ws[i]) : r.index.end();
    if (it == r.index.end())
      std::fill(row, row + kFp8RowFloats, 0.0f);
    else
      fp8_row_from_metas(row, it->second.uses, host.data() + it->second.meta);
  }
}

void fp8_restore_state(const act_t *const *ws, int64_t n, const float *rows) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<Fp8Meta> host = metas_on_host(r);
  bool restored = false;
  for (int64_t i = 0; i < n; ++i) {
    const float *row = rows + i * kFp8RowFloats;
    auto it = ws[i] ? r.index.find(ws[i]) : r.index.end();
    if (it == r.index.end() || fp8_row_empty(row))
      continue;
    Fp8LinearState &l = it->second;
    unsigned layouts = 0;
    fp8_metas_from_row(row, layouts, host.data() + l.meta);
    for (int k = 0; k < kRoles; ++k)
      fp8_meta_set_primed(r.metas.data() + l.meta + k,
                          host[size_t(l.meta + k)].recorded > 0);
    // A copy made already (a rollback: a step graph may replay its casts)
    // keeps its layouts, which are the same program's.
    if (l.elems == 0)
      l.uses = layouts;
    l.castStep = -1;
    restored = true;
  }
  if (restored)
    copy_to_device(r.metas.data(), host.data(),
                   int64_t(host.size() * sizeof(Fp8Meta)));
}

void fp8_begin_step() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  ++r.step;
  r.inStep = true;
  drop_held();
}

void fp8_end_step() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.inStep = false;
  drop_held();
}

void fp8_note_linear(const act_t *x, bool backward) {
  if (backward || gX.src != x)
    gX = {};
  if (!backward || gXT.src != x)
    gXT = {};
  if (!backward)
    gDyT = {};
}

void fp8_note_op(const char *kind) {
  if (std::strcmp(kind, "linear") != 0)
    gX = gXT = {};
}

int64_t fp8_weight_copy_bytes() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  int64_t bytes = 0;
  for (const auto &[w, l] : r.index)
    bytes += l.copy.size();
  return bytes;
}

bool fp8_linear_eligible(const act_t *w, int64_t N, int64_t K, int64_t O) {
#ifdef AUTODDL_FP32
  constexpr bool kBuild = false; // the fp32 build checks against the CPU
#else
  constexpr bool kBuild = true;
#endif
  const Fp8Switch on = fp8_switch();
  const bool shape = on == Fp8Switch::All
                         ? fp8Aligned(N, K, O)
                         : fp8RunsLinear(N, K, O, fp8_knobs().minIntensity);
  return kBuild && on != Fp8Switch::Off && shape &&
         registry().count.load(std::memory_order_relaxed) > 0 &&
         fp8_linear_metas(w) != nullptr && device_has_fp8();
}

// Each asks cuBLASLt for its GEMM's plan first (cached), so a GEMM with no
// FP8 algorithm costs no casts before the caller's bf16 one.

bool fp8_linear_forward(act_t *out, const act_t *x, const act_t *w,
                        const act_t *bias, int64_t N, int64_t K, int64_t O,
                        bool tw, Fp8Epi epi, act_t *pre,
                        const act_t *residual) {
  if (!fp8_knobs().forward)
    return false;
  Fp8Meta *m = fp8_linear_metas(w);
  // x[N,K] (unless held from the forward before: Held), and w[O,K] unless
  // the step's copy holds it.
  const int once = cast_once();
  const Operands q = operands(N * K, once >= 1 ? 0 : K * O,
                              once >= 2 && gX.is(x, N, K) ? kKeepX : 0);
  // GeluAux: out = gelu(pre) with the pre-activation to aux; a residual is
  // C, read with beta 1. The probe's b is the scratch's (256-byte aligned,
  // as a copy's: the same plan).
  const bool gelu = epi == Fp8Epi::GeluAux;
  Fp8Operand wq{q.b, q.sb};
  auto gemm = [&](bool probe) {
    return fp8_gemm(N, O, K, q.a, Fp8Format::E4M3, q.sa, wq.data,
                    Fp8Format::E4M3, wq.scaleInv, residual ? 1.0f : 0.0f, out,
                    false, bias, residual, epi, gelu ? pre : nullptr,
                    gelu ? O : 0, fp8_knobs().fastAccum, probe);
  };
  if (!gemm(true))
    return false;
  if (!gX.is(x, N, K)) {
    fp8_cast(q.a, nullptr, q.sa, x, N, K, Fp8Format::E4M3, m + kX, true);
    gX = {x, nullptr, N, K};
  }
  wq = weight_operand(w, K, O, tw, kRowsOK, q.b, q.sb);
  return gemm(false);
}

namespace {
/// The backward's scratch: a holds W^T[K,O] for dx (unless the step's copy
/// holds it), then x^T[K,N] for dw (stream-ordered reuse), its 1/scale at
/// sa; b holds dY[N,O], then dY^T[O,N] 256-byte aligned after it, their
/// 1/scale at sb. x^T first: it stays put for the next weight-gradient call
/// of the same x whatever that linear's O (Held). fp8Scratch. keep: Held's.
struct BackwardOperands {
  Operands q;
  void *dyq, *dyT;
};
BackwardOperands backward_operands(int64_t N, int64_t K, int64_t O,
                                   unsigned keep) {
  const int64_t half = (N * O + 255) / 256 * 256;
  const Operands q = operands(std::max(weights_cached() ? 0 : K * O, K * N),
                              half + N * O, keep);
  return {q, q.b, static_cast<unsigned char *>(q.b) + half};
}

/// x^T into a for the weight gradient, unless a holds it (Held) already.
void cast_xT(const Operands &q, const act_t *x, int64_t N, int64_t K,
             Fp8Meta *meta) {
  if (gXT.is(x, N, K))
    return;
  fp8_cast(nullptr, q.a, q.sa, x, N, K, Fp8Format::E4M3, meta, true);
  gXT = {x, nullptr, N, K, q.a};
}

/// The weight gradient's GEMM on operands cast already: tw: dw[O,K] +=
/// dyT[O,N] (xT[K,N])^T; else dw[K,O] += xT (dyT)^T.
bool dw_gemm(float *dw, const void *dyT, const float *sDy, const void *xT,
             const float *sX, int64_t N, int64_t K, int64_t O, bool tw,
             bool probe) {
  return tw ? fp8_gemm(O, K, N, dyT, Fp8Format::E5M2, sDy, xT, Fp8Format::E4M3,
                       sX, 1.0f, dw, true, nullptr, nullptr, Fp8Epi::None,
                       nullptr, 0, false, probe)
            : fp8_gemm(K, O, N, xT, Fp8Format::E4M3, sX, dyT, Fp8Format::E5M2,
                       sDy, 1.0f, dw, true, nullptr, nullptr, Fp8Epi::None,
                       nullptr, 0, false, probe);
}
} // namespace

bool fp8_linear_backward_dx(act_t *dx, const act_t *dout, const act_t *w,
                            int64_t N, int64_t K, int64_t O, bool tw,
                            bool accumulate, const act_t *gelu_pre) {
  if (!fp8_knobs().dgrad)
    return false;
  Fp8Meta *m = fp8_linear_metas(w);
  // With the weights' copies in use this call writes b only: a's x^T stays
  // for the next weight-gradient calls of the same x.
  const BackwardOperands o =
      backward_operands(N, K, O, cast_once() >= 2 ? kKeepXT : 0);
  const Operands &q = o.q;
  const bool dgelu = gelu_pre != nullptr;
  Fp8Operand wt{q.a, q.sa};
  auto gemm = [&](bool probe) {
    return fp8_gemm(N, K, O, o.dyq, Fp8Format::E5M2, q.sb, wt.data,
                    Fp8Format::E4M3, wt.scaleInv, accumulate ? 1.0f : 0.0f, dx,
                    false, nullptr, nullptr,
                    dgelu ? Fp8Epi::DGelu : Fp8Epi::None, gelu_pre,
                    dgelu ? K : 0, false, probe);
  };
  if (!gemm(true))
    return false;
  // dY in both layouts in one read: the weight gradient's call reads dY^T.
  fp8_cast(o.dyq, o.dyT, q.sb, dout, N, O, Fp8Format::E5M2, m + kDy, true);
  wt = weight_operand(w, K, O, tw, kRowsKO, q.a, q.sa);
  if (!gemm(false))
    return false;
  gDyT = {dout, w, N, O};
  return true;
}

Fp8Done fp8_linear_backward(act_t *dx, float *dw, const act_t *dout,
                            const act_t *x, const act_t *w, int64_t N,
                            int64_t K, int64_t O, bool tw, bool accumulate_dx) {
  Fp8Done done;
  if (!fp8_knobs().dgrad || !fp8_knobs().wgrad)
    return done; // each gradient's own call decides
  Fp8Meta *m = fp8_linear_metas(w);
  const BackwardOperands o = backward_operands(
      N, K, O, cast_once() >= 2 && gXT.is(x, N, K) ? kKeepXT : 0);
  const Operands &q = o.q;
  void *dyq = o.dyq, *dyT = o.dyT;
  Fp8Operand wt{q.a, q.sa};
  auto dxGemm = [&](bool probe) {
    return fp8_gemm(N, K, O, dyq, Fp8Format::E5M2, q.sb, wt.data,
                    Fp8Format::E4M3, wt.scaleInv, accumulate_dx ? 1.0f : 0.0f,
                    dx, false, nullptr, nullptr, Fp8Epi::None, nullptr, 0,
                    false, probe);
  };
  if (!dxGemm(true) || !dw_gemm(dw, dyT, q.sb, q.a, q.sa, N, K, O, tw, true))
    return done;
  fp8_cast(dyq, dyT, q.sb, dout, N, O, Fp8Format::E5M2, m + kDy, true);
  wt = weight_operand(w, K, O, tw, kRowsKO, q.a, q.sa);
  done.dx = dxGemm(false); // false: refused at run time, nothing ran
  cast_xT(q, x, N, K, m + kX); // after W^T's GEMM where W^T was in a
  done.dw = dw_gemm(dw, dyT, q.sb, q.a, q.sa, N, K, O, tw, false);
  return done;
}

bool fp8_linear_backward_dw(float *dw, const act_t *dout, const act_t *x,
                            const act_t *w, int64_t N, int64_t K, int64_t O,
                            bool tw) {
  if (!fp8_knobs().wgrad)
    return false;
  Fp8Meta *m = fp8_linear_metas(w);
  // Right after this linear's input-gradient call, dY^T is in the scratch
  // already (with its 1/scale at sb); x^T may be, from the weight-gradient
  // call before (Held).
  const unsigned keep = (gDyT.is(dout, N, O, w) ? kKeepDyT : 0) |
                        (cast_once() >= 2 && gXT.is(x, N, K) ? kKeepXT : 0);
  const BackwardOperands o = backward_operands(N, K, O, keep);
  const Operands &q = o.q;
  if (!dw_gemm(dw, o.dyT, q.sb, q.a, q.sa, N, K, O, tw, true))
    return false;
  if (!gDyT.is(dout, N, O, w))
    fp8_cast(nullptr, o.dyT, q.sb, dout, N, O, Fp8Format::E5M2, m + kDy, true);
  gDyT = {}; // read once
  cast_xT(q, x, N, K, m + kX);
  return dw_gemm(dw, o.dyT, q.sb, q.a, q.sa, N, K, O, tw, false);
}

} // namespace autoddl::rt
