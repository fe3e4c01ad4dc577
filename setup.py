"""Builds bankops._C from ops/ and kernels/, and records what it built in bankops/_build.json.

BANKOPS_CPU_ONLY=1 builds the CPU reference alone, BANKOPS_CPU_ONLY=0 the CUDA sources too
(an error without nvcc and a CUDA build of torch); unset, the CUDA sources are compiled where
both are present. Without TORCH_CUDA_ARCH_LIST the build targets the visible GPUs, or sm_90
(the H100, H200) without one, instead of every architecture torch knows; 9.0 is built as
9.0a (wgmma, for the float16/bfloat16 gemm's Hopper kernel).
"""
import glob
import importlib.util
import json
import os
import shutil
import subprocess

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
# be a wrapper that links its own libstdc++ into the extension, which then crashes at its first
# error while formatting the message.
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


def with_cuda():
    """Whether to compile the CUDA sources (BANKOPS_CPU_ONLY, else whether nvcc and a CUDA torch exist)."""
    can = cpp_extension.CUDA_HOME is not None and torch.version.cuda is not None
    asked = os.environ.get("BANKOPS_CPU_ONLY")
    if asked == "0" and not can:
        raise SystemExit("bankops: BANKOPS_CPU_ONLY=0 asks for the CUDA sources, but "
                         + ("torch is a CPU build" if torch.version.cuda is None else "no nvcc was found (CUDA_HOME)"))
    return can and asked != "1"


def extension(cuda):
    cpu_sources = [s for s in rel("ops/*.cpp") if not s.endswith("_cuda.cpp")]
    cxx = ["-O3", "-g0"]  # Python's own flags add -g: debug info would double the compile time and the size
    if not cuda:
        print("bankops: building the CPU reference only", flush=True)
        return cpp_extension.CppExtension("bankops._C", cpu_sources, extra_compile_args={"cxx": cxx})
    archs = cuda_arch_list()
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs
    print(f"bankops: building with CUDA for TORCH_CUDA_ARCH_LIST={archs}", flush=True)
    nvcc = ["-O3", "-lineinfo"]
    if "9.0a" in [a.split("+")[0].strip() for a in archs.replace(" ", ";").split(";")]:
        nvcc.append("-DBANKOPS_WGMMA")  # kernels/gemm/wgmma.cu: the Hopper gemm kernel
    return cpp_extension.CUDAExtension(
        "bankops._C",
        cpu_sources + rel("ops/*_cuda.cpp") + rel("kernels/*.cu") + rel("kernels/gemm/*.cu"),
        extra_compile_args={"cxx": cxx + toolkit_gaps(), "nvcc": nvcc},
    )


def commit():
    """BANKOPS_COMMIT, else this checkout's commit (with -dirty for uncommitted changes), else
    "unknown": a tree copied inside another repository does not take that one's commit."""
    if os.environ.get("BANKOPS_COMMIT"):
        return os.environ["BANKOPS_COMMIT"]
    git = ["git", "-C", ROOT]
    try:
        top = subprocess.run(git + ["rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True)
        if os.path.realpath(top.stdout.strip()) != os.path.realpath(ROOT):
            return "unknown"
        head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


CUDA = with_cuda()


class BuildExtension(cpp_extension.BuildExtension):
    """torch's build_ext (ninja compiles what changed), with each kind of build's objects (CPU
    only, CUDA) in their own folder, so that switching kinds relinks instead of recompiling, and
    _build.json beside the library: its kind and commit."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = os.path.join(self.build_temp, "cuda" if CUDA else "cpu")

    def build_extension(self, ext):
        super().build_extension(ext)
        self.record = os.path.join(os.path.dirname(self.get_ext_fullpath(ext.name)), "_build.json")
        with open(self.record, "w") as f:
            json.dump({"cuda": CUDA, "commit": commit()}, f)
            f.write("\n")

    def run(self):
        super().run()  # builds in build_lib; in place, then copies the library into bankops/
        if self.inplace:
            shutil.copy(self.record, os.path.join(ROOT, "bankops", "_build.json"))


# Name, version, dependencies: pyproject.toml.
setup(ext_modules=[extension(CUDA)], cmdclass={"build_ext": BuildExtension})
