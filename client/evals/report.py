"""The eval report: a terminal table, a side-by-side divergence, JSON and JUnit XML."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from xml.etree import ElementTree

from weft.activities.tool_replay import call_text
from weft.contract.evals import CaseResult, Divergence, EvalReport, TurnRecord


def _width() -> int:
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def progress_line(done: int, total: int, failed: int, width: int = 30) -> str:
    """`[#####.....] 5/10 cases, 1 failed`."""
    filled = round(width * done / total) if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} cases, {failed} failed"


def render_table(report: EvalReport) -> str:
    """One row per case, the failed checks under it, then the totals."""
    width = _width()
    rows = [f"{'case':<32} {'result':<6} {'checks':>7} {'wall s':>7}", "-" * 55]
    for case in report.cases:
        ok = sum(c.passed for c in case.checks)
        mark = "pass" if case.passed else "FAIL"
        rows.append(
            f"{case.name[:32]:<32} {mark:<6} {ok:>3}/{len(case.checks):<3} {case.wall_seconds:>7.2f}"
        )
        rows += [f"    {line}"[:width] for line in failure_lines(case)]
        if case.divergence is not None:
            rows += side_by_side(case.divergence, width)
    rate = f"{report.pass_rate:.0%}"
    rows.append("-" * 55)
    summary = f"{report.passed_count}/{len(report.cases)} passed ({rate})"
    if report.skipped:
        summary += f", {report.skipped} reused from an earlier run"
    if report.min_pass_rate is not None:
        summary += f"; --min-pass-rate {report.min_pass_rate:g}: {'met' if report.ok else 'MISSED'}"
    rows.append(summary)
    return "\n".join(rows)


def failure_lines(case: CaseResult) -> list[str]:
    """`turn 2: contains 'Paris': answer was '…'` for each failed check."""
    lines = [f"error: {case.error}"] if case.error else []
    for check in case.checks:
        if not check.passed:
            where = f"turn {check.turn}: " if check.turn is not None else ""
            detail = f": {check.detail}" if check.detail else ""
            lines.append(f"{where}{check.name}{detail}")
    return lines


def _turn_text(turn: TurnRecord) -> str:
    calls = "".join(f"\n→ {call_text(c.name, c.arguments)}" for c in turn.tool_calls)
    return f"{turn.answer or '(no answer)'}{calls}"


def side_by_side(where: Divergence, width: int) -> list[str]:
    """The recorded and the new turn in two columns, wrapped to the terminal width."""
    column = max(20, (width - 7) // 2)
    left = _wrap(_turn_text(where.recorded), column)
    right = _wrap(_turn_text(where.actual), column)
    lines = [
        f"    diverges at turn {where.turn} (user: {where.recorded.user[: width - 30]!r})",
        f"    {'recorded':<{column}} | new run",
    ]
    for index in range(max(len(left), len(right))):
        a = left[index] if index < len(left) else ""
        b = right[index] if index < len(right) else ""
        lines.append(f"    {a:<{column}} | {b}")
    return lines


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for raw in text.splitlines() or [""]:
        lines += textwrap.wrap(raw, width) or [""]
    return lines[:12]


def report_json(report: EvalReport) -> str:
    """The report as JSON: the cases with their checks, and the totals."""
    data = report.model_dump(mode="json", by_alias=True)
    data.update(passed=report.passed_count, passRate=report.pass_rate, ok=report.ok)
    return json.dumps(data, indent=2)


def junit_xml(report: EvalReport) -> str:
    """JUnit XML for CI: one testcase per case, a failure element listing what failed."""
    failures = sum(not c.passed and c.error is None for c in report.cases)
    errors = sum(c.error is not None for c in report.cases)
    suite = ElementTree.Element(
        "testsuite",
        name=report.suite,
        tests=str(len(report.cases)),
        failures=str(failures),
        errors=str(errors),
        time=f"{sum(c.wall_seconds for c in report.cases):.3f}",
    )
    for case in report.cases:
        element = ElementTree.SubElement(
            suite,
            "testcase",
            classname=report.suite,
            name=_xml_text(case.name),
            time=f"{case.wall_seconds:.3f}",
        )
        if case.passed:
            continue
        lines = failure_lines(case)
        if case.divergence is not None:
            lines += side_by_side(case.divergence, 100)
        kind = "error" if case.error is not None else "failure"
        message = _xml_text(lines[0]) if lines else "failed"
        problem = ElementTree.SubElement(element, kind, message=message)
        problem.text = _xml_text("\n".join(lines))
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)


# Characters XML 1.0 cannot hold at all, escaped or not (an answer's terminal colours, a
# tool's NUL): written as `\xNN` so the file still parses in CI.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda found: f"\\x{ord(found.group()):02x}", text)
