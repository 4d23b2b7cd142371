#!/usr/bin/python3
"""rsocket calls whose answers Debian's programs do not show, made through ctypes on softnic's
librdmacm.so.1 in one process (run by test_rsockets.py with LD_LIBRARY_PATH and SOFTNIC_FABRIC
set). Prints one line per check, "ok NAME" or "FAIL NAME: why"; exits 1 if any failed.

  usage: rsocket_calls.py LIBRDMACM SERVER_ADDRESS
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import socket
import struct
import sys
import time

POLLIN, POLLOUT, POLLERR = select.POLLIN, select.POLLOUT, select.POLLERR
F_SETFL, O_NONBLOCK = 4, os.O_NONBLOCK
SOL_SOCKET, SO_ERROR, SO_RCVTIMEO = socket.SOL_SOCKET, socket.SO_ERROR, socket.SO_RCVTIMEO
UNUSED_PORT = 9  # discard: nobody listens there on a fresh fabric


class PollFd(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]


def sockaddr_in(address: str, port: int) -> bytes:
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(address) + bytes(8)


def main() -> int:
    lib = ctypes.CDLL(sys.argv[1], use_errno=True)
    server = sys.argv[2]
    failures = 0

    def check(name: str, ok: bool, why: str) -> None:
        nonlocal failures
        print(f"ok {name}" if ok else f"FAIL {name}: {why}")
        failures += not ok

    # A datagram receive with SO_RCVTIMEO ends with EAGAIN once the timeout passes.
    s = lib.rsocket(socket.AF_INET, socket.SOCK_DGRAM, 0)
    address = sockaddr_in(server, 0)
    check("dgram bind", lib.rbind(s, address, len(address)) == 0, os.strerror(ctypes.get_errno()))
    timeout = struct.pack("ll", 0, 200_000)
    check("set SO_RCVTIMEO", lib.rsetsockopt(s, SOL_SOCKET, SO_RCVTIMEO, timeout, len(timeout)) == 0,
          os.strerror(ctypes.get_errno()))
    buffer = ctypes.create_string_buffer(64)
    start = time.monotonic()
    n = lib.rrecv(s, buffer, 64, 0)
    waited = time.monotonic() - start
    check("SO_RCVTIMEO ends rrecv", n == -1 and ctypes.get_errno() == errno.EAGAIN and 0.15 < waited < 5,
          f"rrecv returned {n}, errno {ctypes.get_errno()}, after {waited:.3f} s")
    lib.rclose(s)

    # A non-blocking rconnect to a port nobody listens on: EINPROGRESS, then rpoll says so and
    # SO_ERROR is ECONNREFUSED.
    s = lib.rsocket(socket.AF_INET, socket.SOCK_STREAM, 0)
    check("set O_NONBLOCK", lib.rfcntl(s, F_SETFL, O_NONBLOCK) == 0, os.strerror(ctypes.get_errno()))
    address = sockaddr_in(server, UNUSED_PORT)
    rc = lib.rconnect(s, address, len(address))
    check("rconnect in progress", rc == -1 and ctypes.get_errno() == errno.EINPROGRESS,
          f"rconnect returned {rc}, errno {ctypes.get_errno()}")
    fds = (PollFd * 1)(PollFd(s, POLLOUT, 0))
    ready = lib.rpoll(fds, 1, 5000)
    check("rpoll reports the failure", ready == 1 and fds[0].revents & POLLOUT and fds[0].revents & POLLERR,
          f"rpoll returned {ready}, revents {fds[0].revents:#x}")
    error = ctypes.c_int(0)
    length = ctypes.c_uint32(4)
    lib.rgetsockopt(s, SOL_SOCKET, SO_ERROR, ctypes.byref(error), ctypes.byref(length))
    check("SO_ERROR is ECONNREFUSED", error.value == errno.ECONNREFUSED, f"SO_ERROR {error.value}")
    lib.rclose(s)

    # Other domains are refused with errno alone (librspreload offers every socket() here).
    rc = lib.rsocket(socket.AF_UNIX, socket.SOCK_STREAM, 0)
    check("AF_UNIX refused", rc == -1 and ctypes.get_errno() == errno.EAFNOSUPPORT,
          f"rsocket returned {rc}, errno {ctypes.get_errno()}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
