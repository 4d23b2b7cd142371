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

import argparse  # noqa: E402
import pathlib  # noqa: E402

from rich.console import Console  # noqa: E402

from harness import cli  # noqa: E402
from harness.store import Store, StoreError  # noqa: E402


def report(out: pathlib.Path, console: Console, paper: str | None = None) -> int:
    """Figures and the HTML report (plots/) from the stored results only."""
    from plots.report import write_report
    try:
        store = Store(out)
        if store.experiments():
            store.write_index()  # the index follows the files, even after a run that was killed
        path = write_report(store, store.root / "report" / paper, [paper]) if paper else write_report(store)
    except StoreError as exc:
        console.print(f"[red]report: {exc}[/red]")
        return 1
    if path is None:
        console.print(f"[yellow]report: no stored results in {out}[/yellow]")
        return 1
    console.print(f"report: {path}")
    return 0


def explore(argv: list[str], console: Console) -> int:
    """Explore a design space (harness/explore/), then draw its report (plots/explore_report.py)."""
    from harness.explore import command
    from plots.explore_report import write_explore_report
    outcome = command.main(argv, console, cli.kRoot)
    if outcome.summary is not None:
        console.print(f"report: {write_explore_report(outcome.summary)}")
    return outcome.rc


def score(argv: list[str], console: Console) -> int:
    """How well the profile fitted to a backend predicts what that backend measured (plots/score.py)."""
    from rich.table import Table as RichTable

    from plots import score as score_mod
    sp = argparse.ArgumentParser(prog="run_all.py score",
                                 description="score the predictions of the profile fitted to BACKEND "
                                             "(OUT/fitted/BACKEND/) against what BACKEND measured (OUT/BACKEND/)")
    sp.add_argument("--out", default=str(cli.kRoot / "results"), help="the results directory (default results/)")
    sp.add_argument("--backend", default="softnic", help="the measured backend (default softnic)")
    sp.add_argument("--against", metavar="DIR",
                    help="a second run of the same suite: scored against --out, the measurement's own floor")
    args = sp.parse_args(argv)
    out = pathlib.Path(args.out)
    against = pathlib.Path(args.against) if args.against else None
    for d, what in ((out, "--out"), (against, "--against")):
        if d is not None and not (d / args.backend).is_dir():
            console.print(f"[red]score: {what} {d} holds no {args.backend} results ({d / args.backend} does not exist); "
                          f"run the suite first (scripts/run), or name the backend that ran with --backend[/red]")
            return 2
    try:
        doc = score_mod.score(out, args.backend, against)
    except StoreError as exc:
        console.print(f"[red]score: {exc}[/red]")
        return 1
    if not doc["experiments"]:
        console.print(f"[red]score: no experiment in {out} has both {args.backend} points and predictions with the "
                      f"profile fitted to {args.backend} ({doc['fitted']}); fit one (./run_all.py calibrate "
                      f"--backend {args.backend}), then run the suite (scripts/run)[/red]")
        return 1
    table = RichTable(title=f"how well the model knows {args.backend}: the fitted profile "
                            f"{doc['profile'].get('name')} against {out}")
    for c in score_mod.kColumns:
        table.add_column(c, justify="left" if c == "experiment" else "right")
    for r in score_mod.rows(doc):
        table.add_row(*r)
    Console().print(table)
    for w in doc["warnings"]:
        console.print(f"[yellow]warning: {w}[/yellow]")
    console.print(f"score: {score_mod.write(doc, out / 'score')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run (harness/), then report (plots/): the two layers meet only here."""
    argv = list(sys.argv[1:] if argv is None else argv)
    console = Console(stderr=True)
    if argv and argv[0] == "explore":
        return explore(argv[1:], console)
    if argv and argv[0] == "import":
        from harness import imported
        return imported.main(argv[1:], console, cli.kRoot)
    if argv and argv[0] == "score":
        return score(argv[1:], console)
    if argv and argv[0] == "report":
        rp = argparse.ArgumentParser(prog="run_all.py report")
        rp.add_argument("--out", default=str(cli.kRoot / "results"))
        return report(pathlib.Path(rp.parse_args(argv[1:]).out), console)
    outcome = cli.main(argv, console)
    if outcome.report_out is None:
        return outcome.rc
    rrc = report(outcome.report_out, console, outcome.paper)
    return (rrc or outcome.rc) if outcome.paper else (outcome.rc or rrc)


if __name__ == "__main__":
    sys.exit(main())
