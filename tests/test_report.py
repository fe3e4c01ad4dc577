"""The bench's results per GPU (bench/report.py, bench/run.py): a run writes only its own GPU's
files, the committed tables are what the report makes of the committed JSON, and the pieces
that name files, merge runs and show clocks; bench/ab.py's option A/B."""
import filecmp
import hashlib
import json
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")
sys.path.insert(0, BENCH)
import ab  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402

# bench/results.json of the H100's run at ecebd95, moved here unchanged.
H100_SHA256 = "1d7119ede6f73e78ac547ceb9509deaaf45b612f3f72aea961b09b5389d945ba"


def committed_results():
    return [os.path.basename(p) for p in report.results_files(RESULTS)]


def tree(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_a_run_writes_only_its_own_gpus_files(tmp_path, monkeypatch):
    """A (CPU) run labelled with a made-up device name adds that device's json, md and plots to a
    copy of bench/results/ and leaves every file there byte-identical."""
    out = tmp_path / "results"
    shutil.copytree(RESULTS, out)
    before = tree(out)
    made_up = "NVIDIA Made-Up GPU 9000 (SXM)"
    metadata = report.metadata
    monkeypatch.setattr(report, "metadata", lambda name, root: dict(metadata(name, root), device=made_up))
    run.main(["--quick", "--ops", "transpose", "--sections", "ops", "--reps", "5", "--out", str(out)])
    name = report.slug(made_up)
    assert name == "made-up-gpu-9000-sxm"
    added = sorted(set(tree(out)) - set(before))
    assert added == sorted([f"{name}.json", f"{name}.md", f"{name}/summary.png", f"{name}/transpose.png"]), added
    same, differ, missing = filecmp.cmpfiles(RESULTS, out, before, shallow=False)
    assert not differ and not missing and sorted(same) == before
    with open(out / f"{name}.json") as f:
        doc = json.load(f)
    assert doc["device"] == made_up and {r["op"] for r in doc["results"]} == {"transpose"}


def test_the_h100_record_is_the_one_moved():
    with open(os.path.join(RESULTS, "h100-80gb-hbm3.json"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == H100_SHA256


@pytest.mark.parametrize("name", committed_results())
def test_committed_tables_are_what_the_report_makes(name, tmp_path):
    """Each committed <gpu>.md is render()'s output for its JSON (so no table is edited by hand),
    and names only plots that are committed beside it."""
    shutil.copy(os.path.join(RESULTS, name), tmp_path / name)
    report.render(str(tmp_path / name))
    md = name[: -len(".json")] + ".md"
    with open(tmp_path / md) as made, open(os.path.join(RESULTS, md)) as committed:
        assert made.read() == committed.read(), f"bench/results/{md} is stale: python3 bench/report.py"
    assert sorted(os.listdir(tmp_path / name[: -len(".json")])) == sorted(os.listdir(os.path.join(RESULTS, md[:-3])))


def test_slug_names_a_gpu_by_its_device_name():
    assert report.slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert report.slug("NVIDIA H200") == "h200"
    assert report.slug("cpu") == "cpu"


def test_commit_is_the_builds_or_bankops_commit(tmp_path, monkeypatch):
    monkeypatch.delenv("BANKOPS_COMMIT", raising=False)
    assert report.build_commit(str(tmp_path)) == "unknown"  # no build record: never the checkout's git
    (tmp_path / "bankops").mkdir()
    (tmp_path / "bankops" / "_build.json").write_text('{"cuda": false, "commit": "abc1234"}\n')
    assert report.build_commit(str(tmp_path)) == "abc1234"
    monkeypatch.setenv("BANKOPS_COMMIT", "def5678")
    assert report.build_commit(str(tmp_path)) == "def5678"


def row(op="gemm", layout="swizzle", ms=1.0, **kw):
    r = {"op": op, "layout": layout, "dtype": "float32", "shape": [64, 64, 64], "ms": ms, "figure": 1.0,
         "unit": "TFLOP/s", "peer": "torch.matmul", "peer_ms": 1.0, "ratio": 1.0 / ms, "check": "ok"}
    return dict(r, **kw)


def doc(rows, **meta):
    return dict({"device": "NVIDIA X", "date": "2026-12-01", "commit": "abc", "torch": "2.0"}, **meta, results=rows)


def test_merge_keeps_each_process_and_refuses_another_commit():
    ops = doc([row()], sm_clock_mhz={"min": 1.0, "median": 2.0, "max": 3.0})
    decode = doc([row(case="decode", linear_shape=[1, 64, 64])], date="2026-12-02", dram_read_GBps=100.0,
                 dram_read="torch.sum")
    merged = report.merge([decode, ops], "two processes")
    assert [r.get("case") for r in merged["results"]] == [None, "decode"]  # in section order
    assert [part["sections"] for part in merged["runs"]] == [["inference"], ["ops"]]
    assert merged["runs"][1]["sm_clock_mhz"]["median"] == 2.0 and "sm_clock_mhz" not in merged
    assert merged["dram_read_GBps"] == 100.0 and merged["date"] == "2026-12-02" and merged["note"] == "two processes"
    with pytest.raises(SystemExit, match="disagree on commit"):
        report.merge([ops, doc([row()], commit="other")], "mixed")


def test_clocks_show_only_where_the_two_sides_differ():
    assert report.clock_note(row(sm_mhz=1980.0, peer_sm_mhz=1965.0, watts=600.0, peer_watts=580.0)) == ""
    assert report.clock_note(row(sm_mhz=1500.0, peer_sm_mhz=1695.0)) == "1500 / 1695 MHz"
    assert report.clock_note(row(sm_mhz=1980.0, peer_sm_mhz=1980.0, watts=690.0, peer_watts=450.0)) == "690 / 450 W"


def test_summary_takes_each_cases_best_layout():
    rows = [row(layout="none", ms=2.0), row(layout="swizzle", ms=0.5),
            row(shape=[8, 8, 8], layout="none", ms=1.0), row(shape=[8, 8, 8], layout="pad", ms=4.0, check="MISMATCH")]
    (line,) = [ln for ln in report.summary_lines(rows) if "float32" in ln[0]]
    assert line[2] == "1.00-2.00 (1.50)"


def test_render_drops_the_plots_of_sections_a_file_lacks(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc([row(op="transpose", unit="GB/s", ratio_to_copy=0.9, shape=[64, 64])])))
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "models.png").write_bytes(b"an older run's plot")
    report.render(str(path))
    assert sorted(os.listdir(tmp_path / "x")) == ["summary.png", "transpose.png"]


def test_ab_times_an_option_off_and_on(tmp_path, capsys):
    """bench/ab.py: a row a case with the peer, each setting's best layout and time (its faster
    turn), eager times for a decode case, the weight's GB/s; the table and the JSON agree."""
    import torch

    match = "decode 1x4096x4096" if torch.cuda.is_available() else "decode 8x512x256"
    out = tmp_path / "ab.json"
    rows = ab.main(["prefetch", "--sections", "inference", "--match", match, "--reps", "5", "--out", str(out)])
    assert rows and all(r["case"].startswith(match) for r in rows), rows
    for r in rows:
        assert r["off_layout"] in ab.bankops.LAYOUTS and r["on_layout"] in ab.bankops.LAYOUTS, r
        assert min(r["peer_ms"], r["off_ms"], r["on_ms"], r["off_eager_ms"], r["eager_peer_ms"]) > 0, r
        assert r["off_weight_GBps"] * r["off_ms"] == pytest.approx(r["on_weight_GBps"] * r["on_ms"]), r  # one weight
    assert json.loads(out.read_text()) == rows
    table = capsys.readouterr().out
    assert "| case | dtype | peer ms | prefetch=False ms | prefetch=True ms | speedup |" in table, table
    with pytest.raises(SystemExit):
        ab.main(["prefetch", "--sections", "overhead"])
    with pytest.raises(SystemExit):
        ab.main(["plan"])
