// A data-parallel softmax-regression language model on synthetic tokens,
// written the way codegen writes programs: plan-invariant init, global batch
// split over ranks, gradient all-reduce, AdamW, metrics.json and a safetensors
// checkpoint. Built outside the autoddl tree (run.sh).
#include "backends/common/Data.h"        // synthetic_tokens
#include "backends/common/FileIo.h"      // make_directories
#include "backends/common/Init.h"        // init_normal, Slice
#include "backends/common/Safetensors.h" // safetensors_write
#include "backends/cpu/Collectives.h"    // all_reduce_forward
#include "backends/host/Mesh.h"           // mpi_init, Mesh
#include "backends/cpu/Optimizer.h"      // adamw_step
#include "backends/host/RunReport.h"      // write_run_metrics
#include "backends/cpu/kernels/CrossEntropy.h"
#include "backends/cpu/kernels/Embedding.h"
#include "backends/cpu/kernels/Linear.h"

#include <cstdio>
#include <stdexcept>
#include <vector>

using namespace autoddl::rt;

int main(int argc, char **argv) {
  mpi_init(&argc, &argv);
  try {
    const std::string out = argc > 1 ? argv[1] : "out";
    Mesh mesh({comm_size(MPI_COMM_WORLD)}, MPI_COMM_WORLD); // dp only
    const int64_t V = 32, C = 16, B = 8, T = 8, steps = 20;
    const int64_t dp = mesh.shape()[0], Bl = B / dp, N = Bl * T;
    // parameters (replicated), gradients, AdamW state
    std::vector<float> wte(V * C), wlm(V * C), dwte(V * C), dwlm(V * C),
        m1(V * C), v1(V * C), m2(V * C), v2(V * C);
    init_normal(wte.data(), Slice::whole({V, C}), 1, "wte", 0.0f, 0.5f);
    init_normal(wlm.data(), Slice::whole({V, C}), 1, "lm_head", 0.0f, 0.5f);
    std::vector<int32_t> ids(N), tg(N);
    std::vector<float> x(N * C), logits(N * V), losses(N), lse(N), dx(N * C),
        dlogits(N * V);
    AdamWConfig adam;
    adam.lr = 3e-2;
    RunMetrics metrics;
    metrics.items_per_step = double(B * T);
    for (int64_t s = 0; s < steps; ++s) {
      Timer timer;
      synthetic_tokens(7, s, B, T, V, mesh.coord(0) * Bl, Bl, ids.data(),
                       tg.data());
      embedding_forward(x.data(), ids.data(), wte.data(), N, C, 0, V);
      linear_forward(logits.data(), x.data(), wlm.data(), nullptr, N, C, V,
                     true);
      crossentropy_forward(losses.data(), lse.data(), logits.data(), tg.data(),
                           N, V);
      float loss = 0;
      for (float l : losses)
        loss += l / float(B * T);
      all_reduce_forward(&loss, 1, mesh.axis(0));
      std::fill(dwte.begin(), dwte.end(), 0.0f);
      std::fill(dwlm.begin(), dwlm.end(), 0.0f);
      std::fill(dx.begin(), dx.end(), 0.0f);
      std::fill(dlogits.begin(), dlogits.end(), 0.0f);
      crossentropy_backward(dlogits.data(), logits.data(), lse.data(),
                            tg.data(), N, V, 1.0f / float(B * T));
      linear_backward(dx.data(), dwlm.data(), nullptr, dlogits.data(), x.data(),
                      wlm.data(), N, C, V, true);
      embedding_backward(dwte.data(), dx.data(), ids.data(), N, C, 0, V);
      all_reduce_forward(dwte.data(), V * C, mesh.axis(0)); // gradient sync
      all_reduce_forward(dwlm.data(), V * C, mesh.axis(0));
      adamw_step(wte.data(), dwte.data(), m1.data(), v1.data(), V * C, adam,
                 s + 1);
      adamw_step(wlm.data(), dwlm.data(), m2.data(), v2.data(), V * C, adam,
                 s + 1);
      metrics.loss.push_back(loss);
      metrics.step_seconds.push_back(timer.seconds());
      if (mesh.rank() == 0)
        std::printf("step %2lld | loss %.6f\n", (long long)s, loss);
    }
    if (mesh.rank() == 0)
      make_directories(out);
    MPI_Barrier(MPI_COMM_WORLD);
    write_run_metrics(metrics, out + "/metrics.json", MPI_COMM_WORLD);
    if (mesh.rank() == 0)
      safetensors_write(
          out + "/model.safetensors",
          {{"wte", {V, C}, wte.data()}, {"lm_head", {V, C}, wlm.data()}});
    // The loss must fall on the learnable synthetic chain (below its starting
    // value by 0.3).
    const bool learned = metrics.loss.back() < metrics.loss.front() - 0.3;
    MPI_Finalize();
    return learned ? 0 : 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}
