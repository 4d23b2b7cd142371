"""Runs one point: rendezvous, roles on their hosts, deadline, failure handling, the record.

A point fails when any role exits non-zero, a role tells the rendezvous it failed or drops
its connection, a role's output is not a valid document, or the deadline passes. Then every
role of the point is stopped (whole process groups, on every host) and the failure is
recorded with the logs; the caller goes on with the next point. A role that exits
kExitUnsupported (a valid point this host or provider cannot run, e.g. far NUMA memory on a
one-node host) makes the point unsupported instead, with the reason from its stderr; the
other roles are stopped the same way.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shlex
import signal
import subprocess
import time
from typing import Any, Optional

from . import pcm, provenance
from .experiment import Experiment
from .inventory import Host, Inventory
from .launch_local import LaunchError, LocalLauncher, NetnsLauncher, Proc
from .launch_remote import SlurmLauncher, SshLauncher, unreachable_reason
from .metrics import point_value
from .rendezvous import RendezvousError, RendezvousServer
from .store import Store, kNotModeled, kResultSchema, kUnsupported, utc_now
from .sweep import Point
from .validate import hidden_params, kModelHarnessParams, model_binary
from .yamlloc import ConfigError

kDeadlineSlackMaxS = 5.0     # the binary's own --timeout fires first; the harness's deadline backs it up
kDeadlineSlackMinS = 1.0     # ... by half the timeout, within these bounds (process start and teardown)
kPollS = 0.02
kExitSettleS = 2.0           # after a failure: time for the failing role's exit code to land and the others to exit
kExitUnsupported = 3         # rdma/program.h: a valid point this host or provider cannot run
kUnsupportedMarker = ": unsupported: "   # its stderr line: "rdmalab-bench: unsupported: REASON"
kTailBytes = 4000
kModelTimeoutS = 60.0
kDefaultModelProfile = "cx3"   # when neither the point, --profile nor the experiment's model_params name one
kMaxSchemaWarnings = 10
kTokenEnv = "RDMALAB_RENDEZVOUS_TOKEN"
kSoftnicAuxTimeoutS = 30
kPlantedFaultEnv = "SOFTNIC_PLANTED_FAULT"   # softnic/verbs/planted_fault.h; roles inherit it (launch_local)
kDeferredSignals = {signal.SIGINT, signal.SIGTERM}


def planted_fault() -> Optional[str]:
    """The softnic fault planted for this run (this process's environment, which local roles
    inherit); None when there is none. Recorded with each softnic point so that its numbers are
    never taken for softnic's own."""
    return os.environ.get(kPlantedFaultEnv) or None


@dataclasses.dataclass
class RunConfig:
    backend: str
    root: pathlib.Path                # repository root
    bin_dir: pathlib.Path             # where rdmalab-bench, softnic, rdmalab-model are
    run_id: str
    model_bin: Optional[pathlib.Path] = None
    bench_schema: Optional[dict] = None
    kv_schema: Optional[dict] = None      # rdmalab-kv/1 documents (kv/schema/)
    profile: Optional[str] = None       # --profile: the model's NIC profile unless a point's `profile` parameter says otherwise
    # The model predicts what ran on this measured backend (the pass with the profile fitted to it):
    # the experiments' paper_testbed is left out, and where a point leaves a parameter unset the
    # model takes the program's own default (program_defaults: experiment id -> name -> value).
    predicts_run_of: Optional[str] = None
    program_defaults: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    @property
    def softnic_bin(self) -> pathlib.Path:
        return self.bin_dir / "softnic"


@dataclasses.dataclass
class Placed:
    role: str
    index: int
    peers: int
    host: Host
    argv: list[str] = dataclasses.field(default_factory=list)
    proc: Optional[Proc] = None
    stdout_path: Optional[pathlib.Path] = None
    stderr_path: Optional[pathlib.Path] = None


def deadline_s(timeout_s: float) -> float:
    return timeout_s + min(kDeadlineSlackMaxS, max(kDeadlineSlackMinS, timeout_s / 2))


def signal_name(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def tail(path: Optional[pathlib.Path]) -> str:
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - kTailBytes))
        return f.read().decode(errors="replace")


def flag(spelling: str, value: Any, default: Any = None) -> list[str]:
    """A parameter as the program's flag: true is --flag; false is omitted, unless the program's
    default is true (then --flag=false)."""
    if value is True:
        return [spelling]
    if value is None or (value is False and default is not True):
        return []
    if value is False:
        return [f"{spelling}=false"]
    return [f"{spelling}={value}"]


def forwarded(exp: Experiment, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters the experiment's program declares for its mode: labels, role counts and
    anything it does not take stay with the harness."""
    hidden = hidden_params(exp)
    return {k: v for k, v in params.items() if k not in hidden and exp.program.takes(exp.mode, k)}


def peers_of(counts: dict[str, int], role: str) -> int:
    """Contract 1: the number of processes of the other role; with one role, all of them."""
    others = [c for r, c in counts.items() if r != role]
    return sum(others) if others else counts[role]


def place(exp: Experiment, point: Point, inv: Inventory) -> list[Placed]:
    """Default placement: every process on the next host (servers first), wrapping around."""
    placed = []
    next_host = 0
    n = len(inv.hosts)
    for role in exp.roles:
        count = point.roles[role.name]
        for i in range(count):
            if role.placement is not None:
                k = role.placement[i % len(role.placement)]
                if k >= n:
                    raise LaunchError(f"roles.{role.name}.placement names host {k}, but the inventory has {n} hosts (0..{n - 1})")
            else:
                k = next_host % n
                next_host += 1
            placed.append(Placed(role.name, i, peers_of(point.roles, role.name), inv.hosts[k]))
    return placed


def hosts_needed(exp: Experiment, point: Point) -> int:
    total = 0
    explicit = 0
    for role in exp.roles:
        if role.placement is not None:
            explicit = max(explicit, max(role.placement) + 1)
        else:
            total += point.roles[role.name]
    return max(total, explicit, 1)


class PointRunner:
    def __init__(self, cfg: RunConfig, inventory: Inventory, store: Store):
        self.cfg = cfg
        self.inventory = inventory
        self.store = store
        self.launchers: dict[str, LocalLauncher] = {}
        self.control_dir = pathlib.Path(f"/tmp/rdmalab-ssh-{os.getuid()}") / cfg.run_id

    def launcher(self, name: str) -> LocalLauncher:
        if name not in self.launchers:
            if name == "local":
                self.launchers[name] = LocalLauncher()
            elif name == "netns":
                self.launchers[name] = NetnsLauncher(self.cfg.run_id)
            elif name == "ssh":
                self.control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                self.launchers[name] = SshLauncher(self.inventory.control_address, str(self.control_dir))
            elif name == "slurm":
                self.launchers[name] = SlurmLauncher(self.inventory.control_address, self.cfg.run_id)
            else:
                raise LaunchError(f"unknown launcher {name!r}")
        return self.launchers[name]

    def close(self) -> None:
        for launcher in self.launchers.values():
            try:
                launcher.teardown()
            except Exception:
                pass
        self.launchers.clear()
        try:
            self.control_dir.rmdir()  # the ssh masters' sockets are gone with them
        except OSError:
            pass

    # ---- command lines ----
    def role_argv(self, exp: Experiment, point: Point, p: Placed, rv_address: str, fabric: Optional[str]) -> list[str]:
        bin_dir = pathlib.Path(p.host.bin_dir) if p.host.bin_dir else self.cfg.bin_dir
        binary = exp.binary if os.path.isabs(exp.binary) else str(bin_dir / exp.binary)
        # Contract 1's first argument: the mode for a program with several (rdmalab-bench), the
        # role for a program with one (rdmalab-kv).
        argv = [binary, exp.mode if len(exp.program.modes) > 1 else p.role]
        argv += ["--rendezvous", rv_address, "--role", p.role, "--index", str(p.index), "--peers", str(p.peers)]
        if p.host.device:
            argv += ["--ib-dev", p.host.device]
        argv += ["--ib-port", str(p.host.port)]
        if p.host.gid_index is not None:
            argv += ["--gid-index", str(p.host.gid_index)]
        role = next(r for r in exp.roles if r.name == p.role)
        for k, v in forwarded(exp, {**point.params, **role.params}).items():
            param = exp.program.params[k]
            argv += flag(param.flag or f"--{k}", v, param.default)
        argv.append(f"--timeout={int(exp.timeout_s) if float(exp.timeout_s).is_integer() else exp.timeout_s}")
        argv.append("--out_json")
        if p.host.numa is not None:
            argv = ["numactl", f"--cpunodebind={p.host.numa}", f"--membind={p.host.numa}", *argv]
        if fabric is not None:
            softnic = pathlib.Path(p.host.bin_dir) / "softnic" if p.host.bin_dir else self.cfg.softnic_bin
            argv = [str(softnic), "run", "--fabric", fabric, "--", *argv]
        return argv

    # ---- softnic fabric of a point ----
    def _softnic(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.cfg.softnic_bin), *args], capture_output=True, text=True,
                              timeout=kSoftnicAuxTimeoutS, stdin=subprocess.DEVNULL)

    def create_fabric(self, name: str, devices: int, link: str) -> None:
        if not self.cfg.softnic_bin.exists():
            raise LaunchError(f"{self.cfg.softnic_bin} does not exist: build softnic first (cmake --build build)")
        r = self._softnic("fabric", "create", "--fabric", name, "--devices", str(devices), "--link", link)
        if r.returncode != 0:
            raise LaunchError(f"softnic fabric create --fabric {name} failed: {r.stderr.strip()}")

    def fabric_info(self, name: str) -> Any:
        r = self._softnic("fabric", "show", "--fabric", name, "--json")
        try:
            return json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()}
        except json.JSONDecodeError:
            return {"error": "softnic fabric show printed no JSON"}

    def remove_fabric(self, name: str) -> None:
        self._softnic("fabric", "rm", "--fabric", name)

    # ---- running ----
    def run(self, exp: Experiment, point: Point) -> dict[str, Any]:
        if self.cfg.backend == "model":
            return self.run_model(exp, point)
        started, t0 = utc_now(), time.monotonic()
        record = self._record(exp, point, started)
        inv = Inventory(self.inventory.name, self.inventory.control_address, [])
        placed: list[Placed] = []
        fabric = None
        rv: Optional[RendezvousServer] = None
        failure: Optional[str] = None
        sidecars: list[pcm.Sidecar] = []
        log_dir = self.store.log_dir(self.cfg.backend, exp.id, point.id)
        try:
            inv = self.inventory.sized(hosts_needed(exp, point), str(self.cfg.bin_dir))
            placed = place(exp, point, inv)
            launchers = {h.launcher for h in inv.hosts}
            for name in launchers:
                self.launcher(name).setup([h for h in inv.hosts if h.launcher == name])
            control = self.launcher(inv.hosts[0].launcher).control_address()
            rv = RendezvousServer(host=control).start()
            if self.cfg.backend == "softnic":
                fabric = f"rdl-{self.cfg.run_id}-{point.id[:8]}"
                self.create_fabric(fabric, len(inv.hosts), exp.link)
            if self.cfg.backend == "verbs":
                sidecars = pcm.start_sidecars([p.host for p in placed if p.role in ("server", "node")], log_dir,
                                              lambda h, argv, out, err: self.launcher(h.launcher).start(h, argv, {}, out, err))
            for p in placed:
                p.argv = self.role_argv(exp, point, p, rv.address, fabric)
                p.stdout_path = log_dir / f"{p.role}-{p.index}.stdout"
                p.stderr_path = log_dir / f"{p.role}-{p.index}.stderr"
                with open(p.stdout_path, "wb") as out, open(p.stderr_path, "wb") as err:
                    p.proc = self.launcher(p.host.launcher).start(p.host, p.argv, {kTokenEnv: rv.token}, out, err)
            failure, unsupported = self._wait(placed, rv, deadline_s(exp.timeout_s))
            if unsupported:
                record[kUnsupported] = unsupported
        except (LaunchError, RendezvousError, ConfigError) as exc:
            failure = str(exc)
        finally:
            # A Ctrl-C now waits until every role, sidecar, rendezvous and fabric of the point is gone.
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, kDeferredSignals)
            try:
                for p in placed:
                    if p.proc is not None:
                        p.proc.stop()
                record["provenance"]["pcie_measured"] = pcm.stop_sidecars(sidecars, self.cfg.backend)
                if rv is not None:
                    record["provenance"]["rendezvous"] = {"address": rv.address, "events": list(rv.events)}
                    rv.close()
                if fabric is not None:
                    record["provenance"]["fabric"] = {"name": fabric, "show": self.fabric_info(fabric),
                                                      "planted_fault": planted_fault()}
                    self.remove_fabric(fabric)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        record["roles"], failure = self._collect(placed, failure)
        record["provenance"]["pcie_estimated_nic_misses"] = pcm.estimate_nic_misses(
            record["provenance"]["pcie_measured"], record["roles"])
        return self._finish(record, exp, inv.hosts, failure, t0)

    def _collect(self, placed: list[Placed], failure: Optional[str]) -> tuple[list[dict[str, Any]], Optional[str]]:
        """Every role's exit code, document and output tails; a bad document fails the point."""
        roles = []
        for p in placed:
            entry = {"role": p.role, "index": p.index, "peers": p.peers, "host": p.host.name,
                     "argv": list(p.argv), "exit_code": p.proc.poll() if p.proc else None,
                     "document": None, "stdout_tail": "", "stderr_tail": tail(p.stderr_path),
                     "log_stdout": str(p.stdout_path), "log_stderr": str(p.stderr_path)}
            if p.proc is not None and entry["exit_code"] == 0 and p.stdout_path is not None:
                text = p.stdout_path.read_text(errors="replace")
                doc, problem = self._document(text)
                if problem:
                    failure = failure or f"{p.role}/{p.index} on {p.host.name}: {problem}"
                    entry["stdout_tail"] = text[-kTailBytes:]
                entry["document"] = doc
            else:
                entry["stdout_tail"] = tail(p.stdout_path)
            roles.append(entry)
        return roles, failure

    def _wait(self, placed: list[Placed], rv: RendezvousServer, limit_s: float) -> tuple[Optional[str], Optional[str]]:
        """(None, None) when every role exits 0; (failure, None) when the point failed; (None, reason)
        when a role exited kExitUnsupported: this host cannot run the point."""
        deadline = time.monotonic() + limit_s
        while True:
            codes = [p.proc.poll() for p in placed]  # type: ignore[union-attr]
            if rv.failed.is_set() or any(c not in (None, 0) for c in codes):
                # The rendezvous, or a peer it told, usually hears of a failure before the failing
                # role's own exit status lands; that status names the cause and tells an
                # unsupported point from a failed one. The other roles are told too and get the
                # same time to exit on their own, saying why, before they are stopped.
                settle = time.monotonic() + kExitSettleS
                while time.monotonic() < settle and any(c is None for c in codes):
                    time.sleep(kPollS)
                    codes = [p.proc.poll() for p in placed]  # type: ignore[union-attr]
                return self._outcome(placed, codes, rv)
            if all(c == 0 for c in codes):
                return None, None
            if time.monotonic() > deadline:
                running = [f"{p.role}/{p.index}" for p, c in zip(placed, codes) if c is None]
                return f"deadline of {limit_s:.0f} s passed with {', '.join(running)} still running (stopped)", None
            time.sleep(kPollS)

    @staticmethod
    def _outcome(placed: list[Placed], codes: list[Optional[int]],
                 rv: RendezvousServer) -> tuple[Optional[str], Optional[str]]:
        """What ended the point once some role failed: (failure, None) or (None, unsupported reason)."""
        for p, code in zip(placed, codes):
            if code == kExitUnsupported:
                lines = [ln for ln in tail(p.stderr_path).splitlines() if kUnsupportedMarker in ln]
                reason = (lines[-1].split(kUnsupportedMarker, 1)[1].strip() if lines
                          else f"{p.role}/{p.index} exited {kExitUnsupported} (unsupported) without a reason")
                return None, reason
        # The role the rendezvous heard from first is the cause; the others failed because it did.
        bad = sorted(((p, c) for p, c in zip(placed, codes) if c not in (None, 0)),
                     key=lambda pc: f"{pc[0].role}/{pc[0].index}" != rv.failed_by)
        if not bad:
            return f"rendezvous: {rv.failure}", None
        p, code = bad[0]
        stderr = tail(p.stderr_path)
        why = unreachable_reason(p.proc, code, stderr)  # type: ignore[arg-type]
        if why:
            return why, None
        last = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("RDMALAB_PGID=")]
        detail = f": {last[-1]}" if last else ""
        return f"{p.role}/{p.index} on {p.host.name} failed with {signal_name(code)}{detail}", None

    def _document(self, text: str) -> tuple[Any, Optional[str]]:
        """A role's document: a failure unless it is one rdmalab-bench/1 or rdmalab-kv/1 document that
        matches its schema (benchmarks/schema/, kv/schema/), when the schema file exists."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"stdout is not one JSON document ({exc.msg} at line {exc.lineno})"
        version = doc.get("schema_version") if isinstance(doc, dict) else None
        schemas = {"rdmalab-bench/1": self.cfg.bench_schema, "rdmalab-kv/1": self.cfg.kv_schema}
        if version not in schemas:
            return doc, f"document schema_version is {version!r}, expected one of {', '.join(map(repr, schemas))}"
        problems = self.schema_problems(doc, schemas[version])
        return doc, (f"document does not match the {version} schema at {problems[0]}" if problems else None)

    @staticmethod
    def _model_document(text: str) -> tuple[Any, Optional[str]]:
        """What the harness needs of a prediction (contract 3): the version, the backend, numeric rows."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"stdout is not one JSON document ({exc.msg} at line {exc.lineno})"
        if not isinstance(doc, dict) or doc.get("schema_version") != "rdmalab-bench/1":
            return doc, "document schema_version is not 'rdmalab-bench/1'"
        if doc.get("backend") != "model":
            return doc, "document lacks \"backend\": \"model\" (contract 3)"
        rows = doc.get("results")
        if isinstance(doc.get("not_modeled"), str) and rows == []:
            return doc, None  # a point outside the model's scope, with the reason
        if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
            return doc, "document has no results rows"
        return doc, None

    def schema_problems(self, doc: dict[str, Any], schema: Optional[dict] = None) -> list[str]:
        schema = schema if schema is not None else self.cfg.bench_schema
        if schema is None:
            return []
        import jsonschema
        validator = jsonschema.validators.validator_for(schema)(schema)
        return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]

    def model_request(self, exp: Experiment, point: Point) -> dict[str, Any]:
        """The model's point (contract 3): role counts in `roles`; in `params` only what
        rdmalab-model declares for the mode, the experiment's model_params over the point's."""
        # The NIC profile: a swept `profile` parameter, else --profile, else the experiment's
        # model_params (the paper's hardware), else the default.
        testbed = {} if self.cfg.predicts_run_of else exp.paper_testbed
        profile = (point.params.get("profile") or self.cfg.profile or testbed.get("profile")
                   or exp.model_params.get("profile") or kDefaultModelProfile)
        params = {**self.cfg.program_defaults.get(exp.id, {}), **point.params, **exp.model_params, **testbed}
        link = point.params.get("link", exp.link if exp.link != "ib" else None)  # ib: the model's default
        params = {**forwarded(exp, {k: v for k, v in params.items() if k not in kModelHarnessParams}),
                  **({"link": link} if link is not None else {})}
        return {"experiment": exp.id, "profile": profile, "mode": exp.mode, "roles": point.roles, "params": params}

    def run_model(self, exp: Experiment, point: Point) -> dict[str, Any]:
        started, t0 = utc_now(), time.monotonic()
        record = self._record(exp, point, started)
        model = model_binary(self.cfg.bin_dir, self.cfg.model_bin)
        request = self.model_request(exp, point)
        entry: dict[str, Any] = {"role": "model", "index": 0, "peers": 0, "host": "model",
                                 "argv": [str(model), "predict", "--json"], "exit_code": None, "document": None,
                                 "stdout_tail": "", "stderr_tail": "", "request": request}
        failure = None
        if not pathlib.Path(model).is_file():
            failure = (f"model backend: {model} does not exist; build it (cmake --build build --target rdmalab-model) "
                       "or pass --model-bin PATH")
        else:
            try:
                r = subprocess.run(entry["argv"], input=json.dumps(request), capture_output=True, text=True,
                                   timeout=min(kModelTimeoutS, deadline_s(exp.timeout_s)))
                entry.update(exit_code=r.returncode, stderr_tail=r.stderr[-kTailBytes:])
                if r.returncode != 0:
                    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
                    failure = f"model: {signal_name(r.returncode)}: {lines[-1] if lines else 'no error message'}"
                    entry["stdout_tail"] = r.stdout[-kTailBytes:]
                else:
                    entry["document"], failure = self._model_document(r.stdout)
                    if failure:
                        failure = f"model: {failure}"
                        entry["stdout_tail"] = r.stdout[-kTailBytes:]
                    elif isinstance(entry["document"].get("not_modeled"), str):
                        record["not_modeled"] = entry["document"]["not_modeled"]
                    elif problems := self.schema_problems(entry["document"]):
                        # A prediction has no host, kernel or CPU time; the rest of the bench schema
                        # is reported, not enforced, so that figures can be drawn meanwhile.
                        entry["schema_warnings"] = problems[:kMaxSchemaWarnings]
            except subprocess.TimeoutExpired:
                failure = f"model: no answer within {kModelTimeoutS:.0f} s"
        record["roles"] = [entry]
        return self._finish(record, exp, [], failure, t0)

    def _record(self, exp: Experiment, point: Point, started: str) -> dict[str, Any]:
        return {"schema_version": kResultSchema, "status": None, "error": None, "backend": self.cfg.backend,
                "experiment": {"id": exp.id, "title": exp.title, "file": str(exp.path), "sha256": exp.sha256,
                               "paper": exp.paper, "description": exp.description, "plot": exp.plot,
                               "reference": exp.reference, "conclusions": exp.conclusions},
                "point": {"id": point.id, "index": point.index, "params": point.params, "repeat": point.repeat,
                          "roles": point.roles, "swept": list(point.swept)},
                "roles": [], "headline": None,
                "provenance": {"run_id": self.cfg.run_id, "started": started, **provenance.static(self.cfg.root)}}

    def _finish(self, record: dict[str, Any], exp: Experiment, hosts: list[Host], failure: Optional[str],
                t0: float) -> dict[str, Any]:
        record["status"] = ("failed" if failure else kNotModeled if record.get(kNotModeled)
                            else kUnsupported if record.get(kUnsupported) else "ok")
        record["error"] = failure
        prov = record["provenance"]
        prov["ended"] = utc_now()
        prov["duration_s"] = round(time.monotonic() - t0, 3)
        prov["hosts"] = [h.describe() for h in hosts]
        prov["inventory"] = self.inventory.path or self.inventory.name
        prov["command_lines"] = [shlex.join(r["argv"]) for r in record["roles"]]
        binary = str(model_binary(self.cfg.bin_dir, self.cfg.model_bin)) if self.cfg.backend == "model" else exp.binary
        prov.update(provenance.from_documents(record["roles"], binary, self.cfg.bin_dir))
        y = exp.plot.get("y")
        if y and record["status"] == "ok":
            record["headline"] = {"metric": y, "value": point_value(record, y, exp.plot.get("role"),
                                                                      exp.plot.get("aggregate"))}
        return record
