"""Train an MLP for a few steps with bankops.nn.Linear under torch.compile, beside the
same MLP built from torch.nn.Linear: same initial weights, same batches, same optimizer.
Prints both loss curves, whether they match, and the time per training step of each, for
each dtype asked for.

    python examples/train_mlp.py                  # CUDA: float32 and bfloat16; else a small CPU run
    python examples/train_mlp.py --layout pad --steps 100 --dtypes bfloat16
    python examples/train_mlp.py --tune           # first tune the plans of one step's gemm calls
"""
import argparse
import contextlib
import io
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bankops  # noqa: E402

# Relative loss difference allowed per step: both runs round differently (bankops rounds
# x @ w.t() before adding the bias, cuBLAS fuses it and sums in another order), and SGD
# carries those differences forward.
TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-9, torch.bfloat16: 5e-2, torch.float16: 2e-2}


def make_mlp(linear, sizes, dtype, device, **kw):
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        if i:
            layers.append(torch.nn.GELU())
        layers.append(linear(n_in, n_out, device=device, dtype=dtype, **kw))
    return torch.nn.Sequential(*layers)


def batches(steps, batch, sizes, dtype, device, rank=0):
    """A learnable task: labels are the argmax of a fixed random linear teacher. Drawn on the
    device (the CUDA default's 60 batches of 8192 x 4096 would take the CPU a while). rank: a
    data-parallel process's own batches of the same task."""
    g = torch.Generator(device=device).manual_seed(1234)
    teacher = torch.randn(sizes[0], sizes[-1], generator=g, device=device)
    if rank:
        g.manual_seed(1234 + rank)
    data = []
    for _ in range(steps):
        x = torch.randn(batch, sizes[0], generator=g, device=device)
        data.append((x.to(dtype), (x @ teacher).argmax(1)))
    return data


def train(model, data, compile_, lr):
    """Losses (as floats) and seconds per step of SGD with momentum over `data`."""
    fwd = torch.compile(model, fullgraph=True) if compile_ else model
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    cuda = data[0][0].is_cuda
    losses, times = [], []
    for x, y in data:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(fwd(x).float(), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if cuda:
            end.record()
            times.append((start, end))
        else:
            times.append(time.perf_counter() - t0)
    if cuda:
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) / 1e3 for s, e in times]
    return [float(v) for v in losses], times


DTYPES = ("float32", "bfloat16", "float16", "float64")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtypes", "--dtype", default=None,
                   help=f"comma-separated, of {','.join(DTYPES)}; default float32,bfloat16 on CUDA, float32 on CPU")
    p.add_argument("--layout", default="swizzle", choices=bankops.LAYOUTS)
    p.add_argument("--steps", type=int, default=None, help="default: 60 on CUDA, 12 on CPU")
    p.add_argument("--batch", type=int, default=None, help="default: 8192 on CUDA, 64 on CPU")
    p.add_argument("--sizes", default=None,
                   help="layer widths, default 4096,4096,4096,4096,10 on CUDA, 32,64,64,10 on CPU")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the time per step (compilation)")
    p.add_argument("--no-compile", action="store_true", help="run eagerly")
    p.add_argument("--tune", action="store_true",
                   help="first record one step's gemm calls (bankops.tune.record) and, on CUDA, time their plans "
                        "into this GPU's table in the user's tuning directory (bankops.tune)")
    args = p.parse_args(argv)
    cuda = args.device.startswith("cuda")
    args.dtypes = (args.dtypes or ("float32,bfloat16" if cuda else "float32")).split(",")
    if not set(args.dtypes) <= set(DTYPES):
        p.error(f"--dtypes: choose from {', '.join(DTYPES)}")
    args.steps = args.steps or (60 if cuda else 12)
    # On CUDA big enough that the gemms, not Python and launch overhead, set the time per
    # step (a 512-1024-1024-10 MLP at batch 1024 takes ~2 ms/step either way, all overhead);
    # 4096-wide layers at 8192 rows are a 7-8B transformer's projections at 8192 tokens.
    args.batch = args.batch or (8192 if cuda else 64)
    args.sizes = [int(s) for s in (args.sizes or ("4096,4096,4096,4096,10" if cuda else "32,64,64,10")).split(",")]
    return args


def compare(args, dtype_name):
    """Trains both MLPs in dtype_name and prints their losses; returns whether the losses match
    and each one's median ms per step."""
    dtype, sizes, batch, steps = getattr(torch, dtype_name), args.sizes, args.batch, args.steps
    torch.manual_seed(0)
    ref = make_mlp(torch.nn.Linear, sizes, dtype, args.device)
    mine = make_mlp(bankops.nn.Linear, sizes, dtype, args.device, layout=args.layout)
    mine.load_state_dict(ref.state_dict())
    data = batches(steps, batch, sizes, dtype, args.device)

    ref_loss, ref_t = train(ref, data, not args.no_compile, args.lr)
    my_loss, my_t = train(mine, data, not args.no_compile, args.lr)

    where = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "CPU"
    print(f"device: {where}; torch {torch.__version__}; dtype {dtype_name}; layout {args.layout}; "
          f"MLP {'-'.join(map(str, sizes))}, batch {batch}, {steps} steps of SGD (lr {args.lr}, momentum 0.9); "
          f"{'eager' if args.no_compile else 'torch.compile(fullgraph=True)'}")
    ok = losses_match(ref_loss, my_loss, TOLERANCE[dtype])
    timed = slice(min(args.warmup, steps - 1), None)
    ref_ms, my_ms = (1e3 * statistics.median(t[timed]) for t in (ref_t, my_t))
    print(f"ms/step (median of steps {timed.start + 1}-{steps}, forward + backward + SGD): "
          f"torch.nn.Linear {ref_ms:.3f}, bankops.nn.Linear {my_ms:.3f} ({my_ms / ref_ms:.2f}x torch's time)")
    return ok, ref_ms, my_ms


def tune_step(args, dtype_name):
    """One training step of the bankops MLP, recorded: the distinct gemm calls it makes (forward and
    backward), printed, and on CUDA each one's plans timed into the GPU's table (bankops.tune)."""
    from bankops import tune

    dtype = getattr(torch, dtype_name)
    model = make_mlp(bankops.nn.Linear, args.sizes, dtype, args.device, layout=args.layout)
    x, y = batches(1, args.batch, args.sizes, dtype, args.device)[0]
    with tune.record() as calls:
        torch.nn.functional.cross_entropy(model(x).float(), y).backward()
    print(f"{dtype_name}: a step makes {len(calls)} distinct gemm calls: {', '.join(c.shape for c in calls)}")
    if args.device.startswith("cuda"):
        tune(calls)
    else:
        print("  (timing their plans takes a GPU: bankops.tune(calls) there)")


def add_rank_args(p):
    """The options the data-parallel examples share (ddp_mlp.py, fsdp_mlp.py)."""
    p.add_argument("--layout", default="swizzle", choices=bankops.LAYOUTS)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=8192, help="rows per rank and step")
    p.add_argument("--sizes", default="4096,4096,4096,10")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out", default=None, help="rank 0 writes its report here as markdown")


def rank_report(rank, ref_loss, my_loss, ref_ms, my_ms, tol, warmup):
    """A data-parallel example's report on one rank: both loss curves, whether they match (tol),
    and each model's milliseconds a step (the median after `warmup` steps); (ok, the text)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = losses_match(ref_loss, my_loss, tol)
        steps = len(ref_ms)
        timed = slice(min(warmup, steps - 1), None)
        r, m = statistics.median(ref_ms[timed]), statistics.median(my_ms[timed])
        print(f"ms/step (rank {rank}, median of steps {timed.start + 1}-{steps}): torch.nn.Linear {r:.3f}, "
              f"bankops.nn.Linear {m:.3f} ({m / r:.2f}x torch's time)")
    return ok, out.getvalue()


def losses_match(ref_loss, my_loss, tol):
    """Prints both loss curves (some steps); whether each step's relative difference is within tol."""
    steps = len(ref_loss)
    print(f"{'step':>5}  {'torch.nn.Linear':>16}  {'bankops.nn.Linear':>18}  {'rel. diff':>9}")
    rel = [abs(m - r) / max(abs(r), 1e-12) for m, r in zip(my_loss, ref_loss)]
    for i in range(steps):
        if i < 3 or i % max(steps // 10, 1) == 0 or i == steps - 1:
            print(f"{i + 1:>5}  {ref_loss[i]:>16.6f}  {my_loss[i]:>18.6f}  {rel[i]:>9.2e}")
    ok = max(rel) <= tol and all(v == v for v in my_loss)
    print(f"loss curves match: {'yes' if ok else 'NO'} (largest relative difference {max(rel):.2e}, "
          f"allowed {tol:.0e}); loss {ref_loss[0]:.4f} -> {ref_loss[-1]:.4f}")
    return ok


def main(argv=None):
    args = parse(argv)
    # True float32 on both sides: cuBLAS without TF32, bankops' float32 gemm is FFMA.
    torch.backends.cuda.matmul.allow_tf32 = False
    warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores")  # off on purpose
    if args.tune:
        for name in args.dtypes:
            tune_step(args, name)
    results = {name: compare(args, name) for name in args.dtypes}
    if len(results) > 1:
        print("\nms/step, forward + backward + SGD:")
        for name, (ok, ref_ms, my_ms) in results.items():
            print(f"  {name:<9} torch.nn.Linear {ref_ms:.3f}, bankops.nn.Linear {my_ms:.3f} "
                  f"({my_ms / ref_ms:.2f}x torch's time); loss curves match: {'yes' if ok else 'NO'}")
    return 0 if all(ok for ok, _, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
