"""Outputs all-or-nothing (issue 23): ``factory analyze`` on a full disk leaves the previous result as it was, or a
folder marked INCOMPLETE, never a mix; a command's final summary file (rollout, train, eval) is written whole or
not at all, last; the coverage chart does not call labelled trajectories "every label NA"."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from tests.conftest import SHARED_TARGETS
from tests.reliability.conftest import CAN_MOUNT, fill, tmpfs

AIRLINE = SHARED_TARGETS / "tau2" / "airline"


def trajectories(tmp_path: Path, n: int = 24) -> Path:
    """Injected τ² airline trajectories (real tasks and tools, known deficits) as our JSONL."""
    if not AIRLINE.is_dir():
        pytest.skip(f"real τ² data not found at {AIRLINE}")
    from factory.analyze.importers import write_jsonl
    from factory.testing.injection import Tau2Domain, build_cases

    cases = build_cases([Tau2Domain.load(AIRLINE)], seed=0)[:n]
    path = tmp_path / "traj.jsonl"
    write_jsonl([c.trajectory for c in cases], path)
    return path


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_analyze_on_a_full_disk_leaves_the_previous_result_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not CAN_MOUNT:
        pytest.skip("needs root and mount for a real full disk")
    source = trajectories(tmp_path)
    with tmpfs(tmp_path / "disk", "6m") as disk:
        out = disk / "analysis"
        first = CliRunner().invoke(app, ["analyze", str(source), "--out", str(out), "--bootstrap", "0"])
        assert first.exit_code == 0, first.output
        before = digest(out)
        assert {"capabilities.json", "report.md", "labels.jsonl", "trajectories.jsonl", "coverage.png"} <= set(before)

        import factory.analyze.report as report_module

        real_chart = report_module.coverage_chart

        def chart_then_disk_full(report, path):  # noqa: ANN001, ANN202 - the disk fills while the outputs are written
            written = real_chart(report, path)
            fill(disk)
            return written

        monkeypatch.setattr(report_module, "coverage_chart", chart_then_disk_full)
        second = CliRunner().invoke(app, ["analyze", str(source), "--out", str(out), "--bootstrap", "0", "--delta", "0.5"])
        (disk / "ballast").unlink()
        assert second.exit_code == 1, second.output
        line = " ".join(second.output.split())
        assert "no space left" in line.lower() and f"nothing in {out} was changed" in line
        assert digest(out) == before  # the previous analysis, whole
        assert [p.name for p in out.iterdir() if p.name.startswith(".") or p.name == "INCOMPLETE.txt"] == []


def test_a_commit_cut_by_sigkill_is_marked_incomplete(tmp_path: Path) -> None:
    """The one window a mix can exist in (between the renames) is marked; a SIGKILL there leaves the mark."""
    import subprocess
    import sys

    from tests.ops.conftest import factory_env

    code = (
        "import os, signal\nfrom factory import outputs\nfrom pathlib import Path\n"
        "real = os.replace\ncalls = []\n"
        "def replace(a, b):\n    real(a, b)\n    calls.append(b)\n    if len(calls) == 1: os.kill(os.getpid(), signal.SIGKILL)\n"
        "outputs.os.replace = replace\n"
        "with outputs.StagedOutputs(Path(os.environ['OUT'])) as s:\n"
        "    s.write_text('a.txt', 'new a'); s.write_text('b.txt', 'new b'); s.commit()\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    (out / "b.txt").write_text("old b")
    done = subprocess.run([sys.executable, "-c", code], env=factory_env(OUT=str(out)), capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert (out / "INCOMPLETE.txt").is_file()  # a mix is possible here, and it says so
    assert {(out / "a.txt").read_text(), (out / "b.txt").read_text()} == {"new a", "old b"}

    from factory.outputs import StagedOutputs

    with StagedOutputs(out) as staged:  # the next writer sweeps the dead one's staging folder and clears the mark
        staged.write_text("a.txt", "3")
        staged.write_text("b.txt", "3")
        staged.commit()
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "b.txt"]


def test_the_coverage_chart_does_not_say_every_label_is_na_when_labels_exist() -> None:
    from factory.analyze.charts import empty_reason
    from schemas.capability import CapabilityFinding, CapabilityReport, CapabilityStats

    def report(labeled: int) -> CapabilityReport:
        stats = CapabilityStats(capability="c1", er_success=None, er_failure=0.0 if labeled else None, gap=None, coverage=0.0,
                                n_failure_labeled=labeled)  # fmt: skip
        finding = CapabilityFinding(name="c1", description="d", stats=stats)
        return CapabilityReport(labeler="offline", runs=1, delta=0.2, coverage_threshold=0.1, min_runs=1, n_trajectories=4,
                                n_successes=0, n_failures=4, candidates=[finding])  # fmt: skip

    assert empty_reason(report(0)) == "Every label is NA: no candidate capability was judged on these trajectories."
    assert empty_reason(report(4)) is None  # four failures labeled PRESENT: a chart (Δ undefined), not "every NA"


def test_a_stale_chart_of_an_earlier_run_is_removed_with_the_rest(tmp_path: Path) -> None:
    source = trajectories(tmp_path, 12)
    out = tmp_path / "analysis"
    out.mkdir()
    (out / "selection_frequency.png").write_bytes(b"stale")  # an earlier LLM run's chart: would mislead now
    (out / "mine.txt").write_text("not ours")
    ran = CliRunner().invoke(app, ["analyze", str(source), "--out", str(out), "--bootstrap", "0", "--json"])
    assert ran.exit_code == 0, ran.output
    names = sorted(p.name for p in out.iterdir())
    assert "selection_frequency.png" not in names and "mine.txt" in names and not [n for n in names if n.startswith(".")]
    assert json.loads((out / "capabilities.json").read_text())["labeler"] == "offline"
    assert os.stat(out / "capabilities.json").st_mode & 0o044  # ordinary, readable files, not mkstemp's 0600


WRITERS = {  # a command's final summary file and the function that writes it, run in a child process
    "rollout summary.json": "from factory.rollout.store import RolloutStore\nRolloutStore(OUT).write_summary(Summary(text=TEXT))",
    "train summary.json": "from trainer.report import write_json\nwrite_json(OUT / 'summary.json', {'text': TEXT})",
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_summary_write_that_fails_midway_leaves_the_previous_summary_whole(tmp_path: Path, writer: str) -> None:
    """A real failure mid-write, no root needed: the child may write at most 4 KiB into any file
    (RLIMIT_FSIZE; the write past it fails with EFBIG, as on a full disk), and the new summary is 64 KiB."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    summary = tmp_path / "summary.json"
    summary.write_text('{"text": "the previous run"}\n')
    code = (
        "import resource, signal, sys\nfrom pathlib import Path\nfrom pydantic import BaseModel\n"
        "class Summary(BaseModel):\n    text: str\n"
        f"OUT, TEXT = Path({str(tmp_path)!r}), 'x' * 65536\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\nresource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n" + "".join(f"    {line}\n" for line in WRITERS[writer].splitlines()) +
        "except OSError as exc:\n    print(exc.errno, file=sys.stderr)\n    sys.exit(3)\n"
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3 and done.stderr.strip() == "27", (done.returncode, done.stderr[-2000:])  # EFBIG: the write failed
    left = summary.read_text()
    assert left == '{"text": "the previous run"}\n', f"{len(left)} bytes: {left[:60]!r}..."  # not a torn part of the new one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary file left behind
