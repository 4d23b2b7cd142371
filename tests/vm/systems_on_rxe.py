#!/usr/bin/python3
"""Every key-value system of rdmalab-kv, rdmalab-bench's sequencer designs and its
scatter-gather forwarder (sgbatch) between rxe0 and rxe1 in the Soft-RoCE VM, each with its
value checks, a fixed operation count and a deadline sized for TCG.

The guest has no Python, so the cases run from a generated bash script there
(scripts/rxe-vm) and the guest log is checked here afterwards: every role exited 0 with a
schema-valid document; every kv system completed clients x iters operations, GETs and PUTs
both, with every GET's value checked and none wrong; every sequencer design handed out each
integer exactly once; sgbatch checked every byte it forwarded. Prints each case's
operations, rate and the counters where a provider's behaviour shows (retries, torn READs,
lock retries), and writes them as JSON.

  tests/vm/systems_on_rxe.py [--build DIR] [--out FILE] [--only REGEX]
  tests/vm/systems_on_rxe.py --on softnic ...     the same cases on softnic (RoCE link), for
                                                  the side-by-side of tests/vm/README.md
  tests/vm/systems_on_rxe.py --guest-script FILE  write the guest script only
  tests/vm/systems_on_rxe.py --guest-log FILE     check the log of a run made elsewhere
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_VERSION = "rdmalab-vm-systems/1"
KV_SCHEMA = ROOT / "kv" / "schema" / "rdmalab-kv.schema.json"
BENCH_SCHEMA = ROOT / "benchmarks" / "schema" / "rdmalab-bench.schema.json"

# The workload every kv system runs: 30% PUTs over a small key space, so that GETs read
# keys that PUTs rewrote during the run and a stale or torn value shows.
KV_KEYS = 2000
KV_CLIENTS = 2
KV_WINDOW = 4
KV_ITERS = 3000          # per client: 6000 operations per system
KV_PUT_FRACTION = 0.3
KV_VALUE_BYTES = 32
SEQUENCER_INTEGERS = 20000
SEQUENCER_CLIENTS = 2
SGBATCH_PACKETS = 8000
SGBATCH_SGES = 8
SGBATCH_PACKET_BYTES = 256
ECHO_MESSAGES = 1000
# Under TCG on a 2-core host a case takes 1-8 s idle, 3-18 s loaded (all 19 with the boot:
# 1.5-4.5 min); the deadlines leave room for a loaded host without letting a hung pair
# stall the tier.
CASE_DEADLINE_S = 90
VM_TIMEOUT_S = 900
FIRST_PORT = 21000


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    program: str            # "kv" or "bench"
    args: tuple[str, ...]   # given to every role
    clients: int = 1        # client processes

    @property
    def kind(self) -> str:
        if self.program == "kv":
            return "kv"
        return self.args[0]  # the bench mode


def kv_case(case_id: str, system: str, *extra: str) -> Case:
    return Case(case_id, "kv", ("--system", system, "--keys", str(KV_KEYS), "--put-fraction", str(KV_PUT_FRACTION),
                                "-s", str(KV_VALUE_BYTES), "--clients", str(KV_CLIENTS), "-w", str(KV_WINDOW),
                                "-n", str(KV_ITERS), "--warmup", "0", "--validate", *extra))


def sequencer_case(design: str) -> Case:
    return Case(f"sequencer-{design}", "bench",
                ("sequencer", "--design", design, "--count", str(SEQUENCER_INTEGERS), "-t", "64", "-I", "16",
                 *(("-Q", "1") if design == "atomics" else ())), clients=SEQUENCER_CLIENTS)


CASES = [
    # HERD's cache log is sized down from 64 MB: the keys take well under 1 MB and a
    # smaller region registers faster under TCG.
    kv_case("herd", "herd", "--log-mb", "4"),
    kv_case("herd-batching", "herd", "--log-mb", "4", "--batching"),
    kv_case("herd-3-queues", "herd", "--log-mb", "4", "--batching", "-q", "3"),
    kv_case("pilaf", "pilaf"),
    kv_case("pilaf-full", "pilaf", "--store", "full"),
    kv_case("farm", "farm"),
    kv_case("farm-full", "farm", "--store", "full"),
    kv_case("farm-var", "farm-var"),
    kv_case("farm-var-full", "farm-var", "--store", "full"),
    kv_case("drtm", "drtm"),
    kv_case("drtm-write", "drtm-write"),
    kv_case("hydradb", "hydradb"),
    *(sequencer_case(d) for d in ("herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0", "atomics")),
    Case("sgbatch", "bench", ("sgbatch", "--sge", str(SGBATCH_SGES), "-s", str(SGBATCH_PACKET_BYTES), "-t", "32",
                              "-n", str(SGBATCH_PACKETS), "--warmup", "0", "--validate")),
    # HERD's transport at its limit: SEND requests and answers over UD of one full packet
    # (rxe's MTU is 1024 B on the veth's 1500).
    Case("echo-ud-mtu", "bench", ("echo", "--request", "send", "-c", "UD", "--response", "send",
                                  "--response-connection", "UD", "-s", "@MTU@", "-t", "4", "-n", str(ECHO_MESSAGES),
                                  "--warmup", "0", "--validate")),
]

# Counters of a kv client row that show how the provider behaved (0 on a clean run, but
# for the ones a race explains); reported, not asserted.
KV_BEHAVIOUR = ("retries", "stale_answers", "torn_rereads", "lock_retries", "backpressure_waits",
                "checksum_failures")

_GUEST_PRELUDE = r"""#!/bin/bash
# Generated by tests/vm/systems_on_rxe.py: each case between markers, its documents after.
# DEV0/DEV1 (server/client device), SERVER_IP, GID_INDEX and `counters` (the provider's
# counters, printed before and after each case) come from the header before it; @MTU@ in
# a command stands for the client port's active MTU in bytes.
set -u
MTU=$(ibv_devinfo -d "$DEV1" | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p')
listening() {  # port: poll the listen table, bounded (no fixed sleep)
  local _
  for _ in $(seq 1 2000); do ss -ltn | grep -q ":$1 " && return 0; sleep 0.02; done
  return 1
}
run_case() {  # id port deadline_s client_processes -- program args... (@ROLE@: server or client)
  local id=$1 port=$2 deadline=$3 clients=$4 i
  shift 5
  local common=("${@/#@MTU@/$MTU}" -p "$port" -x "$GID_INDEX" --timeout "$deadline")
  echo "=== BEGIN $id"
  rm -f /tmp/case-*.json /tmp/case-*.out
  counters > /tmp/case-counters-before
  local start=${EPOCHREALTIME/./}
  timeout -k 5 $((deadline + 10)) "${common[@]/#@ROLE@/server}" -d "$DEV0" --peers "$clients" --cpus 0 \
    --out_json=/tmp/case-server.json > /tmp/case-server.out 2>&1 &
  local server=$! pids=()
  listening "$port" || echo "server did not listen on port $port"
  for ((i = 0; i < clients; i++)); do
    timeout -k 5 $((deadline + 10)) "${common[@]/#@ROLE@/client}" -d "$DEV1" --index "$i" --cpus 1 \
      --out_json=/tmp/case-client$i.json "$SERVER_IP" > /tmp/case-client$i.out 2>&1 &
    pids+=($!)
  done
  local status=() rc
  wait "$server"; status+=("server=$?")
  for ((i = 0; i < clients; i++)); do wait "${pids[$i]}"; rc=$?; status+=("client$i=$rc"); done
  local ms=$(( (${EPOCHREALTIME/./} - start) / 1000 ))
  echo "=== COUNTERS before"; cat /tmp/case-counters-before
  echo "=== COUNTERS after"; counters
  for f in /tmp/case-*.out; do
    [[ -s $f ]] && { echo "--- $(basename "$f" .out) output"; tail -n 40 "$f"; }
  done
  for f in /tmp/case-*.json; do
    [[ -s $f ]] && { echo "=== JSON $(basename "$f" .json | sed 's/^case-//')"; cat "$f"; echo; }
  done
  echo "=== END $id ${status[*]} ms=$ms"
}
"""


def guest_script(cases: list[Case], kv: str, bench: str) -> str:
    lines = [_GUEST_PRELUDE]
    for port, case in enumerate(cases, FIRST_PORT):
        # rdmalab-kv takes its role first; rdmalab-bench its mode, the role following from
        # whether a server host is given.
        argv = [kv, "@ROLE@", *case.args] if case.program == "kv" else [bench, *case.args]
        lines.append(f"run_case {case.id} {port} {CASE_DEADLINE_S} {case.clients} -- "
                     + " ".join(shlex.quote(a) for a in argv))
    return "\n".join(lines) + "\n"


# Where the guest script finds its devices: the VM's (scripts/rxe-vm exports them) or a
# softnic fabric's.
# softnic's counters are per fabric, read by the host (not compared here).
RXE_DEVICES = ('DEV0=$RXE_DEV0 DEV1=$RXE_DEV1 SERVER_IP=$RXE_IP0 GID_INDEX=$RXE_GID_INDEX\n'
               'counters() { rdma statistic show; ip -s -o link show type veth; }\n')
SOFTNIC_DEVICES = "DEV0=softnic0 DEV1=softnic1 SERVER_IP=127.0.0.1 GID_INDEX=0\ncounters() { :; }\n"


class CheckError(Exception):
    pass


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise CheckError(what)


# rxe's port counters that count traffic, not events (the rest: retransmissions, duplicates,
# RNR NAKs, sequence errors, send errors).
RXE_TRAFFIC_COUNTERS = ("sent_pkts", "rcvd_pkts", "rdma_sends", "rdma_recvs")


def counter_events(text: str) -> dict[str, int]:
    """Per device and counter, what rose between the before and after sections: rxe's event
    counters (`rdma statistic show`) and the veth pair's errors and drops (`ip -s -o link`)."""
    sections = dict(re.findall(r"^=== COUNTERS (before|after)\n(.*?)(?=^=== |^--- |\Z)", text, re.M | re.S))

    def values(section: str) -> dict[str, int]:
        found = {}
        for dev, pairs in re.findall(r"^link (\S+)/\d+ (.*)$", section, re.M):
            items = pairs.split()
            found.update({f"{dev}.{k}": int(v) for k, v in zip(items[::2], items[1::2])
                          if k not in RXE_TRAFFIC_COUNTERS})
        for dev, rest in re.findall(r"^\d+: (\w+)@\S+ (.*)$", section, re.M):
            for direction in ("RX", "TX"):
                m = re.search(direction + r":[^\\]*\\\s+\d+\s+\d+\s+(\d+)\s+(\d+)", rest)
                if m:
                    found[f"{dev}.{direction.lower()}_errors"] = int(m.group(1))
                    found[f"{dev}.{direction.lower()}_dropped"] = int(m.group(2))
        return found

    before, after = values(sections.get("before", "")), values(sections.get("after", ""))
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def parse_log(log: str) -> dict[str, dict]:
    """Each case's block: its statuses, milliseconds, documents by role, role output and the
    provider's counter events."""
    blocks = {}
    for m in re.finditer(r"^=== BEGIN (\S+)\n(.*?)^=== END \1 ([^\n]*) ms=(\d+)$", log, re.M | re.S):
        body = m.group(2)
        docs, outputs = {}, body.split("=== JSON ", 1)[0]
        for d in re.finditer(r"^=== JSON (\S+)\n(.*?)(?=^=== JSON |\Z)", body, re.M | re.S):
            try:
                docs[d.group(1)] = json.loads(d.group(2))
            except json.JSONDecodeError as e:
                docs[d.group(1)] = {"unparsable": f"{e}: {d.group(2)[:200]!r}"}
        statuses = dict(item.split("=", 1) for item in m.group(3).split())
        blocks[m.group(1)] = {"statuses": statuses, "ms": int(m.group(4)), "docs": docs, "output": outputs,
                              "provider_events": counter_events(outputs)}
    return blocks


def schema_errors(doc: dict, validator) -> list[str]:
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]


def check_kv(case: Case, docs: dict) -> dict:
    client, server = docs["client0"], docs["server"]
    row, srow, v = client["results"][0], server["results"][0], client["validation"]
    expect(v.get("enabled") and v.get("ok"), f"values: {v}")
    expect(v["wrong_key"] == 0 and v["corrupt"] == 0, f"wrong values: {v}")
    expect(v["checked"] > 0, f"no GET was checked: {v}")
    expect(row["completed_all"] >= KV_CLIENTS * KV_ITERS, f"{row['completed_all']} operations completed, "
           f"expected {KV_CLIENTS * KV_ITERS}")
    expect(row["gets"] > 0 and row["puts"] > 0, f"not a mixed workload: {row['gets']} GETs, {row['puts']} PUTs")
    expect(row["unanswered"] == 0 and row["puts_refused"] == 0,
           f"{row['unanswered']} unanswered, {row['puts_refused']} PUTs refused")
    expect(srow["ops"] == row["ops"], f"server counted {srow['ops']} operations, the client {row['ops']}")
    # Every key is preloaded into the READ-based stores; HERD's MICA cache is lossy by design.
    if "herd" not in case.id:
        expect(row["get_misses"] == 0, f"{row['get_misses']} GETs missed a preloaded key")
    expect(row["mops"] > 0, "no rate")
    return {"ops": row["ops"], "gets": row["gets"], "puts": row["puts"], "checked": v["checked"],
            "wrong": v["wrong_key"] + v["corrupt"], "mops": row["mops"], "lat_us_p50": row.get("lat_us_p50"),
            "get_misses": row["get_misses"],
            "behaviour": {k: row[k] for k in KV_BEHAVIOUR if row.get(k)}}


def check_sequencer(case: Case, docs: dict) -> dict:
    server = docs["server"]
    srow = server["results"][0]
    check = srow["sequencer_check"]
    expected = {"ok": True, "integers": SEQUENCER_INTEGERS, "duplicates": 0, "missing": 0,
                "count": SEQUENCER_INTEGERS}
    expect(check == expected, f"sequencer_check {check}, expected {expected}")
    expect(server["validation"]["ok"] is True, f"validation {server['validation']}")
    received = sum(docs[f"client{i}"]["results"][0]["integers_received"] for i in range(case.clients))
    expect(received == SEQUENCER_INTEGERS, f"clients received {received} integers, expected {SEQUENCER_INTEGERS}")
    expect(srow["mops"] > 0, "no rate")
    rows = [docs[f"client{i}"]["results"][0] for i in range(case.clients)]
    behaviour = {k: sum(r.get(k, 0) for r in rows) for k in ("local_duplicates", "retries") if
                 any(r.get(k) for r in rows)}
    return {"ops": srow["ops"], "checked": check["integers"], "wrong": check["duplicates"] + check["missing"],
            "mops": srow["mops"], "lat_us_p50": rows[0].get("lat_us_p50"), "behaviour": behaviour}


def check_sgbatch(case: Case, docs: dict) -> dict:
    row, v = docs["client0"]["results"][0], docs["client0"]["validation"]
    expect(v.get("ok") is True and v["bad_bytes"] == 0, f"validation {v}")
    mtu = docs["client0"]["environment"]["device"]["active_mtu_bytes"]
    wire_packets = -(-SGBATCH_SGES * SGBATCH_PACKET_BYTES // mtu)
    expect(row["mtu_bytes"] == mtu and row["wire_packets_per_wr"] == wire_packets,
           f"{row['wire_packets_per_wr']} wire packets of {row['mtu_bytes']} B per WR; the port's MTU is {mtu} B")
    expect(v["checked_messages"] >= SGBATCH_PACKETS // SGBATCH_SGES, f"{v['checked_messages']} messages checked")
    expect(row["ops"] >= SGBATCH_PACKETS and row["packets_per_wr"] == SGBATCH_SGES,
           f"{row['ops']} packets in WRs of {row['packets_per_wr']}")
    expect(docs["server"]["results"][0]["forwarded_wrs"] >= SGBATCH_PACKETS // SGBATCH_SGES, "server forwarded too few")
    expect(row["mops"] > 0, "no rate")
    return {"ops": row["ops"], "checked": v["checked_messages"], "wrong": v["bad_bytes"] + v.get("bad_messages", 0),
            "mops": row["mops"], "lat_us_p50": row.get("lat_us_p50"), "behaviour": {}}


def check_echo(case: Case, docs: dict) -> dict:
    row, v = docs["client0"]["results"][0], docs["client0"]["validation"]
    mtu = docs["client0"]["environment"]["device"]["active_mtu_bytes"]
    expect(row["size_bytes"] == mtu, f"{row['size_bytes']} B messages; the port's MTU is {mtu} B")
    expect(v.get("ok") is True and v["bad_bytes"] == 0, f"validation {v}")
    expect(v["checked_messages"] >= ECHO_MESSAGES and row["ops"] >= ECHO_MESSAGES,
           f"{v['checked_messages']} messages checked, {row['ops']} operations")
    expect(row["mops"] > 0, "no rate")
    return {"ops": row["ops"], "checked": v["checked_messages"], "wrong": v["bad_bytes"] + v.get("bad_messages", 0),
            "mops": row["mops"], "lat_us_p50": row.get("lat_us_p50"), "behaviour": {}}


CHECKS = {"kv": check_kv, "sequencer": check_sequencer, "sgbatch": check_sgbatch, "echo": check_echo}


def check_case(case: Case, block: dict | None, validators: dict) -> dict:
    result = {"case": case.id, "args": list(case.args), "ok": False}
    try:
        expect(block is not None, "no result in the log (the VM's time ran out before it, or it never started)")
        result["seconds"] = block["ms"] / 1000
        bad = {role: rc for role, rc in block["statuses"].items() if rc != "0"}
        expect(not bad, f"exit statuses {bad} (124: deadline of {CASE_DEADLINE_S} s)")
        roles = ["server", *(f"client{i}" for i in range(case.clients))]
        docs = block["docs"]
        expect(all(r in docs for r in roles), f"documents missing: {sorted(set(roles) - set(docs))}")
        for role in roles:
            errors = schema_errors(docs[role], validators[case.program])
            expect(not errors, f"{role} document: " + "; ".join(errors[:5]))
        result.update(CHECKS[case.kind](case, docs))
        result["provider_events"] = block["provider_events"]
        result["ok"] = True
    except CheckError as e:
        result["error"] = str(e)
        if block is not None:
            result["output"] = block["output"][-3000:]
    except (KeyError, IndexError, TypeError) as e:
        result["error"] = f"document lacks {e!r}"
    return result


def validators() -> dict:
    import jsonschema
    return {program: jsonschema.Draft202012Validator(json.loads(path.read_text()))
            for program, path in (("kv", KV_SCHEMA), ("bench", BENCH_SCHEMA))}


def print_table(results: list[dict], provider: str) -> None:
    print(f"\n{'case':<26}{'ops':>8}{'checked':>9}{'wrong':>7}{'Mops':>10}{'p50[us]':>10}{'s':>7}  "
          f"on {provider}; behaviour")
    for r in results:
        if not r["ok"]:
            print(f"{r['case']:<26}FAILED: {r['error']}")
            continue
        p50 = f"{r['lat_us_p50']:.1f}" if r.get("lat_us_p50") is not None else "-"
        behaviour = " ".join(f"{k}={v}" for k, v in {**r["behaviour"], **r["provider_events"]}.items())
        print(f"{r['case']:<26}{r['ops']:>8}{r['checked']:>9}{r['wrong']:>7}{r['mops']:>10.4f}{p50:>10}"
              f"{r['seconds']:>7.1f}  {behaviour}")
    for r in results:
        if not r["ok"] and r.get("output"):
            print(f"\n--- {r['case']}: role output\n{r['output']}")


def run_on_rxe(script: str, a) -> str:
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "cases.sh"
        path.write_text(RXE_DEVICES + script)
        cmd = [str(ROOT / "scripts" / "rxe-vm"), "-t", str(a.vm_timeout), "-f", a.kv, "-f", a.bench, str(path)]
        # The guest log (every document, ~0.4 MB) goes to the .log file, not the terminal;
        # rxe-vm's own messages (stderr) still show.
        return subprocess.run(cmd, stdout=subprocess.PIPE, text=True, errors="replace").stdout


def run_on_softnic(script: str, a) -> str:
    fabric = f"vm-systems-{uuid.uuid4().hex[:8]}"
    softnic = str(Path(a.build) / "bin" / "softnic")
    try:
        proc = subprocess.run([softnic, "run", "--fabric", fabric, "--devices", "2", "--link", "roce", "--",
                               "bash", "-c", SOFTNIC_DEVICES + script], stdout=subprocess.PIPE, text=True,
                              errors="replace", timeout=a.vm_timeout)
    finally:
        subprocess.run([softnic, "fabric", "rm", "--fabric", fabric], capture_output=True, timeout=30)
    return proc.stdout


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=str(ROOT / "build"), help="build directory with bin/rdmalab-kv, rdmalab-bench")
    p.add_argument("--out", help="JSON results, the raw log beside it as .log "
                   "(default: BUILD/vm-systems-on-PROVIDER.json)")
    p.add_argument("--only", metavar="REGEX", help="only the cases whose id matches (iterating on one system)")
    p.add_argument("--on", choices=("rxe", "softnic"), default="rxe", help="provider [rxe: in the VM]")
    p.add_argument("--vm-timeout", type=int, default=VM_TIMEOUT_S,
                   help=f"limit for the whole VM run, seconds [{VM_TIMEOUT_S}]")
    p.add_argument("--guest-script", metavar="FILE", help="write the guest script and stop")
    p.add_argument("--guest-log", metavar="FILE", help="check this log instead of running")
    a = p.parse_args()
    a.kv, a.bench = (str(Path(a.build).resolve() / "bin" / b) for b in ("rdmalab-kv", "rdmalab-bench"))
    cases = [c for c in CASES if not a.only or re.search(a.only, c.id)]
    if not cases:
        p.error(f"--only {a.only!r} matches no case; cases: {', '.join(c.id for c in CASES)}")
    script = guest_script(cases, a.kv, a.bench)
    if a.guest_script:
        Path(a.guest_script).write_text(RXE_DEVICES + script)
        return 0
    for binary in (a.kv, a.bench):
        if not os.access(binary, os.X_OK):
            p.error(f"{binary} is not built (cmake --build {a.build} --target rdmalab-kv rdmalab-bench)")
    if a.guest_log:
        log = Path(a.guest_log).read_text(errors="replace")
    else:
        log = (run_on_rxe if a.on == "rxe" else run_on_softnic)(script, a)
    out = Path(a.out or Path(a.build) / f"vm-systems-on-{a.on}.json")
    if not a.guest_log:
        out.with_suffix(".log").write_text(log)
    blocks = parse_log(log)
    if not blocks:
        print("systems_on_rxe: no case reported; the log ends:\n" + "\n".join(log.splitlines()[-60:]))
    checkers = validators()
    results = [check_case(c, blocks.get(c.id), checkers) for c in cases]
    print_table(results, a.on)
    out.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "provider": a.on, "results": results}, indent=1)
                   + "\n")
    failed = [r["case"] for r in results if not r["ok"]]
    print(f"\nsystems_on_rxe: {len(results) - len(failed)} of {len(results)} cases passed on {a.on}"
          + (f"; failed: {', '.join(failed)}" if failed else "") + f" (results: {out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
