"""Modules built on bankops' operators."""
import torch

from . import linear
from ._layouts import LAYOUTS, unknown_layout

__all__ = ["Linear"]


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` whose matrix product is ``bankops.gemm`` with a chosen ``layout``.

    Same parameters, initialisation and state dict as ``torch.nn.Linear`` (it is one), so
    it replaces it in a model or loads its weights. Inputs may have any number of leading
    dims. The forward is ``torch.ops.bankops.linear``: one gemm over x's rows with
    ``weight.t()`` read in place and the bias added in its epilogue; the backward runs
    bankops.gemm (dx = dy @ W, dW = dy.t() @ x) and bankops.reduce_sum (the bias) with the
    same layout.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, layout="swizzle"):
        if layout not in LAYOUTS:
            raise ValueError(unknown_layout("Linear", layout))
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.layout = layout

    @classmethod
    def from_torch(cls, linear, layout="swizzle"):
        """A bankops Linear sharing ``linear``'s parameters (no copy)."""
        new = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta", layout=layout)
        new.weight = linear.weight
        new.bias = linear.bias
        return new

    def forward(self, x):
        # Without this a wrong width would reshape into the wrong number of rows silently.
        # (A plain raise: dynamo cannot trace a torch._check message that formats x.)
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise RuntimeError(
                f"Linear: input has shape {tuple(x.shape)}; expected its last dim to be in_features={self.in_features}"
            )
        return linear(x, self.weight, self.bias, self.layout)

    def extra_repr(self):
        return f"{super().extra_repr()}, layout={self.layout!r}"
