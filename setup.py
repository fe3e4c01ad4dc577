"""Builds bankops._C from ops/ and kernels/.

CUDA sources are compiled when nvcc and a CUDA build of torch are both present; otherwise
the CPU reference alone is built. Without TORCH_CUDA_ARCH_LIST the build targets the visible
GPUs, or sm_90 (the H100) without one, instead of every architecture torch knows; 9.0 is
built as 9.0a (wgmma, for the float16/bfloat16 gemm's Hopper kernel).
"""
import glob
import importlib.util
import os

import shutil

ROOT = os.path.dirname(os.path.abspath(__file__))


def find_cuda_home():
    """torch guesses CUDA_HOME from the nvcc on PATH, which may be a wrapper script far
    from the toolkit's headers: prefer a toolkit directory that has both."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    for home in ("/usr/local/cuda",):
        if os.path.exists(os.path.join(home, "bin", "nvcc")) and os.path.exists(os.path.join(home, "include", "cuda_runtime_api.h")):
            return home
    nvcc = shutil.which("nvcc")
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else None


if find_cuda_home():
    os.environ.setdefault("CUDA_HOME", find_cuda_home())

# The system compiler unless BANKOPS_CXX names another, whatever CXX says: an inherited CXX may
# be a wrapper that links its own libstdc++ into the extension. The GPU machine's
# /opt/gcc/bin/g++ does: a _C.so built with it crashed (segmentation fault) at the first error
# it raised, while formatting the message; built with c++ it raises them (H100, 2026-11-25).
os.environ["CXX"] = os.environ.get("BANKOPS_CXX", "c++")

try:
    import torch  # noqa: E402  (after CUDA_HOME: cpp_extension reads it on import)
except ImportError:  # pip's isolated build environment has setuptools, not the installed torch
    raise SystemExit(
        "bankops: building needs torch importable (the extension compiles against the installed torch). "
        "Install torch first, then build without isolation: pip install --no-build-isolation ."
    ) from None
from setuptools import setup  # noqa: E402
from torch.utils import cpp_extension  # noqa: E402


def rel(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def cuda_arch_list():
    """TORCH_CUDA_ARCH_LIST as given; else the visible GPUs' architectures (sm_90 without
    one), with 9.0 built as 9.0a: the Hopper gemm kernel needs sm_90a's wgmma, and sm_90a
    code runs on every compute capability 9.0 device (H100, H200)."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
    archs = [f"{major}.{minor}" for major, minor in caps] or ["9.0"]
    return ";".join("9.0a" if a == "9.0" else a for a in archs)


def toolkit_gaps():
    """-idirafter flags for the headers torch's CUDA glue includes (cusparse.h, cublas_v2.h...)
    that a toolkit of little more than nvcc lacks (CI's /usr/local/cuda): pip's CUDA wheels,
    which a CUDA build of torch installs, hold them in nvidia/cu*/include. Searched after
    every other directory, so the toolkit's own headers still win."""
    if os.path.exists(os.path.join(cpp_extension.CUDA_HOME, "include", "cusparse.h")):
        return []
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    found = [d for root in roots for d in sorted(glob.glob(os.path.join(root, "*", "include")))
             if os.path.exists(os.path.join(d, "cusparse.h"))]
    return [f"-idirafter{d}" for d in found[:1]]


def extension():
    cpu_sources = [s for s in rel("ops/*.cpp") if not s.endswith("_cuda.cpp")]
    cxx = ["-O3"]
    with_cuda = cpp_extension.CUDA_HOME is not None and torch.version.cuda is not None
    if os.environ.get("BANKOPS_CPU_ONLY") == "1":
        with_cuda = False
    if not with_cuda:
        print("bankops: building the CPU reference only (no nvcc or no CUDA build of torch)")
        return cpp_extension.CppExtension("bankops._C", cpu_sources, extra_compile_args={"cxx": cxx})
    archs = cuda_arch_list()
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs
    print(f"bankops: building with CUDA for TORCH_CUDA_ARCH_LIST={archs}")
    nvcc = ["-O3", "-lineinfo"]
    if "9.0a" in [a.split("+")[0].strip() for a in archs.replace(" ", ";").split(";")]:
        nvcc.append("-DBANKOPS_WGMMA")  # kernels/gemm/wgmma.cu: the Hopper gemm kernel
    return cpp_extension.CUDAExtension(
        "bankops._C",
        cpu_sources + rel("ops/*_cuda.cpp") + rel("kernels/*.cu") + rel("kernels/gemm/*.cu"),
        extra_compile_args={"cxx": cxx + toolkit_gaps(), "nvcc": nvcc},
    )


# Name, version, dependencies: pyproject.toml.
setup(ext_modules=[extension()], cmdclass={"build_ext": cpp_extension.BuildExtension})
