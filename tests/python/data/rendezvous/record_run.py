#!/usr/bin/python3
"""Records the rendezvous exchange of one real rdmalab-bench run, for test_rendezvous_replay.py.

Starts harness/rendezvous.py's server and a line-logging TCP proxy in front of it, then runs
one rdmalab-bench server and one client on a softnic fabric with the command line the harness
gives a point (contract 1: --rendezvous, --role, --index, --peers, the token in
$RDMALAB_RENDEZVOUS_TOKEN), pointed at the proxy. Every line each way is logged in the order
the proxy saw it, which keeps every reply after the requests that caused it. Written as the
exchange format the replay test reads: after bye or fail (whose reply is kept, though a
participant that fails does not wait for it) the server's end of the connection ("eof"), then
the participant's ("close").

  tests/python/data/rendezvous/record_run.py --bin-dir build/bin \
      --out tests/python/data/rendezvous/bench-lat-run.jsonl [MODE [FLAG ...]]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
from typing import Any

kRoot = pathlib.Path(__file__).resolve().parents[4]
sys.path.insert(0, str(kRoot))

from harness.rendezvous import RendezvousServer  # noqa: E402

kRunTimeoutS = 60
kDefaultRun = ["lat", "--verb", "write", "--size", "8", "--iters", "2000", "--timeout", "20"]


class Recorder:
    """A TCP proxy that logs every line, per connection, named ROLE/INDEX from its hello."""

    def __init__(self, upstream: str):
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.lock = threading.Lock()
        self.events: list[tuple[int, str, str, Any]] = []   # (connection number, kind, ..., message)
        self.names: dict[int, str] = {}
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _log(self, conn: int, kind: str, msg: Any = None) -> None:
        with self.lock:
            if kind == "send" and msg.get("op") == "hello":
                self.names[conn] = f"{msg.get('role')}/{msg.get('index')}"
            self.events.append((conn, kind, msg))

    def _accept(self) -> None:
        n = 0
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for args in ((client, server, n, "send"), (server, client, n, "recv")):
                t = threading.Thread(target=self._pump, args=args, daemon=True)
                t.start()
                self.threads.append(t)
            n += 1

    def _pump(self, src: socket.socket, dst: socket.socket, conn: int, kind: str) -> None:
        reader = src.makefile("rb")
        for line in reader:
            self._log(conn, kind, json.loads(line))
            try:
                dst.sendall(line)
            except OSError:
                break
        self._log(conn, "close" if kind == "send" else "eof")
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def steps(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        last_op: dict[str, str] = {}
        ends: dict[str, list[str]] = {}     # connection -> "close"/"eof" in the order logged
        for conn, kind, msg in self.events:
            name = self.names.get(conn, f"connection-{conn}")
            if kind == "send":
                last_op[name] = msg.get("op")
                out.append({"point": 0, "conn": name, "send": msg})
            elif kind == "recv":
                out.append({"point": 0, "conn": name, "recv": msg})
            else:
                ends.setdefault(name, []).append(kind)
                out.append({"point": 0, "conn": name, "end": True})
        # A connection's close and the server's end of it may be logged in either order. Where
        # the logged end comes last, a replay reads the server's end if the server closes first
        # (after bye, fail or a refused hello), then closes.
        steps: list[dict[str, Any]] = []
        remaining = {name: len(kinds) for name, kinds in ends.items()}
        for step in out:
            if not step.pop("end", False):
                steps.append(step)
                continue
            name = step["conn"]
            remaining[name] -= 1
            if remaining[name]:
                continue
            kinds = ends[name]
            if "eof" in kinds and (kinds[0] == "eof" or last_op.get(name) in ("bye", "fail")):
                steps.append({"point": 0, "conn": name, "eof": True})
            if "close" in kinds:
                steps.append({"point": 0, "conn": name, "close": True})
        return steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", type=pathlib.Path, default=kRoot / "build" / "bin")
    ap.add_argument("--out", type=pathlib.Path, required=True)
    ap.add_argument("run", nargs=argparse.REMAINDER, help=f"mode and flags (default: {' '.join(kDefaultRun)})")
    args = ap.parse_args()
    run = args.run or kDefaultRun
    softnic, bench = args.bin_dir / "softnic", args.bin_dir / "rdmalab-bench"
    fabric = f"rdl-record-{os.getpid()}"
    subprocess.run([softnic, "fabric", "create", "--fabric", fabric, "--devices", "2"], check=True)
    try:
        with RendezvousServer(host="127.0.0.1") as rv:
            rec = Recorder(rv.address)
            procs, argvs = [], []
            for i, role in enumerate(("server", "client")):
                argv = [str(bench), run[0], "--rendezvous", rec.address, "--role", role, "--index", "0",
                        "--peers", "1", "--ib-dev", f"softnic{i}", "--ib-port", "1", *run[1:], "--out_json"]
                argvs.append(argv)
                procs.append(subprocess.Popen([str(softnic), "run", "--fabric", fabric, "--", *argv],
                                              env={**os.environ, "RDMALAB_RENDEZVOUS_TOKEN": rv.token},
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            for p in procs:
                _, err = p.communicate(timeout=kRunTimeoutS)
                if p.returncode != 0:
                    print(f"a role exited {p.returncode}: {err}", file=sys.stderr)
                    return 1
            rec.listener.close()
            for t in rec.threads:
                t.join(5)
            steps = rec.steps()
            token = rv.token
    finally:
        subprocess.run([softnic, "fabric", "rm", "--fabric", fabric])
    bench_argv = [" ".join(["rdmalab-bench", *a[1:]]) for a in argvs]
    head = {"exchange": "rdmalab-rendezvous-exchange/1", "token": token,
            "source": "recorded by tests/python/data/rendezvous/record_run.py: harness/rendezvous.py behind a "
                      "logging proxy, one real rdmalab-bench run on softnic: " + " & ".join(bench_argv)}
    with open(args.out, "w") as f:
        f.write(json.dumps(head) + "\n")
        for s in steps:
            f.write(json.dumps(s) + "\n")
    print(f"{args.out}: {len(steps)} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
