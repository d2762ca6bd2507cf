"""Run schemathesis over every operation of a live server's OpenAPI document, positive and negative.

Why not `@schema.parametrize()`: the servers are started by fixtures over loopback and the example
budget is shared across operations to keep CI time bounded; driving each operation's strategy with
hypothesis directly gives both, and lets the run count requests and statuses for the report.
"""
from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode


@dataclass
class FuzzReport:
    requests: int = 0
    by_status: collections.Counter = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"{self.requests} requests, statuses {dict(sorted(self.by_status.items()))}"


def fuzz_schema(base_url: str, examples_per_mode: int, seed: int = 11, headers: dict | None = None) -> FuzzReport:
    """Every operation, `examples_per_mode` positive and as many negative cases, all checks."""
    schema = schemathesis.openapi.from_url(base_url + "/openapi.json")
    report = FuzzReport()
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(operation.as_strategy(generation_mode=mode))
            @settings(max_examples=examples_per_mode, deadline=None, database=None, derandomize=False,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate],
                      print_blob=True)
            def run(case):
                response = case.call(base_url=base_url, headers=headers)
                report.requests += 1
                report.by_status[response.status_code] += 1
                case.validate_response(response)  # every check, positive_data_acceptance included

            try:
                _seeded(run, seed)()
            except Unsatisfiable:
                continue  # an operation without parameters has no negative cases
            except BaseException as exc:  # noqa: BLE001 - schemathesis' FailureGroup is a BaseExceptionGroup
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                report.failures.append(f"{operation.label} [{mode.value}]: {str(exc)[:3000]}")
    return report


def _seeded(test, seed: int):
    from hypothesis import seed as hypothesis_seed

    return hypothesis_seed(seed)(test)


def dump(report: FuzzReport) -> str:
    return json.dumps({"requests": report.requests, "by_status": report.by_status}, default=str)
