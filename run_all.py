#!/usr/bin/env python3
"""rdmalab coordinator: experiments -> results -> figures + report. See harness/README.md."""
import os
import sys

kDebianPython = "/usr/bin/python3"

try:
    import matplotlib  # noqa: F401  (the harness needs Debian's python3-yaml, -rich, -matplotlib)
    import rich  # noqa: F401
    import yaml  # noqa: F401
except ImportError:
    # Another python3 (pyenv, venv) is first on PATH: use Debian's, which has the packages.
    if os.path.realpath(sys.executable) != os.path.realpath(kDebianPython) and os.access(kDebianPython, os.X_OK):
        os.execv(kDebianPython, [kDebianPython, os.path.abspath(__file__), *sys.argv[1:]])
    raise SystemExit("run_all.py: python3-yaml, python3-rich and python3-matplotlib are needed "
                     "(scripts/install-deps.sh installs them)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
