"""Two GPUs: DistributedDataParallel training with bankops.nn.Linear matches torch.nn.Linear's
(examples/ddp_mlp.py under torchrun, two processes over NCCL, float32 and bfloat16)."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs (DistributedDataParallel over NCCL)")
def test_ddp_two_gpus_matches_torch():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(ROOT, "examples", "ddp_mlp.py"), "--steps", "8", "--warmup", "2", "--batch", "512",
           "--sizes", "256,512,512,10"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.count("loss curves match: yes") == 2, run.stdout
