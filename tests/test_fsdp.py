"""FSDP2 (torch.distributed.fsdp.fully_shard): an MLP of bankops.nn.Linear, its parameters sharded
over two processes, trains as the same MLP of torch.nn.Linear does (examples/fsdp_mlp.py under
torchrun, bfloat16 layers over float32 master weights): on the CPU over gloo, and on two GPUs
over NCCL."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_example(*args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(ROOT, "examples", "fsdp_mlp.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_fsdp_cpu_gloo_matches_torch():
    run = run_example("--device", "cpu", "--steps", "6", "--warmup", "1", "--batch", "64", "--sizes", "64,96,80,10")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "loss curves match: yes" in run.stdout and "gloo; FSDP2" in run.stdout, run.stdout


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs (FSDP2 over NCCL)")
def test_fsdp_two_gpus_matches_torch():
    run = run_example("--steps", "8", "--warmup", "2", "--batch", "512", "--sizes", "256,512,512,10")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "loss curves match: yes" in run.stdout and "NCCL; FSDP2" in run.stdout, run.stdout
