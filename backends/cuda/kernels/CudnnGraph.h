// cuDNN 9's graph API (the C backend API of cudnn_graph.h; no
// cudnn-frontend) as the cuDNN paths use it (AttentionCudnn.cu,
// ConvCudnn.cu): libcudnn loaded at run time, a handle per device, a builder
// that remembers its first failing call, planning by heuristics, and running a
// plan on compute_stream(). Declared only where the build has cuDNN and act_t
// is bf16 (AUTODDL_HAVE_CUDNN && !AUTODDL_FP32), like the paths themselves;
// kBuilt and env_is (the paths' switches) in every build.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_CUDNNGRAPH_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_CUDNNGRAPH_H

#include <cstdlib>
#include <cstring>

namespace autoddl::rt::cudnn_graph {

/// Whether this build has the cuDNN paths.
#if defined(AUTODDL_HAVE_CUDNN) && !defined(AUTODDL_FP32)
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

/// Whether environment variable `name` is `value` (a path's switch:
/// AUTODDL_CONV=own); with no value, whether it is set and not "0".
inline bool env_is(const char *name, const char *value = nullptr) {
  const char *e = std::getenv(name);
  if (!e || !*e)
    return false;
  return value ? std::strcmp(e, value) == 0 : std::strcmp(e, "0") != 0;
}

} // namespace autoddl::rt::cudnn_graph

#if defined(AUTODDL_HAVE_CUDNN) && !defined(AUTODDL_FP32)
#include <cudnn.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace autoddl::rt::cudnn_graph {

using Desc = cudnnBackendDescriptor_t;

/// The cuDNN functions the paths call, from libcudnn loaded at run time: a
/// program built with cuDNN's headers runs on a machine without the library
/// (the own kernels then run alone), and finds it where the build found it
/// (AUTODDL_CUDNN_DIR), on LD_LIBRARY_PATH, or in the system's library path.
struct Library {
  bool loaded = false;
  const char *error = ""; // dlerror() where it did not load
  decltype(&::cudnnBackendCreateDescriptor) BackendCreateDescriptor;
  decltype(&::cudnnBackendDestroyDescriptor) BackendDestroyDescriptor;
  decltype(&::cudnnBackendExecute) BackendExecute;
  decltype(&::cudnnBackendFinalize) BackendFinalize;
  decltype(&::cudnnBackendGetAttribute) BackendGetAttribute;
  decltype(&::cudnnBackendSetAttribute) BackendSetAttribute;
  decltype(&::cudnnCreate) Create;
  decltype(&::cudnnGetErrorString) GetErrorString;
  decltype(&::cudnnGetVersion) GetVersion;
  decltype(&::cudnnSetStream) SetStream;
};
const Library &lib();

/// The cuDNN handle of the current device, or null (no library, or
/// cudnnCreate failed); never destroyed, like the cuBLASLt handle.
cudnnHandle_t handle();

/// handle(), printing once to stderr why it is null when `verbose` (who:
/// the path that then runs its own kernels).
cudnnHandle_t handle_or_say(bool verbose, const char *who);

/// The descriptors one graph is built from and its first failing call, so
/// the building code needs no check after each step.
class Builder {
public:
  std::vector<Desc> descs; // every descriptor made, in order
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  const char *failedAt = nullptr;

  bool ok() const { return status == CUDNN_STATUS_SUCCESS; }
  void check(cudnnStatus_t s, const char *what);
  Desc make(cudnnBackendDescriptorType_t type);
  template <class T>
  void set(Desc d, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t n, const T *v) {
    if (ok() && d)
      check(lib().BackendSetAttribute(d, name, type, n, v), "set attribute");
  }
  void finalize(Desc d, const char *what);
  /// Destroys every descriptor made (none of them is needed any more).
  void release();
};

/// An execution plan and the workspace it needs (plan null: none).
struct Planned {
  Desc plan = nullptr;
  int64_t workspaceBytes = 0;
};

/// Plans the graph of `ops`: for each heuristics mode in turn, the first
/// engine config that `accept` takes (null: any) whose execution plan
/// finalizes. Every descriptor made joins b.descs.
Planned plan_graph(Builder &b, cudnnHandle_t h, const std::vector<Desc> &ops,
                   std::initializer_list<cudnnBackendHeurMode_t> modes,
                   bool (*accept)(Desc config) = nullptr);

/// The same, up to `limit` plans from the first mode that gives any whose
/// workspace is at most `maxWorkspace` bytes, in the heuristics' order (the
/// candidates a one-time timing chooses among). Where no plan of any mode
/// fits, the first that finalized alone (over the bound: the caller says so).
std::vector<Planned>
plan_candidates(Builder &b, cudnnHandle_t h, const std::vector<Desc> &ops,
                std::initializer_list<cudnnBackendHeurMode_t> modes,
                bool (*accept)(Desc config), size_t limit,
                int64_t maxWorkspace = INT64_MAX);

/// False for an engine config cuDNN notes as nondeterministic or as reducing
/// in less than fp32 (an `accept` for plan_graph).
bool deterministic_fp32(Desc config);

/// Runs `plan` on compute_stream() with tensors uids[i] -> ptrs[i] and
/// `workspace`; a failure stops the program as a failed CUDA call does
/// (`what` names the call): the plan finalized for these shapes.
void execute(cudnnHandle_t h, Desc plan, const std::vector<int64_t> &uids,
             const std::vector<void *> &ptrs, void *workspace,
             const char *what);

/// The current CUDA device.
int current_device();

} // namespace autoddl::rt::cudnn_graph

#endif
#endif // AUTODDL_BACKENDS_CUDA_KERNELS_CUDNNGRAPH_H
