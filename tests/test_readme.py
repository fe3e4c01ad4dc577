"""README.md stays short and true: its Python blocks run on the CPU, every file it names exists, and
its results table is what bench/report.py makes of the results files it links."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import report  # noqa: E402

with open(os.path.join(ROOT, "README.md")) as f:
    README = f.read()
# A repository path: folders and a file with an extension (bench/results/h200.md, scripts/test.sh),
# or a top-level file the README names.
PATH = re.compile(r"(?<![\w./:-])((?:[\w.-]+/)+[\w.-]+\.\w+|(?:[\w-]+/)+|LICENSE|setup\.py|pyproject\.toml)(?![\w/])")


def test_short():
    assert README.count("\n") <= 170


def test_python_blocks_run_on_the_cpu(capsys):
    """Every ```python block, in order, in one namespace, as a reader pastes them."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    assert "wavefronts" in capsys.readouterr().out  # bankops.explain printed its table


def test_every_file_named_exists():
    """Each path the README names is in the repository, but for what the commands write there (.gitignore)."""
    with open(os.path.join(ROOT, ".gitignore")) as f:
        outputs = {line.strip().strip("/") for line in f if line.strip()}
    named = {p for p in PATH.findall(README) if "<" not in p and p.rstrip("/") not in outputs}
    missing = sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p.rstrip("/"))))
    assert not missing, f"README.md names files that do not exist: {missing}"
    assert "bench/results/h200/summary.png" in named and "bench/design_notes.md" in named


def test_results_table_is_the_reports():
    linked = re.findall(r"\[[^]]+\]\((bench/results/[\w.-]+)\.md\) \|", README)
    assert linked[0] == "bench/results/h200", "the current GPU comes first"
    assert [os.path.relpath(p, ROOT)[:-len(".json")] for p in report.results_files()] == linked, \
        "python3 bench/report.py --readme: the latest run's GPU first"
    table = report.readme_table([os.path.join(ROOT, p + ".json") for p in linked])
    assert table in README, "README.md's results table is stale: python3 bench/report.py --readme"
