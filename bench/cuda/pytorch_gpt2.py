#!/usr/bin/env python3
"""PyTorch baseline for the CUDA benchmark (issue 6 part 5): GPT-2 training throughput.

The model is GPT-2 as OpenAI released it (Radford et al. 2019; HF GPT2LMHeadModel): learned
positions, pre-LayerNorm blocks, GELU (tanh approximation), tied input/output embeddings,
sequence 1024, dropout 0, weights initialised as GPT-2 does (N(0, 0.02); residual projections
N(0, 0.02/sqrt(2L)); biases 0; LayerNorm 1/0). The vocabulary is padded to 50304 rows as
nanoGPT does (its default vocab_size; the generated programs pad the same way, docs/codegen.md
"Padded vocabulary"): the embedding/lm_head table has 50304 rows and the loss runs over the
50304 logits, the padding ids never occurring as targets (--vocab 50257: the unpadded model;
parameters, FLOPs and MFU count the 50257 real rows either way).
Training step: bf16 autocast over fp32 master weights, attention through
F.scaled_dot_product_attention(is_causal=True) on one backend chosen by --sdpa (flash, cudnn,
efficient: torch.nn.attention's FLASH_ATTENTION, CUDNN_ATTENTION, EFFICIENT_ATTENTION; the
others switched off, so an unsupported choice fails loudly rather than timing another kernel),
cross-entropy in fp32, AdamW(lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices
and embeddings, none on biases and LayerNorms, fused=True), no gradient clipping. Data are
random token ids (throughput does not depend on them), drawn once on the GPU and rotated.

Modes (one process per GPU):
  eager    the module as written
  compile  torch.compile(model) (default mode), loss inside the compiled forward
  ddp      DistributedDataParallel over all ranks (torchrun); --compile compiles the model
  tp       tensor parallel over all ranks (torch.distributed.tensor.parallel, as the PyTorch
           TP tutorial does): ColwiseParallel on the q/k/v and MLP-up projections,
           RowwiseParallel on the attention and MLP-down projections; embeddings, LayerNorms
           and the tied head replicated (their gradients are equal on every rank, since
           every rank sees the same batch and the row-parallel outputs are all-reduced)

--float8 tensorwise|rowwise (any mode): torchao's float8 training of the block linears, the peer
of the programs' FP8 (to_float8; torchao's source tree on PYTHONPATH).

Timing: `--warmup` steps (these include compilation), a synchronize, then CUDA events
around each of `--steps` steps; tokens/s = steps * micro_batch * seq * world / (sum of
step times) (dp: every rank's batch counts; tp: one batch for the group).

MFU (stated in every row): flops/token = 6 * N + 12 * L * T * C, where N counts every
parameter except the position table (the tied embedding counts once: it is the head's
GEMM) and 12*L*T*C is the attention score/value products (PaLM, Chowdhery et al. 2022,
App. B; the causal mask's skipped half is counted, as there); `mfu` divides by
989.5e12 * GPUs (H200/H100 SXM dense bf16, NVIDIA datasheet: 1,979 TFLOP/s with sparsity),
`mfu_vs_measured_peak` by 790e12 * GPUs (8192^3 bf16 GEMM measured through PyTorch on an
H200 here, /work/.library/device/KINDS.md), `mfu_6n` leaves the attention term out.

The `suite` subcommand runs eager then compile for several models on one GPU, each with every
attention backend of --sdpa (default flash,cudnn,efficient): eager one model and backend after
another in this process; compile in one child process per (model, backend), started in groups of
--compile-jobs (default: one group per backend, all models at once; compilation is CPU work),
each group timed one child at a time once all of it has compiled and warmed up or the compile
deadline has passed, so that no two share the GPU. Each (model, mode) then gets one row more: the best backend's, with mode
"eager" or "compile" (what bench/cuda/results_table.py reads), "sdpa_backend" naming the winner
and "sdpa_tried" every backend's tokens/s (or its error); the per-backend rows have mode
"eager-sdpa" / "compile-sdpa".

Prints one JSON object per measurement, one a line, on stdout (and appends it to --out). Every
row records the device, torch/CUDA/cuDNN/NCCL versions, the date (UTC) and the commit
(BENCH_COMMIT, else `git rev-parse HEAD` where the tree is a checkout).
"""
import argparse
import json
import math
import os
import select
import subprocess
import sys
import time

MODELS = {
    # name: (layers, heads, channels); HF configs gpt2, gpt2-medium, gpt2-large, gpt2-xl
    "gpt2": (12, 12, 768),
    "gpt2-medium": (24, 16, 1024),
    "gpt2-large": (36, 20, 1280),
    "gpt2-xl": (48, 25, 1600),
    "tiny": (2, 4, 128),  # smoke tests only
}
# Micro-batch per GPU: 16 sequences (16k tokens) a step at every size, without recomputation at
# seq 1024 (1.5B: about 72 GiB). Until 2026-12-01 it was 16/8/16/8 for 124M/355M/774M/1.5B
# (and 16/8/8/4 before that): the optimizer's AdamW streams 30 bytes a parameter whatever the
# batch, so a small step measures it more than the model (1.5B at 4: 13% of the step), and
# users train such models on far more tokens a step. Both sides always run the same micro-batch.
DEFAULT_MICRO_BATCH = {"gpt2": 16, "gpt2-medium": 16, "gpt2-large": 16, "gpt2-xl": 16, "tiny": 2}
# BENCH_MICRO_BATCHES="gpt2-xl=8,...": other micro-batches (bench/cuda/run.sh --micro sets it, so
# that torch.compile children and torchrun ranks see them too).
for _item in filter(None, os.environ.get("BENCH_MICRO_BATCHES", "").split(",")):
    _name, _, _b = _item.partition("=")
    if _name not in DEFAULT_MICRO_BATCH or not _b.isdigit() or int(_b) < 1:
        sys.exit("pytorch_gpt2.py: BENCH_MICRO_BATCHES: bad entry %r (model=B)" % _item)
    DEFAULT_MICRO_BATCH[_name] = int(_b)
VOCAB = 50257  # GPT-2's real vocabulary
PADDED_VOCAB = 50304  # nanoGPT's default: 50257 rounded up to a multiple of 64
SEQ = 1024
SDPA_BACKENDS = ("flash", "cudnn", "efficient")
PEAK_DATASHEET = 989.5e12
PEAK_MEASURED = 790e12


def build_model(torch, name, fused_qkv, seq, vocab=PADDED_VOCAB):
    nn = torch.nn
    F = torch.nn.functional
    layers, heads, channels = MODELS[name]

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.head_dim = channels // heads
            if fused_qkv:
                self.c_attn = nn.Linear(channels, 3 * channels)
            else:  # separate projections, so that a column split keeps whole heads
                self.q = nn.Linear(channels, channels)
                self.k = nn.Linear(channels, channels)
                self.v = nn.Linear(channels, channels)
            self.c_proj = nn.Linear(channels, channels)

        def forward(self, x):
            b, t, _ = x.shape
            if fused_qkv:
                q, k, v = self.c_attn(x).split(channels, dim=2)
            else:
                q, k, v = self.q(x), self.k(x), self.v(x)
            # -1 heads: under tensor parallelism each rank holds heads / tp of them.
            q, k, v = (z.view(b, t, -1, self.head_dim).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(b, t, -1)
            return self.c_proj(y)

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(channels, 4 * channels)
            self.c_proj = nn.Linear(4 * channels, channels)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(channels, eps=1e-5)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(channels, eps=1e-5)
            self.mlp = Mlp()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Gpt2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, channels)
            self.wpe = nn.Embedding(seq, channels)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(channels, eps=1e-5)
            self.lm_head = nn.Linear(channels, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            self.apply(self._init)
            for n, p in self.named_parameters():  # GPT-2's scaled residual projections
                if n.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

        @staticmethod
        def _init(m):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets):
            t = idx.shape[1]
            pos = torch.arange(t, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.float().view(-1, vocab), targets.reshape(-1))

    return Gpt2()


def to_float8(model, recipe):
    """torchao's float8 training, the peer of the programs' --precision fp8 (docs/fp8.md): every
    block linear (q/k/v, projections, MLP) swapped for torchao's Float8Linear under its named
    recipe (tensorwise: dynamic per-tensor scales; rowwise: per-row), the tied lm_head kept in bf16
    as the programs keep it. torchao is not installed on the GPU machines: put its source tree on
    PYTHONPATH with TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1 (float8 training needs no extension)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    config = Float8LinearConfig.from_recipe_name(recipe)
    convert_to_float8_training(
        model, config=config,
        module_filter_fn=lambda m, fqn: fqn.startswith("h.") and
        m.in_features % 16 == 0 and m.out_features % 16 == 0)


def flops_per_token(model_name, n_params_no_wpe, seq):
    layers, _, channels = MODELS[model_name]
    return 6 * n_params_no_wpe + 12 * layers * seq * channels, 6 * n_params_no_wpe


def make_optimizer(torch, model, device):
    # Tensor-parallel weights are DTensors, the rest plain tensors; the fused kernel takes
    # one kind per call, so they go in separate groups.
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        DTensor = ()
    groups = {}
    for p in model.parameters():
        key = (p.dim() >= 2, isinstance(p, DTensor))
        groups.setdefault(key, []).append(p)
    groups = [{"params": ps, "weight_decay": 0.1 if decay else 0.0}
              for (decay, _), ps in sorted(groups.items())]
    fused = device.type == "cuda"
    return torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=fused)


class Runner:
    """One model, its optimizer and data on one rank; times training steps."""

    def __init__(self, torch, args, device, world=1, rank=0):
        self.torch, self.args, self.device = torch, args, device
        self.world, self.rank = world, rank
        torch.manual_seed(1234)  # same weights on every rank (tp needs it; ddp broadcasts)
        fused_qkv = args.mode != "tp"
        with torch.device(device):  # initialise on the GPU: seconds, not a minute
            model = build_model(torch, args.model, fused_qkv, args.seq, args.vocab)
        # Parameters of the real model: padding rows of the table do no useful work.
        padding = (args.vocab - VOCAB) * MODELS[args.model][2]
        self.n_params = sum(p.numel() for p in model.parameters()) - padding
        self.n_params_no_wpe = self.n_params - model.wpe.weight.numel()
        if args.mode == "tp":
            model = self._tensor_parallel(model)
        if args.float8 != "none":
            to_float8(model, args.float8)
        self.model = model
        self.optimizer = make_optimizer(torch, model, device)
        if args.mode == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP
            ids = [device.index] if device.type == "cuda" else None
            self.model = DDP(model, device_ids=ids)
        self.step_model = self.model
        if args.mode == "compile" or (args.compile and args.mode in ("ddp", "tp")):
            self.step_model = torch.compile(self.model)
        # Data: dp ranks draw different batches, tp ranks the same one.
        gen = torch.Generator(device=device)
        gen.manual_seed(99 + (rank if args.mode == "ddp" else 0))
        b = args.micro_batch
        self.batches = []
        for _ in range(4):
            ids = torch.randint(0, VOCAB, (b, args.seq + 1), device=device, generator=gen)
            self.batches.append((ids[:, :-1].contiguous(), ids[:, 1:].contiguous()))
        self.next = 0

    def _tensor_parallel(self, model):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)
        mesh = init_device_mesh(self.device.type, (self.world,))
        plan = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),
                "attn.v": ColwiseParallel(), "attn.c_proj": RowwiseParallel(),
                "mlp.c_fc": ColwiseParallel(), "mlp.c_proj": RowwiseParallel()}
        for block in model.h:
            parallelize_module(block, mesh, plan)
        return model

    def step(self, model):
        torch = self.torch
        inputs, targets = self.batches[self.next % len(self.batches)]
        self.next += 1
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
            loss = model(inputs, targets)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def warmup(self, model, steps):
        t0 = time.perf_counter()
        loss = None
        for _ in range(steps):
            loss = self.step(model)
        self.sync()
        return time.perf_counter() - t0, float(loss.detach()) if loss is not None else None

    def time_steps(self, model, steps):
        """Seconds of each step: CUDA events on GPUs, the host clock on the CPU."""
        torch = self.torch
        times, loss = [], None
        self.sync()
        if self.device.type == "cuda":
            events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
            events[0].record()
            for i in range(steps):
                loss = self.step(model)
                events[i + 1].record()
            self.sync()
            times = [events[i].elapsed_time(events[i + 1]) * 1e-3 for i in range(steps)]
        else:
            for _ in range(steps):
                t0 = time.perf_counter()
                loss = self.step(model)
                times.append(time.perf_counter() - t0)
        return times, float(loss.detach())

    def row(self, mode, times, loss, warmup_s):
        args = self.args
        gpus = self.world
        batches = gpus if args.mode == "ddp" else 1  # tp ranks share one batch
        tokens = args.micro_batch * args.seq * batches
        total = sum(times)
        tps = tokens * len(times) / total
        fpt, fpt6n = flops_per_token(args.model, self.n_params_no_wpe, args.seq)
        med = sorted(times)[len(times) // 2]
        row = {
            "model": args.model, "gpus": gpus, "mode": mode, "micro_batch": args.micro_batch,
            "seq": args.seq, "global_batch": args.micro_batch * batches,
            "params": self.n_params, "steps": len(times), "warmup_steps": args.warmup,
            "warmup_s": round(warmup_s, 2), "step_ms_mean": round(1e3 * total / len(times), 3),
            "step_ms_median": round(1e3 * med, 3), "step_ms_min": round(1e3 * min(times), 3),
            "tokens_per_s": round(tps, 1),
            "mfu": round(tps * fpt / (PEAK_DATASHEET * gpus), 4),
            "mfu_vs_measured_peak": round(tps * fpt / (PEAK_MEASURED * gpus), 4),
            "mfu_6n": round(tps * fpt6n / (PEAK_DATASHEET * gpus), 4),
            "flops_per_token": fpt, "final_loss": round(loss, 4),
            "vocab_rows": args.vocab, "sdpa_backend": getattr(args, "sdpa", "flash"),
        }
        if args.float8 != "none":
            import torchao
            row["float8"] = args.float8
            row["torchao"] = getattr(torchao, "__version__", "unknown")
        return row


def emit(row, out):
    line = json.dumps(row)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def setup(args):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    world, rank = 1, 0
    if args.mode in ("ddp", "tp"):
        import torch.distributed as dist
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if args.device == "cuda":
            torch.cuda.set_device(local)
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        world, rank = dist.get_world_size(), dist.get_rank()
        device = torch.device(args.device, local) if args.device == "cuda" else torch.device("cpu")
    else:
        device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cuda":
        # One attention backend only: fail loudly rather than time another kernel.
        choice = getattr(args, "sdpa", "flash")
        if choice not in SDPA_BACKENDS:
            sys.exit("pytorch_gpt2.py: --sdpa: expected one of %s, got %r"
                     % (",".join(SDPA_BACKENDS), choice))
        torch.backends.cuda.enable_flash_sdp(choice == "flash")
        torch.backends.cuda.enable_mem_efficient_sdp(choice == "efficient")
        torch.backends.cuda.enable_math_sdp(False)
        if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
            torch.backends.cuda.enable_cudnn_sdp(choice == "cudnn")
        elif choice == "cudnn":
            sys.exit("pytorch_gpt2.py: this torch has no cuDNN attention backend")
    return torch, device, world, rank


def fill_defaults(args):
    if args.vocab < VOCAB:
        sys.exit("pytorch_gpt2.py: --vocab: at least %d (GPT-2's vocabulary), got %d"
                 % (VOCAB, args.vocab))
    if args.micro_batch is None:
        args.micro_batch = DEFAULT_MICRO_BATCH[args.model]


def run_one(args):
    """One mode of one model in this process (under torchrun for ddp/tp)."""
    fill_defaults(args)
    torch, device, world, rank = setup(args)
    r = Runner(torch, args, device, world, rank)
    warm_s, _ = r.warmup(r.step_model, args.warmup)
    if args.wait_go:
        # Compiled and warmed up: free the cached activations so that the other children's
        # compilations fit beside ours, tell the parent, and wait for our turn on the GPU.
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print("READY", flush=True)
        if sys.stdin.readline().strip() != "GO":
            return 1
        r.warmup(r.step_model, 2)  # re-grow the allocator's cache after empty_cache
    times, loss = r.time_steps(r.step_model, args.steps)
    mode = args.mode + ("-compile" if args.compile and args.mode in ("ddp", "tp") else "")
    row = r.row(mode, times, loss, warm_s)
    row.update(versions(torch))
    if rank == 0:
        emit(row, args.out)
    if args.mode in ("ddp", "tp"):
        torch.distributed.destroy_process_group()
    return 0


def commit():
    """BENCH_COMMIT, else the checkout's HEAD, else "unknown" (a copied tree)."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)),
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def versions(torch):
    v = {"torch": torch.__version__, "commit": commit(),
         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if torch.cuda.is_available():
        v["cuda"] = torch.version.cuda
        v["cudnn"] = torch.backends.cudnn.version()
        v["device"] = torch.cuda.get_device_name(0)
        try:
            v["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - informational only
            pass
    return v


def best_rows(rows, mode):
    """One row per model: the fastest backend's of `mode`, relabelled `mode`, with every
    backend's tokens/s (or error) under "sdpa_tried"."""
    out = []
    by_model = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    for m, rs in by_model.items():
        tried = {r["sdpa_backend"]: r.get("tokens_per_s", r.get("error")) for r in rs}
        ok = [r for r in rs if "error" not in r]
        if ok:
            best = dict(max(ok, key=lambda r: r["tokens_per_s"]))
        else:
            best = {"model": m, "gpus": 1, "error": "every backend failed"}
        best["mode"] = mode
        best["sdpa_tried"] = tried
        out.append(best)
    return out


def suite(args):
    """eager then compile for each model and attention backend on one GPU (the module doc)."""
    models = args.models.split(",")
    backends = args.sdpa.split(",")
    for b in backends:
        if b not in SDPA_BACKENDS:
            sys.exit("pytorch_gpt2.py: --sdpa: expected some of %s, got %r"
                     % (",".join(SDPA_BACKENDS), b))
    t_start = time.perf_counter()
    rows = []
    if "eager" in args.modes:
        import torch
        eager = []
        for m in models:
            for b in backends:
                sub = argparse.Namespace(**vars(args))
                sub.model, sub.mode, sub.micro_batch, sub.compile = m, "eager", None, False
                sub.sdpa = b
                fill_defaults(sub)
                try:
                    torch_, device, _, _ = setup(sub)
                    r = Runner(torch_, sub, device)
                    warm_s, _ = r.warmup(r.model, args.warmup)
                    times, loss = r.time_steps(r.model, args.steps)
                    row = r.row("eager-sdpa", times, loss, warm_s)
                    row.update(versions(torch_))
                    del r
                except Exception as e:  # noqa: BLE001 - record and go on with the next one
                    row = {"model": m, "gpus": 1, "mode": "eager-sdpa", "sdpa_backend": b,
                           "error": repr(e)[:400]}
                emit(row, args.out)
                eager.append(row)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        for row in best_rows(eager, "eager"):
            emit(row, args.out)
            rows.append(row)
    if "compile" in args.modes:
        # Backend by backend: each default group is what one compile phase held before
        # (every model at once), so the GPU memory of a group is what it was.
        jobs = [(m, b) for b in backends for m in models]
        size = args.compile_jobs if args.compile_jobs > 0 else len(models)
        compiled = []
        for i in range(0, len(jobs), size):
            compiled += compile_children(args, jobs[i:i + size], t_start)
        for row in best_rows(compiled, "compile"):
            emit(row, args.out)
            rows.append(row)
    return rows


def compile_children(args, jobs, t_start):
    """Compiles the (model, backend) jobs in child processes at once, then times them one at
    a time."""
    me = os.path.abspath(__file__)
    children = {}
    for job in jobs:
        m, b = job
        cmd = [sys.executable, me, "one", "--model", m, "--mode", "compile", "--sdpa", b,
               "--steps", str(args.steps), "--warmup", str(args.warmup), "--seq", str(args.seq),
               "--vocab", str(args.vocab), "--device", args.device, "--float8", args.float8,
               "--wait-go"]
        children[job] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=None, text=True, bufsize=1)
    deadline = time.perf_counter() + args.compile_wait_s
    ready, failed = [], {}
    pending = dict(children)
    while pending and time.perf_counter() < deadline:
        fds = {p.stdout.fileno(): job for job, p in pending.items()}
        r, _, _ = select.select(list(fds), [], [], max(0.0, min(5.0, deadline - time.perf_counter())))
        for fd in r:
            job = fds[fd]
            line = pending[job].stdout.readline()
            if line.strip() == "READY":
                ready.append(job)
                del pending[job]
            elif line == "":  # exited before READY
                failed[job] = "exited with status %s before warming up" % pending[job].wait()
                del pending[job]
    for job, p in pending.items():
        p.kill()
        p.wait()
        failed[job] = "not compiled and warmed up within %.0f s" % args.compile_wait_s
    rows = []
    for job in jobs:  # one at a time on the GPU, in the order asked
        m, b = job
        if job in failed:
            row = {"model": m, "gpus": 1, "mode": "compile-sdpa", "sdpa_backend": b,
                   "error": failed[job]}
            emit(row, args.out)
            rows.append(row)
            continue
        p = children[job]
        p.stdin.write("GO\n")
        p.stdin.flush()
        out, _ = p.communicate(timeout=300)  # the child prints its row; we record it
        got = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        row = got[-1] if got else {"model": m, "gpus": 1, "mode": "compile",
                                   "error": "no result (exit status %s)" % p.returncode}
        row["mode"] = "compile-sdpa"
        row["sdpa_backend"] = b
        row["compile_phase_s"] = round(time.perf_counter() - t_start, 1)
        emit(row, args.out)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    one = sub.add_parser("one", help="one model in one mode (use torchrun for ddp/tp)")
    one.add_argument("--model", choices=sorted(MODELS), required=True)
    one.add_argument("--mode", choices=["eager", "compile", "ddp", "tp"], required=True)
    one.add_argument("--compile", action="store_true", help="ddp/tp: torch.compile the model")
    one.add_argument("--micro-batch", type=int, default=None, help="per GPU (default per model)")
    one.add_argument("--wait-go", action="store_true", help=argparse.SUPPRESS)
    one.add_argument("--sdpa", choices=SDPA_BACKENDS, default="flash",
                     help="the attention backend (default flash)")
    st = sub.add_parser("suite", help="eager and compile for several models on one GPU")
    st.add_argument("--models", default="gpt2,gpt2-medium,gpt2-large,gpt2-xl")
    st.add_argument("--modes", default="eager,compile")
    st.add_argument("--compile-wait-s", type=float, default=240.0,
                    help="give up on compilations not done this long after they start")
    st.add_argument("--sdpa", default=",".join(SDPA_BACKENDS),
                    help="attention backends to try, each row the best (default: all three)")
    st.add_argument("--compile-jobs", type=int, default=0,
                    help="compile children at once (default 0: the models of one backend); "
                         "each group is timed before the next starts")
    for p in (one, st):
        p.add_argument("--steps", type=int, default=10)
        p.add_argument("--warmup", type=int, default=3)
        p.add_argument("--seq", type=int, default=SEQ)
        p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
        p.add_argument("--vocab", type=int, default=PADDED_VOCAB,
                       help="embedding/lm_head rows (default %d, nanoGPT's padding; %d: none)"
                            % (PADDED_VOCAB, VOCAB))
        p.add_argument("--out", default="", help="also append the JSON rows to this file")
        p.add_argument("--float8", choices=["none", "tensorwise", "rowwise"], default="none",
                       help="torchao float8 training of the block linears (default none: bf16)")
    args = ap.parse_args()
    if args.cmd == "one":
        return run_one(args)
    suite(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
