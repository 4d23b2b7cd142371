"""The rendezvous server against contract 2, over real TCP sockets."""
import json
import socket
import threading
import time

import pytest

from harness.rendezvous import RendezvousClient, RendezvousServer


@pytest.fixture
def rv():
    server = RendezvousServer(host="127.0.0.1").start()
    yield server
    server.close()


def client(rv, role="client", index=0):
    c = RendezvousClient(rv.address, rv.token, role, index, timeout_s=10)
    assert c.hello == {"ok": True}
    return c


def test_put_get_barrier_bye(rv):
    a, b = client(rv, "server", 0), client(rv, "client", 0)
    assert a.call({"op": "put", "key": "server/0/qp", "value": {"qpn": 17, "lid": [1, 2]}}) == {"ok": True}
    assert b.call({"op": "get", "key": "server/0/qp", "timeout_ms": 1000}) == {"ok": True, "value": {"qpn": 17, "lid": [1, 2]}}
    results = {}
    t = threading.Thread(target=lambda: results.update(a=a.call({"op": "barrier", "name": "go", "count": 2, "timeout_ms": 5000})))
    t.start()
    time.sleep(0.05)
    assert b.call({"op": "barrier", "name": "go", "count": 2, "timeout_ms": 5000}) == {"ok": True}
    t.join(5)
    assert results["a"] == {"ok": True}
    # The same barrier name can be used again (a new generation).
    t = threading.Thread(target=lambda: results.update(a2=a.call({"op": "barrier", "name": "go", "count": 2, "timeout_ms": 5000})))
    t.start()
    assert b.call({"op": "barrier", "name": "go", "count": 2, "timeout_ms": 5000}) == {"ok": True}
    t.join(5)
    assert results["a2"] == {"ok": True}
    assert a.call({"op": "bye"}) == {"ok": True}
    assert b.call({"op": "bye"}) == {"ok": True}
    a.close(), b.close()
    time.sleep(0.1)
    assert not rv.failed.is_set()
    assert rv.departed() == {"server/0", "client/0"}
    assert rv.values() == {"server/0/qp": {"qpn": 17, "lid": [1, 2]}}


def test_get_blocks_until_put(rv):
    a, b = client(rv, "server", 0), client(rv, "client", 0)
    out = {}
    t = threading.Thread(target=lambda: out.update(r=b.call({"op": "get", "key": "k", "timeout_ms": 5000})))
    t.start()
    time.sleep(0.1)
    assert "r" not in out
    start = time.monotonic()
    a.call({"op": "put", "key": "k", "value": 3})
    t.join(5)
    assert out["r"] == {"ok": True, "value": 3}
    assert time.monotonic() - start < 1.0


def test_bad_token_closes(rv):
    c = RendezvousClient(rv.address, "not-the-token", "client", 0)
    assert c.hello == {"ok": False, "error": "bad token"}
    with pytest.raises((ConnectionError, OSError)):
        c.call({"op": "put", "key": "k", "value": 1})
    assert not rv.failed.is_set()  # a stranger is not a participant


def test_first_message_must_be_hello(rv):
    s = socket.create_connection(("127.0.0.1", rv.port), timeout=5)
    f = s.makefile("rwb")
    f.write(b'{"op": "put", "key": "k", "value": 1}\n')
    f.flush()
    reply = json.loads(f.readline())
    assert reply["ok"] is False and "first message must be hello" in reply["error"]
    assert f.readline() == b""
    s.close()


def test_duplicate_participant_and_duplicate_key(rv):
    a = client(rv, "client", 3)
    dup = RendezvousClient(rv.address, rv.token, "client", 3)
    assert dup.hello["ok"] is False and "duplicate participant client/3" in dup.hello["error"]
    assert a.call({"op": "put", "key": "k", "value": 1}) == {"ok": True}
    r = a.call({"op": "put", "key": "k", "value": 2})
    assert r["ok"] is False and "k" in r["error"] and "client/3" in r["error"]


def test_get_and_barrier_timeouts(rv):
    a = client(rv)
    r = a.call({"op": "get", "key": "never", "timeout_ms": 100})
    assert r == {"ok": False, "error": "timeout after 100 ms waiting for key never"}
    r = a.call({"op": "barrier", "name": "start", "count": 3, "timeout_ms": 100})
    assert r == {"ok": False, "error": "timeout after 100 ms at barrier start: 1 of 3 arrived"}
    assert not rv.failed.is_set()


def test_malformed_requests_name_the_problem(rv):
    a = client(rv)
    r = a.call({"op": "jump"})
    assert r["ok"] is False and "jump" in r["error"] and "barrier" in r["error"]
    r = a.call({"op": "get", "key": "k", "timeout_ms": -5})
    assert r["ok"] is False and "-5" in r["error"]
    r = a.call({"op": "barrier", "name": "b", "count": 0})
    assert r["ok"] is False and "count" in r["error"]
    # The connection survives these errors.
    assert a.call({"op": "put", "key": "still", "value": True}) == {"ok": True}


def test_bad_json_line(rv):
    s = socket.create_connection(("127.0.0.1", rv.port), timeout=5)
    f = s.makefile("rwb")
    f.write(json.dumps({"op": "hello", "token": rv.token, "role": "r", "index": 0}).encode() + b"\n{nope\n")
    f.flush()
    assert json.loads(f.readline()) == {"ok": True}
    r = json.loads(f.readline())
    assert r["ok"] is False and r["error"].startswith("bad JSON")
    s.close()


def test_disconnect_aborts_waiters_fast(rv):
    a, b = client(rv, "server", 0), client(rv, "client", 0)
    seen = []
    rv.on_failure = seen.append
    out = {}
    t = threading.Thread(target=lambda: out.update(r=a.call({"op": "barrier", "name": "done", "count": 2, "timeout_ms": 30000})))
    t.start()
    time.sleep(0.1)
    start = time.monotonic()
    b.close()  # dies without bye
    t.join(5)
    assert time.monotonic() - start < 1.0
    assert out["r"] == {"ok": False, "error": "participant client/0 failed: disconnected"}
    assert rv.failed.wait(1) and rv.failure == "participant client/0 failed: disconnected"
    assert seen == [rv.failure]
    # Later gets fail the same way, even for keys that exist.
    a.call({"op": "put", "key": "x", "value": 1})
    assert a.call({"op": "get", "key": "x", "timeout_ms": 10})["error"] == "participant client/0 failed: disconnected"


def test_fail_op_carries_reason(rv):
    a, b = client(rv, "server", 0), client(rv, "client", 1)
    assert b.call({"op": "fail", "reason": "ibv_create_qp: ENOMEM"}) == {"ok": True}
    r = a.call({"op": "get", "key": "k", "timeout_ms": 5000})
    assert r == {"ok": False, "error": "participant client/1 failed: ibv_create_qp: ENOMEM"}


def test_close_ends_connections_and_port(rv):
    a = client(rv)
    port = rv.port
    rv.close()
    with pytest.raises((ConnectionError, OSError)):
        a.call({"op": "get", "key": "k", "timeout_ms": 10})
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
    assert not rv.failed.is_set()  # closing the point is not a participant failure
