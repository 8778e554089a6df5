"""``factory validate --junit FILE``: the gate's verdicts as JUnit XML, so any CI shows which check failed where.

One ``<testsuite>`` per env, one ``<testcase>`` per check (``classname`` the env, ``name`` the check); a failed
required check is a ``<failure>`` whose message is the check's message and whose text is the counterexample;
an optional check that did not pass, or a check the gate skipped, is ``<skipped>``; an env that could not be
read or validated at all is one ``<error>`` test case. Written with the standard library's ElementTree (JUnit
XML is a de-facto format with no schema package worth a dependency); every text from env code has its
control characters escaped first, since XML 1.0 cannot carry most of them at all.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from factory.cli.common import escape_controls, json_text
from schemas.validation import ValidationReport


@dataclass
class EnvOutcome:
    """One env of a ``factory validate`` call: its report, or why there is none."""

    label: str
    report: ValidationReport | None = None
    error: str | None = None


def _text(value: object) -> str:
    return escape_controls(value).replace("\r", "\\r")


def _case(suite: ET.Element, classname: str, name: str, seconds: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=_text(classname), name=_text(name), time=f"{seconds:.3f}")


def junit_xml(outcomes: list[EnvOutcome], suite_name: str = "factory validate") -> str:
    root = ET.Element("testsuites", name=suite_name)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for outcome in outcomes:
        suite = ET.SubElement(root, "testsuite", name=_text(outcome.label))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        report = outcome.report
        if report is None:
            case = _case(suite, outcome.label, "load", 0.0)
            ET.SubElement(case, "error", message=_text(outcome.error or "not validated"), type="input").text = _text(outcome.error or "")
            counts["tests"], counts["errors"] = 1, 1
        else:
            for check in report.checks:
                case = _case(suite, outcome.label, check.name, check.seconds)
                counts["tests"] += 1
                if check.skipped or (not check.passed and not check.required):
                    why = "skipped by the gate" if check.skipped else "optional check, not required"
                    ET.SubElement(case, "skipped", message=_text(f"{why}: {check.message or check.figure}"))
                    counts["skipped"] += 1
                elif not check.passed:
                    failure = ET.SubElement(case, "failure", message=_text(check.message or "check failed"), type=check.name)
                    ce = check.counterexample
                    # JSON with \\uXXXX escapes for control and bidi characters: valid XML, and json.loads gives it back exactly
                    failure.text = json_text(json.dumps(ce.model_dump(mode="json"), indent=2, ensure_ascii=False)) if ce else _text(check.message)
                    counts["failures"] += 1
                ET.SubElement(case, "system-out").text = _text(check.figure)
            suite.set("time", f"{report.seconds:.3f}")
            suite.set("hostname", _text(report.backend))
            seconds += report.seconds
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
