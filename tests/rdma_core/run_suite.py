#!/usr/bin/python3
"""rdma-core's own provider test suite against softnic, as a test tier.

Unpacks Debian's copy of the suite (python3-pyverbs: /usr/share/doc/rdma-core/tests,
partly gzipped) into the build tree, runs it under `softnic run` on a fabric of its own
(server and client resources on softnic0, as upstream's `run_tests.py --dev softnic0`),
and judges the outcome of every test: a failure or an error fails the tier, and so does a
skip whose (test, reason) is not listed in skip_reasons.yaml. Prints the counts (pass,
skip by reason, fail, error) and writes them as JSON with --out_json.

Usage: run_suite.py --link ib|roce --softnic CLI --work DIR [--suite DIR] [--reasons FILE]
                    [--fabric NAME] [--timeout-s S] [--out_json FILE]
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from harness.checker import Checker  # noqa: E402
from harness.yamlloc import ConfigError, load  # noqa: E402

kReasonsSchema = "rdmalab-rdma-core-skips/1"
kOutcomesSchema = "rdmalab-rdma-core-outcomes/1"
kSummarySchema = "rdmalab-rdma-core-summary/1"
kLinks = ("ib", "roce")
kDefaultSuiteDir = Path("/usr/share/doc/rdma-core/tests")
kDefaultTimeoutS = 300.0
kProbeTimeoutS = 30.0  # one `softnic run --netdevs -- true` takes milliseconds


@dataclass(frozen=True)
class ReasonGroup:
    why: str
    pattern: re.Pattern
    links: frozenset[str]
    tests: frozenset[str]
    without_netdevs: bool  # allowed only when the suite runs without `softnic run --netdevs`

    def allows(self, test: str, reason: str, link: str, netdevs: bool) -> bool:
        return (link in self.links and test in self.tests and self.pattern.fullmatch(reason) is not None
                and not (self.without_netdevs and netdevs))


def load_reasons(path: Path) -> list[ReasonGroup]:
    """skip_reasons.yaml, strictly: unknown keys, bad regexes and duplicate tests are errors."""
    doc = load(path)
    ck = Checker(str(path))
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}:1: top level must be a mapping with schema_version and groups")
    ck.keys(doc, "top level", ["schema_version", "groups"], ["schema_version", "groups"])
    if doc.get("schema_version") != kReasonsSchema:
        ck.error(doc.line_of("schema_version"), "schema_version",
                 f"{doc.get('schema_version')!r} is not supported; valid: {kReasonsSchema!r}")
    groups: list[ReasonGroup] = []
    raw_groups = doc.get("groups")
    if not isinstance(raw_groups, list):
        ck.error(doc.line_of("groups"), "groups", "must be a list of reason groups")
        ck.raise_if_any()
    for i, g in enumerate(raw_groups):
        where = f"groups[{i}]"
        line = raw_groups.line_of(i)
        if not isinstance(g, dict):
            ck.error(line, where, "must be a mapping with why, reason or reason_pattern, tests")
            continue
        ck.keys(g, where, ["why", "reason", "reason_pattern", "links", "tests", "without_netdevs"], ["why", "tests"])
        without_netdevs = g.get("without_netdevs", False)
        if not isinstance(without_netdevs, bool):
            ck.error(g.line_of("without_netdevs"), where, f"without_netdevs {without_netdevs!r} must be true or false")
            continue
        if ("reason" in g) == ("reason_pattern" in g):
            ck.error(g.line, where, "needs exactly one of reason (the exact text) and reason_pattern (a regex)")
            continue
        text = g.get("reason", g.get("reason_pattern"))
        try:
            pattern = re.compile(re.escape(text) if "reason" in g else text)
        except (re.error, TypeError) as exc:
            ck.error(g.line, where, f"reason_pattern {text!r} is not a regular expression: {exc}")
            continue
        links = g.get("links", list(kLinks))
        if not isinstance(links, list) or not links or any(l not in kLinks for l in links):
            ck.error(g.line_of("links"), where, f"links {links!r} must be a non-empty list of {', '.join(kLinks)}")
            continue
        tests = g.get("tests")
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
            ck.error(g.line_of("tests"), where, "tests must be a non-empty list of test ids (tests.MODULE.CLASS.METHOD)")
            continue
        seen = collections.Counter(tests)
        for t, n in seen.items():
            if n > 1:
                ck.error(g.line_of("tests"), where, f"test {t} listed {n} times")
        groups.append(ReasonGroup(str(g["why"]), pattern, frozenset(links), frozenset(tests), without_netdevs))
    ck.raise_if_any()
    return groups


def unpack_suite(source: Path, dest: Path) -> Path:
    """A fresh copy of the suite under dest/tests, every *.gz decompressed beside it."""
    if not (source / "run_tests.py").is_file():
        raise SystemExit(f"run_suite: {source} holds no run_tests.py; install python3-pyverbs "
                         "(scripts/install-deps.sh) or pass --suite DIR")
    target = dest / "tests"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    for packed in target.glob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    return target


def _softnic_run(args, *views: str) -> list[str]:
    return [str(args.softnic), "run", "--fabric", args.fabric, "--devices", "2", "--link", args.link, *views, "--"]


def netdevs_refusal(args) -> str | None:
    """Why `softnic run --netdevs` cannot run here (a user other than root where the kernel
    allows no user namespaces), or None."""
    probe = subprocess.run(_softnic_run(args, "--netdevs") + ["true"], capture_output=True, text=True,
                           timeout=kProbeTimeoutS)
    return None if probe.returncode == 0 else (probe.stderr.strip() or f"exit {probe.returncode}")


def run_collector(args, suite: Path) -> dict[str, dict[str, str]]:
    outcomes_path = args.work / f"outcomes-{args.link}.json"
    outcomes_path.unlink(missing_ok=True)
    log_path = args.work / f"suite-{args.link}.log"
    # --netdevs gives each device the interface (and so the address) the rdma_cm tests look for.
    views = ["--netdevs"] if args.netdevs else []
    cmd = [*_softnic_run(args, *views), sys.executable, str(HERE / "collect.py"), str(suite), str(outcomes_path), "--dev", "softnic0"]
    with log_path.open("w") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout_s,
                                  cwd=args.work, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"run_suite: the suite did not finish within {args.timeout_s:.0f} s; log: {log_path}")
    if proc.returncode != 0 or not outcomes_path.is_file():
        tail = log_path.read_text()[-3000:]
        raise SystemExit(f"run_suite: `{' '.join(cmd)}` exited {proc.returncode}; log {log_path} ends:\n{tail}")
    doc = json.loads(outcomes_path.read_text())
    if doc.get("schema_version") != kOutcomesSchema:
        raise SystemExit(f"run_suite: {outcomes_path} has schema {doc.get('schema_version')!r}, "
                         f"expected {kOutcomesSchema!r}")
    return doc["tests"]


def judge(outcomes: dict[str, dict[str, str]], groups: list[ReasonGroup], link: str,
          netdevs: bool) -> tuple[dict, list[str]]:
    counts = collections.Counter(v["outcome"] for v in outcomes.values())
    skips_by_reason = collections.Counter()
    problems: list[str] = []
    unlisted: dict[str, list[str]] = collections.defaultdict(list)
    for test, v in sorted(outcomes.items()):
        outcome, detail = v["outcome"], v["detail"]
        if outcome == "skip":
            group = next((g for g in groups if g.allows(test, detail, link, netdevs)), None)
            if group is None:
                unlisted[detail].append(test)
            else:
                skips_by_reason[f"{group.why}: {detail}"] += 1
        elif outcome != "pass":
            problems.append(f"{outcome.upper()}: {test}\n{detail}")
    for reason, tests in unlisted.items():
        listing = "\n".join(f"      - {t}" for t in tests)
        problems.append(f"SKIP not listed in skip_reasons.yaml for link {link}: {reason!r}; if it is a fair "
                        f"reason, add a group:\n  - why: ...\n    reason: {json.dumps(reason)}\n"
                        f"    links: [{link}]\n    tests:\n{listing}")
    summary = {
        "schema_version": kSummarySchema,
        "link": link,
        "netdevs": netdevs,
        "tests": len(outcomes),
        "pass": counts["pass"],
        "skip": counts["skip"],
        "fail": counts["fail"] + counts["unexpected_success"],
        "error": counts["error"],
        "skips_by_reason": dict(sorted(skips_by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
        "unlisted_skips": sum(len(t) for t in unlisted.values()),
    }
    return summary, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", required=True, choices=kLinks)
    ap.add_argument("--softnic", required=True, type=Path, help="the softnic command (build/bin/softnic)")
    ap.add_argument("--work", required=True, type=Path, help="directory for the unpacked suite and logs")
    ap.add_argument("--suite", type=Path, default=kDefaultSuiteDir, help=f"default {kDefaultSuiteDir}")
    ap.add_argument("--reasons", type=Path, default=HERE / "skip_reasons.yaml")
    ap.add_argument("--fabric", default=None, help="softnic fabric name (default rdma-core-LINK)")
    ap.add_argument("--timeout-s", type=float, default=kDefaultTimeoutS)
    ap.add_argument("--out_json", type=Path)
    args = ap.parse_args()
    args.fabric = args.fabric or f"rdma-core-{args.link}"
    refusal = netdevs_refusal(args)
    args.netdevs = refusal is None
    if refusal:
        print(f"run_suite: `softnic run --netdevs` is refused here ({refusal}), so the rdma_cm tests skip for want "
              "of a netdev (allowed only without --netdevs; run as root, or allow user namespaces, to run them)")
    if args.timeout_s <= 0:
        ap.error(f"--timeout-s {args.timeout_s} must be positive")
    try:
        groups = load_reasons(args.reasons)
    except ConfigError as exc:
        print(f"run_suite: {exc}", file=sys.stderr)
        return 2
    args.work = args.work.resolve()
    args.softnic = args.softnic.resolve()
    if not args.softnic.is_file():
        ap.error(f"--softnic {args.softnic} does not exist; build the softnic target (and softnic_ibverbs) first")
    args.work.mkdir(parents=True, exist_ok=True)
    suite = unpack_suite(args.suite, args.work)
    outcomes = run_collector(args, suite)
    summary, problems = judge(outcomes, groups, args.link, args.netdevs)
    subprocess.run([str(args.softnic), "fabric", "rm", "--fabric", args.fabric], capture_output=True, timeout=30)

    print(f"rdma-core tests on softnic ({args.link}): {summary['tests']} tests, {summary['pass']} pass, "
          f"{summary['skip']} skip, {summary['fail']} fail, {summary['error']} error")
    for reason, n in summary["skips_by_reason"].items():
        print(f"  skip {n:4d}  {reason}")
    if args.out_json:
        args.out_json.write_text(json.dumps(summary, indent=2) + "\n")
    for p in problems:
        print(p, file=sys.stderr)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
