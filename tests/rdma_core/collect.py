#!/usr/bin/python3
"""Runs rdma-core's provider test suite in this process and writes every test's outcome
as JSON (schema rdmalab-rdma-core-outcomes/1).

Loads the suite the way its own run_tests.py does (the `tests` package from its
__init__.py, options through its args_parser), so it sees exactly the tests and options
upstream's runner would; only the result object differs, one that records the skip
reason of each test instead of printing it. run_suite.py runs this under `softnic run`.

Usage: collect.py SUITE_DIR OUT_JSON [run_tests.py options, e.g. --dev softnic0]
"""
from __future__ import annotations

import json
import sys
import unittest
from importlib.machinery import SourceFileLoader
from pathlib import Path

kSchemaVersion = "rdmalab-rdma-core-outcomes/1"


class RecordingResult(unittest.TextTestResult):
    """unittest's verbose text result plus an outcome per test id."""

    def __init__(self, stream, descriptions, verbosity):
        super().__init__(stream, descriptions, verbosity)
        self.outcomes: dict[str, dict[str, str]] = {}

    def _record(self, test, outcome: str, detail: str = "") -> None:
        self.outcomes[test.id()] = {"outcome": outcome, "detail": detail}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", str(reason))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", self.failures[-1][1])

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self.errors[-1][1])

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "expected_failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "unexpected_success")


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    suite_dir, out_path = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    if not (suite_dir / "__init__.py").is_file():
        print(f"collect.py: {suite_dir} holds no __init__.py; expected rdma-core's unpacked tests directory",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(suite_dir))
    sys.argv = [sys.argv[0], *sys.argv[3:]]
    from args_parser import parser  # rdma-core's, from suite_dir
    parser.parse_args()
    package = SourceFileLoader("tests", str(suite_dir / "__init__.py")).load_module()
    suite = unittest.defaultTestLoader.loadTestsFromModule(package)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=RecordingResult)
    result = runner.run(suite)
    out_path.write_text(json.dumps({"schema_version": kSchemaVersion, "tests": result.outcomes},
                                   indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
