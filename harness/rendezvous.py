"""Rendezvous service: QP-info exchange and barriers for the role processes of one point.

Protocol (contract 2, docs/contracts.md): TCP, one JSON object per line each way.
Every process opens one connection, says hello with the point's token, then puts/gets keys
and meets at barriers; it ends with bye. A connection that closes without bye, or a
{"op": "fail"}, aborts the point: every pending get/barrier and every later put/get/barrier of
every participant fails at once with the name of the failed participant, and the harness is
told through `failed` / `on_failure` so a dead peer is noticed in milliseconds rather than at a
timeout.

The server runs an asyncio loop in a daemon thread so that the harness's own (blocking)
launch-and-wait code needs no event loop.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import threading
from typing import Any, Callable, Optional

kMaxLineBytes = 1 << 20          # a QP-info value is a few hundred bytes; this bounds a bad client
kDefaultWaitMs = 60_000          # get/barrier without timeout_ms
kStartTimeoutS = 10.0
kCloseTimeoutS = 5.0
kOps = ("hello", "put", "get", "barrier", "bye", "fail")


class RendezvousError(RuntimeError):
    pass


class _ProtocolError(Exception):
    """Answered with {"ok": false}; `close` says whether the connection ends too."""

    def __init__(self, message: str, close: bool = False):
        super().__init__(message)
        self.close = close


class _State:
    """Everything shared by the connections of one point; touched only on the loop thread."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.owners: dict[str, str] = {}
        self.participants: set[str] = set()
        self.departed: set[str] = set()
        # barrier name -> (generation, set of participants waiting in this generation, count)
        self.barriers: dict[str, tuple[int, set[str], int]] = {}
        self.abort: Optional[str] = None
        self.changed = asyncio.Condition()

    async def notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()


class RendezvousServer:
    """One per point. Usage:

        with RendezvousServer(host="127.0.0.1") as rv:
            env["RDMALAB_RENDEZVOUS_TOKEN"] = rv.token
            ... launch roles with --rendezvous rv.address ...
            if rv.failed.wait(0.1): print(rv.failure)
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, token: Optional[str] = None,
                 on_failure: Optional[Callable[[str], None]] = None):
        self.host = host
        self.port = port
        self.token = token or secrets.token_hex(16)
        self.on_failure = on_failure
        self.failed = threading.Event()
        self.failure: Optional[str] = None
        self.failed_by: Optional[str] = None   # "ROLE/INDEX" of the participant that failed first
        self.events: list[str] = []          # one line per hello/bye/fail, for the point's log
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._server: Optional[asyncio.base_events.Server] = None
        self._state: Optional[_State] = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._lock = threading.Lock()

    # ---- lifecycle (harness thread) ----
    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def start(self) -> "RendezvousServer":
        started = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._open())
            except BaseException as exc:  # reported to start()'s caller
                error.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="rendezvous", daemon=True)
        self._thread.start()
        if not started.wait(kStartTimeoutS):
            raise RendezvousError(f"rendezvous did not start listening on {self.host} within {kStartTimeoutS} s")
        if error:
            raise RendezvousError(f"rendezvous cannot listen on {self.host}:{self.port}: {error[0]}")
        return self

    async def _open(self) -> None:
        self._state = _State()
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=kMaxLineBytes)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return
        if loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            try:
                fut.result(kCloseTimeoutS)
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(kCloseTimeoutS)
        self._loop = None

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        # Pending get/barrier handlers end with their connections.
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    def __enter__(self) -> "RendezvousServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def values(self) -> dict[str, Any]:
        """A copy of every key put so far (for the point's log)."""
        loop = self._loop
        if loop is None or self._state is None:
            return {}

        async def copy() -> dict[str, Any]:
            return dict(self._state.values)  # type: ignore[union-attr]
        return asyncio.run_coroutine_threadsafe(copy(), loop).result(kCloseTimeoutS)

    def departed(self) -> set[str]:
        return set(self._state.departed) if self._state else set()

    # ---- the protocol (loop thread) ----
    def _report(self, line: str) -> None:
        with self._lock:
            self.events.append(line)

    async def _abort(self, who: str, reason: str) -> None:
        st = self._state
        assert st is not None
        if st.abort is None:
            st.abort = f"participant {who} failed: {reason}"
            self.failed_by = who
            self.failure = st.abort
            self._report(f"fail {who}: {reason}")
            self.failed.set()
            if self.on_failure is not None:
                try:
                    self.on_failure(st.abort)
                except Exception:
                    pass
            await st.notify()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        who: Optional[str] = None
        said_bye = False
        try:
            while True:
                try:
                    raw = await reader.readline()
                except (asyncio.LimitOverrunError, ValueError):
                    await self._send(writer, {"ok": False, "error": f"line longer than {kMaxLineBytes} bytes"})
                    break
                if not raw:
                    break
                try:
                    msg = json.loads(raw)
                    if not isinstance(msg, dict):
                        raise _ProtocolError(f"expected a JSON object, got {type(msg).__name__}")
                    op = msg.get("op")
                    if who is None and op != "hello":
                        raise _ProtocolError(f"first message must be hello, got op {op!r}", close=True)
                    if op == "hello":
                        if who is not None:
                            raise _ProtocolError(f"second hello on the connection of {who}")
                        who = await self._hello(msg)
                        reply: dict[str, Any] = {"ok": True}
                    elif op == "bye":
                        said_bye = True
                        self._state.departed.add(who)  # type: ignore[union-attr]
                        self._report(f"bye {who}")
                        await self._send(writer, {"ok": True})
                        break
                    elif op == "fail":
                        said_bye = True
                        await self._abort(who, str(msg.get("reason", "no reason given")))
                        await self._send(writer, {"ok": True})
                        break
                    else:
                        reply = await self._request(who, op, msg)
                except ValueError:  # not JSON, or not UTF-8; worded as rdma/rendezvous.cc words it
                    reply = {"ok": False, "error": "bad JSON: expected one JSON object per line"}
                except _ProtocolError as exc:
                    await self._send(writer, {"ok": False, "error": str(exc)})
                    if exc.close:
                        break
                    continue
                await self._send(writer, reply)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            said_bye = True  # the harness is closing the point; not a participant failure
        finally:
            self._writers.discard(writer)
            if who is not None and not said_bye:
                await self._abort(who, "disconnected")
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
        writer.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        try:
            await writer.drain()
        except ConnectionError:
            pass

    async def _hello(self, msg: dict[str, Any]) -> str:
        st = self._state
        assert st is not None
        token = msg.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.token.encode()):
            raise _ProtocolError("bad token", close=True)
        role, index = msg.get("role"), msg.get("index")
        if not isinstance(role, str) or not role:
            raise _ProtocolError(f"hello needs a non-empty string role, got {role!r}", close=True)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise _ProtocolError(f"hello needs a non-negative integer index, got {index!r}", close=True)
        who = f"{role}/{index}"
        if who in st.participants:
            raise _ProtocolError(f"duplicate participant {who}", close=True)
        st.participants.add(who)
        self._report(f"hello {who}")
        return who

    @staticmethod
    def _timeout_ms(msg: dict[str, Any]) -> int:
        t = msg.get("timeout_ms", kDefaultWaitMs)
        if not isinstance(t, int) or isinstance(t, bool) or t < 0:
            raise _ProtocolError(f"timeout_ms must be a non-negative integer, got {t!r}")
        return t

    async def _request(self, who: str, op: Any, msg: dict[str, Any]) -> dict[str, Any]:
        st = self._state
        assert st is not None
        if op == "put":
            key = msg.get("key")
            if not isinstance(key, str):
                raise _ProtocolError(f"put needs a string key, got {key!r}")
            if "value" not in msg:
                raise _ProtocolError(f"put of key {key} has no value")
            if st.abort is not None:
                return {"ok": False, "error": st.abort}
            if key in st.values:
                raise _ProtocolError(f"key {key} already put by {st.owners[key]}")
            st.values[key] = msg["value"]
            st.owners[key] = who
            await st.notify()
            return {"ok": True}
        if op == "get":
            key = msg.get("key")
            if not isinstance(key, str):
                raise _ProtocolError(f"get needs a string key, got {key!r}")
            timeout_ms = self._timeout_ms(msg)
            ok = await self._wait(lambda: key in st.values or st.abort is not None, timeout_ms)
            if st.abort is not None:
                return {"ok": False, "error": st.abort}
            if not ok:
                return {"ok": False, "error": f"timeout after {timeout_ms} ms waiting for key {key}"}
            return {"ok": True, "value": st.values[key]}
        if op == "barrier":
            return await self._barrier(who, msg)
        raise _ProtocolError(f"unknown op {op!r}; valid: {', '.join(kOps)}")

    async def _barrier(self, who: str, msg: dict[str, Any]) -> dict[str, Any]:
        st = self._state
        assert st is not None
        name, count = msg.get("name"), msg.get("count")
        if not isinstance(name, str):
            raise _ProtocolError(f"barrier needs a string name, got {name!r}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise _ProtocolError(f"barrier {name} needs a positive integer count, got {count!r}")
        timeout_ms = self._timeout_ms(msg)
        if st.abort is not None:
            return {"ok": False, "error": st.abort}
        gen, waiting, expected = st.barriers.get(name, (0, set(), count))
        if waiting and expected != count:
            raise _ProtocolError(f"barrier {name}: count {count} differs from {expected} given by the others")
        if who in waiting:
            raise _ProtocolError(f"{who} is already waiting at barrier {name}")
        waiting.add(who)
        if len(waiting) >= count:
            # Last arrival opens the barrier for this generation; a later one with the same name starts anew.
            st.barriers[name] = (gen + 1, set(), count)
            await st.notify()
            return {"ok": True}
        st.barriers[name] = (gen, waiting, count)
        ok = await self._wait(lambda: st.barriers[name][0] > gen or st.abort is not None, timeout_ms)
        if st.barriers[name][0] > gen:
            return {"ok": True}
        arrived = len(waiting)
        waiting.discard(who)
        if st.abort is not None:
            return {"ok": False, "error": st.abort}
        assert not ok
        return {"ok": False, "error": f"timeout after {timeout_ms} ms at barrier {name}: {arrived} of {count} arrived"}

    async def _wait(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        st = self._state
        assert st is not None
        async with st.changed:
            try:
                await asyncio.wait_for(st.changed.wait_for(predicate), timeout_ms / 1000.0)
                return True
            except asyncio.TimeoutError:
                return predicate()


class RendezvousClient:
    """Blocking client, for tests and the harness's own test role program."""

    def __init__(self, address: str, token: str, role: str, index: int, timeout_s: float = 30.0):
        import socket
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
        self.file = self.sock.makefile("rwb")
        self.hello = self.call({"op": "hello", "token": token, "role": role, "index": index})

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.file.write(json.dumps(msg).encode() + b"\n")
        self.file.flush()
        line = self.file.readline()
        if not line:
            raise ConnectionError("rendezvous closed the connection")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.sock.close()
