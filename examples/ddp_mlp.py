"""DistributedDataParallel training of an MLP of bankops.nn.Linear beside the same MLP of
torch.nn.Linear, one process per GPU over NCCL:

    torchrun --nproc_per_node=2 examples/ddp_mlp.py [--dtypes float32,bfloat16] [--steps 30]
                                                    [--sizes 4096,4096,4096,10] [--out FILE.md]

Both models start from the same weights; each rank draws its own batches of one task (the
same batches for both models) and DDP averages the gradients over the ranks. Rank 0 prints
both loss curves (the loss averaged over the ranks), whether they match, and each model's
time per step (CUDA events, median after warm-up); --out writes that report as markdown.
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import TOLERANCE, add_rank_args, batches, make_mlp, rank_report  # noqa: E402  (it puts the checkout on sys.path)

import bankops  # noqa: E402


def train(model, data, lr):
    """Rank-averaged losses and milliseconds per step of DDP + SGD with momentum over data."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses, events = [], []
    for x, y in data:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        end.record()
        losses.append(loss.detach())
        events.append((start, end))
    torch.cuda.synchronize()
    mean = torch.stack(losses)
    dist.all_reduce(mean)
    return [float(v) for v in mean / dist.get_world_size()], [s.elapsed_time(e) for s, e in events]


def compare(args, dtype_name, rank, device):
    """Both models on this rank; the report (rank 0) and whether the curves match."""
    dtype = getattr(torch, dtype_name)
    sizes = [int(s) for s in args.sizes.split(",")]
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    ref = make_mlp(torch.nn.Linear, sizes, dtype, device)
    mine = make_mlp(bankops.nn.Linear, sizes, dtype, device, layout=args.layout)
    mine.load_state_dict(ref.state_dict())
    data = batches(args.steps, args.batch, sizes, dtype, device, rank=rank)
    ref_loss, ref_ms = train(DDP(ref, device_ids=[device.index]), data, args.lr)
    my_loss, my_ms = train(DDP(mine, device_ids=[device.index]), data, args.lr)
    return rank_report(rank, ref_loss, my_loss, ref_ms, my_ms, TOLERANCE[dtype], args.warmup)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", default="float32,bfloat16")
    add_rank_args(p)
    args = p.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False  # true float32 on both sides
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    report, ok = [], True
    for name in args.dtypes.split(","):
        good, text = compare(args, name, rank, device)
        ok &= good
        report.append(f"### {name}\n\n```\n{text}```\n")
    dist.destroy_process_group()
    if rank == 0:
        head = (f"{world} x {torch.cuda.get_device_name(device)}, torch {torch.__version__}, NCCL; MLP {args.sizes}, "
                f"batch {args.batch} per rank, {args.steps} steps of SGD (lr {args.lr}, momentum 0.9), "
                f"layout {args.layout}, eager")
        text = f"{head}\n\n" + "\n".join(report)
        print(text)
        if args.out:  # bench/ddp.md
            with open(args.out, "w") as f:
                f.write(f"## Two GPUs: DistributedDataParallel\n\n`torchrun --nproc_per_node={world} "
                        f"examples/ddp_mlp.py`, {datetime.date.today()}: {text}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
