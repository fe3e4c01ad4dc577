"""Packaging: a wheel builds without build isolation against the installed torch and declares its
requirements; an unbuilt checkout and an isolated build (no torch) fail with a message that says
what to do."""
import glob
import json
import os
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wheel(tmp_path):
    """pip wheel of the checkout itself, of the kind built in place (bankops/_build.json): ninja finds
    that build's objects in build/ and only links, where a fresh tree would compile for minutes."""
    with open(os.path.join(ROOT, "bankops", "_build.json")) as f:
        cuda = json.load(f)["cuda"]
    env = dict(os.environ, BANKOPS_CPU_ONLY="0" if cuda else "1")
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                          str(tmp_path / "dist"), ROOT], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (wheel,) = glob.glob(str(tmp_path / "dist" / "bankops-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        built = json.loads(z.read("bankops/_build.json"))
    assert any(n.startswith("bankops/_C") and n.endswith(".so") for n in names), names
    assert "bankops/__init__.py" in names and "bankops/nn.py" in names and "bankops/tune.py" in names, names
    tables = {f"bankops/tuning/{os.path.basename(p)}" for p in glob.glob(os.path.join(ROOT, "bankops", "tuning", "*.json"))}
    assert tables <= set(names), tables - set(names)  # the measured tables of gemm plans ship
    assert "Requires-Dist: torch" in meta and "BSD-3-Clause" in meta, meta
    assert built["cuda"] == cuda and built["commit"]


def test_unbuilt_checkout_says_how_to_build(tmp_path):
    """Importing a checkout without bankops/_C names the build command, not a circular import."""
    shutil.copytree(os.path.join(ROOT, "bankops"), tmp_path / "bankops",
                    ignore=shutil.ignore_patterns("*.so", "_build.json", "__pycache__"))
    run = subprocess.run([sys.executable, "-c", "import bankops"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode != 0
    assert "is not built" in run.stderr and "python setup.py build_ext --inplace" in run.stderr, run.stderr
    assert "circular" not in run.stderr, run.stderr


def test_isolated_build_says_no_isolation(tmp_path):
    """setup.py where torch cannot be imported (pip's isolated build environment) exits with the
    command that works."""
    code = ("import os, sys; sys.modules['torch'] = None; sys.argv = ['setup.py', '--name']; "
            "exec(compile(open('setup.py').read(), 'setup.py', 'exec'), "
            "{'__file__': os.path.abspath('setup.py'), '__name__': '__main__'})")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode != 0
    assert "pip install --no-build-isolation ." in run.stderr + run.stdout, run.stderr
