"""torch.export -> AOTInductor package -> load -> run, for a model that calls every bankops
operator and linear, with a dynamic batch. The package is compiled by the C++ compiler inductor
is configured with, which defaults to $CXX: a toolchain wrapper that links its own libstdc++
into the package (one GPU image's /opt/gcc/bin/g++) makes loading it end the process with a
segmentation fault, plain torch models included; the system compiler works (README)."""
import pytest
import torch

import bankops
from conftest import DEVICES


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = bankops.nn.Linear(64, 48)

    def forward(self, x):
        y = self.lin(x)
        t = torch.ops.bankops.transpose(y, 0, 1, "swizzle")
        return torch.ops.bankops.reduce_sum(t, 1, False, "pad"), torch.ops.bankops.gemm(x, x.t(), "none")


@pytest.mark.parametrize("device", DEVICES)
def test_aoti_package_round_trip(device, tmp_path):
    model = Model().to(device)
    x = torch.randn(16, 64, device=device)
    batch = torch.export.Dim("batch", min=2, max=1024)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    with torch._inductor.config.patch({"cpp.cxx": (None, "c++")}):
        path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "model.pt2"))
    loaded = torch._inductor.aoti_load_package(path)
    for rows in (16, 37):
        x = torch.randn(rows, 64, device=device)
        for got, want in zip(loaded(x), model(x)):
            assert got.shape == want.shape and got.dtype == want.dtype
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
