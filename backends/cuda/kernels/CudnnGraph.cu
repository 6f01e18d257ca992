// cuDNN 9's graph API as the cuDNN paths use it (CudnnGraph.h). Empty where
// the build has no cuDNN or act_t is fp32.
#include "backends/cuda/kernels/CudnnGraph.h"

#if defined(AUTODDL_HAVE_CUDNN) && !defined(AUTODDL_FP32)
#include "backends/cuda/Runtime.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>

namespace autoddl::rt::cudnn_graph {

const Library &lib() {
  static const Library l = [] {
    Library r{};
    void *h = nullptr;
#ifdef AUTODDL_CUDNN_DIR
    h = dlopen(AUTODDL_CUDNN_DIR "/libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h)
      h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      static const std::string why = e ? e : "dlopen failed";
      r.error = why.c_str();
      return r;
    }
    bool all = true;
    auto get = [&](auto &f, const char *name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(
          dlsym(h, name));
      all = all && f;
    };
    get(r.BackendCreateDescriptor, "cudnnBackendCreateDescriptor");
    get(r.BackendDestroyDescriptor, "cudnnBackendDestroyDescriptor");
    get(r.BackendExecute, "cudnnBackendExecute");
    get(r.BackendFinalize, "cudnnBackendFinalize");
    get(r.BackendGetAttribute, "cudnnBackendGetAttribute");
    get(r.BackendSetAttribute, "cudnnBackendSetAttribute");
    get(r.Create, "cudnnCreate");
    get(r.GetErrorString, "cudnnGetErrorString");
    get(r.GetVersion, "cudnnGetVersion");
    get(r.SetStream, "cudnnSetStream");
    // cuDNN 9's graph API: an older library lacks some of it or answers for
    // another ABI.
    r.loaded = all && r.GetVersion() >= 90000;
    if (!r.loaded)
      r.error = "not cuDNN 9";
    return r;
  }();
  return l;
}

int current_device() {
  int dev = 0;
  AUTODDL_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

cudnnHandle_t handle() {
  constexpr int kMaxDevices = 64;
  static cudnnHandle_t handles[kMaxDevices] = {};
  cudnnHandle_t &h = handles[current_device() % kMaxDevices];
  if (!lib().loaded)
    return nullptr;
  if (!h && lib().Create(&h) != CUDNN_STATUS_SUCCESS)
    h = nullptr;
  return h;
}

cudnnHandle_t handle_or_say(bool verbose, const char *who) {
  cudnnHandle_t h = handle();
  if (h || !verbose)
    return h;
  static std::mutex m;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(m);
  if (said.insert(who).second)
    std::fprintf(stderr, "autoddl: no cuDNN (libcudnn.so.9: %s): own %s\n",
                 lib().loaded ? "cudnnCreate failed" : lib().error, who);
  return h;
}

void Builder::check(cudnnStatus_t s, const char *what) {
  if (s != CUDNN_STATUS_SUCCESS && ok()) {
    status = s;
    failedAt = what;
  }
}

Desc Builder::make(cudnnBackendDescriptorType_t type) {
  Desc d = nullptr;
  if (ok())
    check(lib().BackendCreateDescriptor(type, &d), "create descriptor");
  if (d)
    descs.push_back(d);
  return d;
}

void Builder::finalize(Desc d, const char *what) {
  if (ok() && d)
    check(lib().BackendFinalize(d), what);
}

void Builder::release() {
  for (auto it = descs.rbegin(); it != descs.rend(); ++it)
    lib().BackendDestroyDescriptor(*it);
  descs.clear();
}

bool deterministic_fp32(Desc config) {
  Desc engine = nullptr;
  if (lib().BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) !=
      CUDNN_STATUS_SUCCESS)
    return true;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t n = 0;
  bool good = true;
  if (lib().BackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                &engine) == CUDNN_STATUS_SUCCESS &&
      lib().BackendGetAttribute(
          engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
          CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n; ++i)
      good = good && notes[i] != CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC &&
             notes[i] != CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
  lib().BackendDestroyDescriptor(engine);
  return good;
}

namespace {

/// The plans of the first `limit` configs of `configs` that `accept` takes,
/// whose execution plan finalizes and whose workspace is at most
/// `maxWorkspace`, in order; `over`: where it is null, the first plan over
/// that bound (else such plans are destroyed).
std::vector<Planned> finalized_plans(cudnnHandle_t h,
                                     const std::vector<Desc> &configs,
                                     bool (*accept)(Desc), size_t limit,
                                     int64_t maxWorkspace, Planned &over) {
  std::vector<Planned> plans;
  for (Desc cfg : configs) {
    Desc plan = nullptr;
    if (plans.size() >= limit)
      break;
    if (!cfg || (accept && !accept(cfg)) ||
        lib().BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                      &plan) != CUDNN_STATUS_SUCCESS)
      continue;
    if (lib().BackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                  CUDNN_TYPE_HANDLE, 1,
                                  &h) == CUDNN_STATUS_SUCCESS &&
        lib().BackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                  &cfg) == CUDNN_STATUS_SUCCESS &&
        lib().BackendFinalize(plan) == CUDNN_STATUS_SUCCESS) {
      Planned p;
      int64_t cnt = 0;
      lib().BackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                CUDNN_TYPE_INT64, 1, &cnt, &p.workspaceBytes);
      p.plan = plan;
      if (p.workspaceBytes <= maxWorkspace)
        plans.push_back(p);
      else if (!over.plan)
        over = p;
      else
        lib().BackendDestroyDescriptor(plan);
      continue;
    }
    lib().BackendDestroyDescriptor(plan);
  }
  return plans;
}

} // namespace

std::vector<Planned>
plan_candidates(Builder &b, cudnnHandle_t h, const std::vector<Desc> &ops,
                std::initializer_list<cudnnBackendHeurMode_t> modes,
                bool (*accept)(Desc), size_t limit, int64_t maxWorkspace) {
  Desc graph = b.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  b.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  b.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        int64_t(ops.size()), ops.data());
  b.finalize(graph, "operation graph");
  std::vector<Planned> plans;
  Planned over; // the first plan over maxWorkspace
  for (cudnnBackendHeurMode_t mode : modes) {
    if (!b.ok() || !plans.empty())
      break;
    Desc heur = nullptr;
    if (lib().BackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
                                      &heur) != CUDNN_STATUS_SUCCESS)
      continue;
    b.descs.push_back(heur);
    int64_t n = 0;
    if (lib().BackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                  &graph) != CUDNN_STATUS_SUCCESS ||
        lib().BackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE,
                                  CUDNN_TYPE_HEUR_MODE, 1,
                                  &mode) != CUDNN_STATUS_SUCCESS ||
        lib().BackendFinalize(heur) != CUDNN_STATUS_SUCCESS ||
        lib().BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n,
                                  nullptr) != CUDNN_STATUS_SUCCESS ||
        n <= 0)
      continue;
    std::vector<Desc> configs(size_t(n), nullptr);
    for (Desc &c : configs)
      if (lib().BackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                        &c) == CUDNN_STATUS_SUCCESS)
        b.descs.push_back(c); // the plan keeps what it needs of its config
    int64_t got = 0;
    if (lib().BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                  configs.data()) != CUDNN_STATUS_SUCCESS)
      got = 0;
    configs.resize(size_t(got));
    plans = finalized_plans(h, configs, accept, limit, maxWorkspace, over);
    for (const Planned &p : plans)
      b.descs.push_back(p.plan);
  }
  if (over.plan && plans.empty()) {
    plans.push_back(over);
    b.descs.push_back(over.plan);
  } else if (over.plan) {
    lib().BackendDestroyDescriptor(over.plan);
  }
  return plans;
}

Planned plan_graph(Builder &b, cudnnHandle_t h, const std::vector<Desc> &ops,
                   std::initializer_list<cudnnBackendHeurMode_t> modes,
                   bool (*accept)(Desc)) {
  std::vector<Planned> plans = plan_candidates(b, h, ops, modes, accept, 1);
  return plans.empty() ? Planned{} : plans[0];
}

void execute(cudnnHandle_t h, Desc plan, const std::vector<int64_t> &uids,
             const std::vector<void *> &ptrs, void *workspace,
             const char *what) {
  Desc pack = nullptr;
  cudnnStatus_t st = lib().BackendCreateDescriptor(
      CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (st == CUDNN_STATUS_SUCCESS)
    st = lib().BackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                   CUDNN_TYPE_INT64, int64_t(uids.size()),
                                   uids.data());
  if (st == CUDNN_STATUS_SUCCESS)
    st = lib().BackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                   CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
                                   ptrs.data());
  if (st == CUDNN_STATUS_SUCCESS)
    st = lib().BackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                   CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (st == CUDNN_STATUS_SUCCESS)
    st = lib().BackendFinalize(pack);
  if (st == CUDNN_STATUS_SUCCESS)
    st = lib().SetStream(h, compute_stream());
  if (st == CUDNN_STATUS_SUCCESS)
    st = lib().BackendExecute(h, plan, pack);
  if (pack)
    lib().BackendDestroyDescriptor(pack);
  if (st != CUDNN_STATUS_SUCCESS)
    cuda_fail(lib().GetErrorString(st), what, __FILE__, __LINE__);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt::cudnn_graph

#endif
