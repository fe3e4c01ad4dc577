"""Train a small MLP for a few steps with bankops.nn.Linear under torch.compile, beside the
same MLP built from torch.nn.Linear: same initial weights, same batches, same optimizer.
Prints both loss curves, whether they match, and the time per training step of each.

    python examples/train_mlp.py                  # CUDA when present, else a small CPU run
    python examples/train_mlp.py --layout pad --steps 100 --dtype bfloat16
"""
import argparse
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


def batches(steps, batch, sizes, dtype, device):
    """A learnable task: labels are the argmax of a fixed random linear teacher."""
    g = torch.Generator(device="cpu").manual_seed(1234)
    teacher = torch.randn(sizes[0], sizes[-1], generator=g)
    data = []
    for _ in range(steps):
        x = torch.randn(batch, sizes[0], generator=g)
        data.append((x.to(device, dtype), (x @ teacher).argmax(1).to(device)))
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "float64"])
    p.add_argument("--layout", default="swizzle", choices=bankops.LAYOUTS)
    p.add_argument("--steps", type=int, default=None, help="default: 60 on CUDA, 12 on CPU")
    p.add_argument("--batch", type=int, default=None, help="default: 4096 on CUDA, 64 on CPU")
    p.add_argument("--sizes", default=None, help="layer widths, default 1024,2048,2048,10 on CUDA, 32,64,64,10 on CPU")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the time per step (compilation)")
    p.add_argument("--no-compile", action="store_true", help="run eagerly")
    args = p.parse_args(argv)
    cuda = args.device.startswith("cuda")
    steps = args.steps or (60 if cuda else 12)
    # On CUDA big enough that the gemms, not Python and launch overhead, set the time per
    # step (a 512-1024-1024-10 MLP at batch 1024 takes ~2 ms/step either way, all overhead).
    batch = args.batch or (4096 if cuda else 64)
    sizes = [int(s) for s in (args.sizes or ("1024,2048,2048,10" if cuda else "32,64,64,10")).split(",")]
    dtype = getattr(torch, args.dtype)
    # True float32 on both sides: cuBLAS without TF32, bankops' float32 gemm is FFMA.
    torch.backends.cuda.matmul.allow_tf32 = False
    warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores")  # off on purpose

    torch.manual_seed(0)
    ref = make_mlp(torch.nn.Linear, sizes, dtype, args.device)
    mine = make_mlp(bankops.nn.Linear, sizes, dtype, args.device, layout=args.layout)
    mine.load_state_dict(ref.state_dict())
    data = batches(steps, batch, sizes, dtype, args.device)

    ref_loss, ref_t = train(ref, data, not args.no_compile, args.lr)
    my_loss, my_t = train(mine, data, not args.no_compile, args.lr)

    where = torch.cuda.get_device_name(args.device) if cuda else "CPU"
    print(f"device: {where}; torch {torch.__version__}; dtype {args.dtype}; layout {args.layout}; "
          f"MLP {'-'.join(map(str, sizes))}, batch {batch}, {steps} steps of SGD (lr {args.lr}, momentum 0.9); "
          f"{'eager' if args.no_compile else 'torch.compile(fullgraph=True)'}")
    print(f"{'step':>5}  {'torch.nn.Linear':>16}  {'bankops.nn.Linear':>18}  {'rel. diff':>9}")
    rel = [abs(m - r) / max(abs(r), 1e-12) for m, r in zip(my_loss, ref_loss)]
    for i in range(steps):
        if i < 3 or i % max(steps // 10, 1) == 0 or i == steps - 1:
            print(f"{i + 1:>5}  {ref_loss[i]:>16.6f}  {my_loss[i]:>18.6f}  {rel[i]:>9.2e}")
    tol = TOLERANCE[dtype]
    ok = max(rel) <= tol and all(v == v for v in my_loss)
    print(f"loss curves match: {'yes' if ok else 'NO'} (largest relative difference {max(rel):.2e}, "
          f"allowed {tol:.0e}); loss {ref_loss[0]:.4f} -> {ref_loss[-1]:.4f}")
    timed = slice(min(args.warmup, steps - 1), None)
    ref_ms, my_ms = (1e3 * statistics.median(t[timed]) for t in (ref_t, my_t))
    print(f"ms/step (median of steps {timed.start + 1}-{steps}, forward + backward + SGD): "
          f"torch.nn.Linear {ref_ms:.3f}, bankops.nn.Linear {my_ms:.3f} ({my_ms / ref_ms:.2f}x torch's time)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
