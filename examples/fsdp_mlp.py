"""FSDP2 (torch.distributed.fsdp.fully_shard) training of an MLP of bankops.nn.Linear beside the
same MLP of torch.nn.Linear, one process per GPU over NCCL (or per CPU process over gloo):

    torchrun --nproc_per_node=2 examples/fsdp_mlp.py [--steps 30] [--sizes 4096,4096,4096,10]
                                                     [--mixed bfloat16] [--device cpu] [--out FILE.md]

Each Linear layer and the whole model are sharded over the ranks (their parameters DTensors,
all-gathered before each layer's forward and backward, gradients reduce-scattered); --mixed
runs the layers in that dtype with float32 master weights and gradient reduction
(MixedPrecisionPolicy). Both models start from the same weights; each rank draws its own batches
of one task (the same for both models). Rank 0 prints both loss curves (averaged over the
ranks), whether they match, and each model's time per step; --out writes that as markdown.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import TOLERANCE, add_rank_args, batches, make_mlp, rank_report  # noqa: E402  (it puts the checkout on sys.path)

import bankops  # noqa: E402


def shard(model, mesh, mixed):
    """Each Linear layer its own FSDP unit, then the root (fully_shard's usual wrapping)."""
    mp = MixedPrecisionPolicy(param_dtype=mixed, reduce_dtype=torch.float32) if mixed else MixedPrecisionPolicy()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=mp)
    return fully_shard(model, mesh=mesh, mp_policy=mp)


def train(model, data, lr, cuda):
    """Rank-averaged losses and milliseconds per step of SGD with momentum over data."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses, times = [], []
    for x, y in data:
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.detach())
    mean = torch.stack(losses)
    dist.all_reduce(mean)
    return [float(v) for v in mean / dist.get_world_size()], times


def compare(args, rank, device, mesh):
    """Both models on this rank; the report and whether the curves match."""
    sizes = [int(s) for s in args.sizes.split(",")]
    mixed = getattr(torch, args.mixed) if args.mixed else None
    torch.manual_seed(0)  # the same initial weights on every rank
    ref = make_mlp(torch.nn.Linear, sizes, torch.float32, device)
    mine = make_mlp(bankops.nn.Linear, sizes, torch.float32, device, layout=args.layout)
    mine.load_state_dict(ref.state_dict())
    data = batches(args.steps, args.batch, sizes, torch.float32, device, rank=rank)
    cuda = device.type == "cuda"
    ref_loss, ref_ms = train(shard(ref, mesh, mixed), data, args.lr, cuda)
    my_loss, my_ms = train(shard(mine, mesh, mixed), data, args.lr, cuda)
    return rank_report(rank, ref_loss, my_loss, ref_ms, my_ms, TOLERANCE[mixed or torch.float32], args.warmup)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: gloo, the CPU reference")
    p.add_argument("--mixed", default="bfloat16", help="the layers' dtype under MixedPrecisionPolicy ('' for float32)")
    add_rank_args(p)
    args = p.parse_args(argv)
    cuda = args.device == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False  # true float32 on both sides
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    mesh = init_device_mesh(device.type, (world,))
    ok, text = compare(args, rank, device, mesh)
    dist.barrier()  # both ranks past their last collective before either tears gloo's threads down
    dist.destroy_process_group()
    if rank == 0:
        what = torch.cuda.get_device_name(device) if cuda else "CPU"
        head = (f"{world} x {what}, torch {torch.__version__}, {'NCCL' if cuda else 'gloo'}; FSDP2 (fully_shard a layer "
                f"and the root), MLP {args.sizes}, batch {args.batch} per rank, {args.steps} steps of SGD (lr {args.lr}, "
                f"momentum 0.9), {'float32' if not args.mixed else args.mixed + ' layers, float32 master weights'}, "
                f"layout {args.layout}, eager")
        text = f"{head}\n\n```\n{text}```\n"
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(f"## Two GPUs: FSDP2\n\n`torchrun --nproc_per_node={world} examples/fsdp_mlp.py`, "
                        f"{datetime.date.today()}: {text}")
    return 0 if ok else 1


if __name__ == "__main__":
    code = main()
    # Leave without the interpreter's finalization: gloo's worker threads may still hold finished
    # work objects whose tensors need the GIL to free, which aborts the process at exit
    # ("terminate called without an active exception") after everything above has run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
