"""gemm's options for the calls a thread makes: which plans the router may take (bankops.options)."""
import contextlib

import torch

from . import _C  # noqa: F401

NAMES = ("wgmma", "repack", "stream_k", "split_k", "persistent", "prefetch", "refuse_tma", "plan")


@contextlib.contextmanager
def options(**switches):
    """gemm's options for the calls this thread makes inside the block, over the ones it has:

    - ``wgmma``: 16-bit swizzle may take the Hopper kernel (compute capability 9.0);
    - ``repack``: ... after copying misaligned operands into aligned rows;
    - ``stream_k``: float32's 128x256 grid may share its last wave's tiles by k;
    - ``split_k``: a few rows against a weight may split k across a cluster, and a persistent
      Hopper walk its last wave's tiles across pairs of blocks;
    - ``persistent``: the Hopper kernel's unsplit plans may run persistent blocks;
    - ``prefetch``: the few-rows kernel (compute capability 9.0) launches while the kernel before
      it ends (programmatic dependent launch) and asks L2 for the start of its weight meanwhile;
    - ``refuse_tma`` (a test hook): the Hopper launcher acts as if the driver refused its tensor
      maps, so that the call takes the route without them;
    - ``plan``: the key of a plan every call must take (a ``Candidate.key`` of
      ``bankops.gemm_route(a, b).candidates``; 0: the router chooses). A call that has no legal
      plan of that key raises.

    All switches but ``refuse_tma`` are on by default. ``bankops.gemm_route`` and ``bankops.explain``
    plan with them too. Other threads keep their own, and so do autograd's backward passes,
    which run on threads of their own.

    >>> with bankops.options(wgmma=False):
    ...     y = bankops.gemm(a, b)  # mma.sync, not the Hopper kernel
    """
    for name, on in switches.items():
        if name not in NAMES:
            raise TypeError(f"options: unknown option {name!r}; expected one of: {', '.join(NAMES)}")
        if name == "plan":
            if isinstance(on, bool) or not isinstance(on, int) or on < 0:
                raise TypeError(f"options: expected plan=<a candidate's key, an int >= 0>, got {on!r}")
        elif not isinstance(on, (bool, int)) or on not in (0, 1):
            raise TypeError(f"options: expected {name}=True or False, got {on!r}")
    spec = ",".join(f"{k}={int(v) if k == 'plan' else int(bool(v))}" for k, v in switches.items())
    previous = torch.ops.bankops._gemm_options(spec)
    try:
        yield
    finally:
        torch.ops.bankops._gemm_options(previous)
