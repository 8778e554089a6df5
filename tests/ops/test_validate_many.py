"""CI validating generated envs (issue 23): ``factory validate`` on many files or a folder in one call, one summary
table, one exit code, a report per env, and JUnit XML with one test case per env and check."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from factory.validation.gate import CHECK_NAMES
from tests.ops.conftest import FAST_GATE, TINY, UNSOLVED, run_factory


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("envs")
    (folder / "good_env.py").write_text(TINY)
    (folder / "unsolved_env.py").write_text(UNSOLVED)
    (folder / "_helper.py").write_text("raise SystemExit('never read: not an env module')\n")
    return folder


@pytest.fixture(scope="module")
def validated(envs: Path, tmp_path_factory: pytest.TempPathFactory):
    reports = tmp_path_factory.mktemp("out") / "reports"
    missing = envs.parent / "missing_env.py"
    ran = run_factory("validate", str(envs), str(missing), "--sandbox", "bwrap", "--report", str(reports),
                      "--junit", str(reports / "junit.xml"), *FAST_GATE)  # fmt: skip
    return ran, reports, envs, missing


@pytest.mark.slow
def test_a_folder_and_a_file_in_one_call_one_table_one_exit_code(validated) -> None:
    ran, reports, envs, missing = validated
    assert ran.code == 2, ran.stderr[-2000:]  # an input could not be read: bad input wins over a failed env
    assert "factory validate: 3 envs" in ran.stdout and "1 of 3 passed" in ran.stdout
    for name in ("good_env.py", "unsolved_env.py", "missing_env.py"):
        assert name in ran.stdout
    assert "_helper" not in ran.stdout + ran.stderr
    assert f"cannot read env file {missing}" in " ".join(ran.lines)
    assert sorted(p.name for p in reports.iterdir()) == ["good_env.json", "junit.xml", "unsolved_env.json"]
    assert json.loads((reports / "good_env.json").read_text())["passed"] is True
    failed = json.loads((reports / "unsolved_env.json").read_text())
    assert "solvability" in [c["name"] for c in failed["checks"] if not c["passed"]]


@pytest.mark.slow
def test_junit_has_a_case_per_env_and_check_with_the_counterexample(validated) -> None:
    ran, reports, envs, missing = validated
    root = ET.parse(reports / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {str(envs / "good_env.py"), str(envs / "unsolved_env.py"), str(missing)}
    good, bad = suites[str(envs / "good_env.py")], suites[str(envs / "unsolved_env.py")]
    assert [c.get("name") for c in good.iter("testcase")] == CHECK_NAMES and good.get("failures") == "0"
    failures = {c.get("name"): c.find("failure") for c in bad.iter("testcase") if c.find("failure") is not None}
    report = json.loads((reports / "unsolved_env.json").read_text())
    failed = [c for c in report["checks"] if not c["passed"] and c["required"]]
    assert list(failures) == [c["name"] for c in failed] and bad.get("failures") == str(len(failed))
    solvability = next(c for c in failed if c["name"] == "solvability")
    assert failures["solvability"].get("message") == solvability["message"]
    assert json.loads(failures["solvability"].text) == solvability["counterexample"]  # the counterexample is the failure text
    assert solvability["counterexample"]["seed"] % 3 == 1
    error = suites[str(missing)].find("testcase/error")
    assert error is not None and "cannot read env file" in error.get("message")
    assert root.get("tests") == str(2 * len(CHECK_NAMES) + 1) and root.get("errors") == "1"


def test_junit_escapes_what_xml_cannot_carry() -> None:
    from factory.cli.junit import EnvOutcome, junit_xml
    from schemas.validation import CheckResult, Counterexample, ValidationConfig, ValidationReport

    hostile = "\x1b[31mred\x07 \u202eevil\x9b"
    check = CheckResult(name="robustness", passed=False, message=hostile, counterexample=Counterexample(seed=3, detail=hostile))
    report = ValidationReport(source_sha256="0" * 64, backend="bwrap", passed=False, checks=[check], config=ValidationConfig(), seconds=1.0)
    text = junit_xml([EnvOutcome("x.py", report=report)])
    failure = ET.fromstring(text.split("\n", 1)[1]).find("testsuite/testcase/failure")  # parses: no raw control characters
    assert failure is not None and failure.get("message") == "\\x1b[31mred\\x07 \\u202eevil\\x9b"
    assert json.loads(failure.text)["seed"] == 3


@pytest.mark.parametrize("case", ["empty folder", "report is a file"])
def test_bad_many_env_input_is_refused_before_any_gate(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "envs"
    folder.mkdir()
    if case == "empty folder":
        ran = run_factory("validate", str(folder))
        assert ran.code == 2 and ran.lines == [f"error: {folder}: no env modules (.py files) in that folder"]
    else:
        (folder / "a.py").write_text(TINY)
        (folder / "b.py").write_text(TINY)
        (tmp_path / "r.json").write_text("")
        ran = run_factory("validate", str(folder), "--report", str(tmp_path / "r.json"))
        assert ran.code == 2 and "is a file; with several envs pass a folder" in ran.lines[-1]
