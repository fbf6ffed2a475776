"""The fault-injection suite: one table row per fault (`benchmarks/faults.py`, `make faults`).

Each test names its row with the `fault` fixture and tells what the user saw and what was
logged; with $GA_FAULTS_REPORT set, every test's line (with its pass/fail) is appended there as
JSON, and the benchmark prints them as the table. Tests marked `heavy` (subprocesses killed with
-9, 1,000 fuzzed inputs per entry point, 200 concurrent requests) run only with --run-heavy.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

# the integration fixtures (a session's embedded PostgreSQL, one table per test)
from tests.integration.conftest import (  # noqa: F401
    fake_store,
    pg_home,
    store_settings,
    table_name,
)

REPORT_ENV = "GA_FAULTS_REPORT"


@dataclass
class FaultRow:
    """One line of the fault table."""

    row: int
    fault: str
    saw: str = ""
    logged: str = ""
    control: str = ""
    figures: dict[str, Any] = field(default_factory=dict)

    def record(self, *, saw: str = "", logged: str = "", control: str = "", **figures: Any) -> None:
        self.saw = saw or self.saw
        self.logged = logged or self.logged
        self.control = control or self.control
        self.figures.update(figures)


@pytest.fixture
def fault(request: pytest.FixtureRequest) -> Iterator[Any]:
    """`fault(row, "what goes wrong")` -> the FaultRow this test fills in."""
    rows: list[FaultRow] = []

    def make(row: int, what: str) -> FaultRow:
        rows.append(FaultRow(row, what))
        return rows[-1]

    yield make
    request.node._fault_rows = rows  # written with the outcome by the hook below


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item._fault_passed = report.passed  # type: ignore[attr-defined]
    if report.when != "teardown" or not os.environ.get(REPORT_ENV):
        return
    passed = bool(getattr(item, "_fault_passed", False)) and report.passed
    for row in getattr(item, "_fault_rows", []):
        line = {**asdict(row), "test": item.nodeid, "passed": passed}
        with open(os.environ[REPORT_ENV], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, default=str) + "\n")


def logged(caplog: pytest.LogCaptureFixture, *needles: str, level: int = logging.INFO) -> str:
    """The captured log lines holding any of `needles`, as one short summary for the table."""
    hits = [
        f"{r.levelname} {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= level and any(n in r.getMessage() for n in needles)
    ]
    return " | ".join(h[:140] for h in hits[:3]) or "(nothing)"
