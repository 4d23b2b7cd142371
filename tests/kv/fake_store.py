#!/usr/bin/python3
"""A stand-in for memcached or redis-server (--server-bin): listens where it is told
(-l/-p as memcached, --bind/--port as redis-server) and answers every chunk it reads with
$FAKE_STORE_REPLY, so that the tests can see how rdmalab-kv reports a store that speaks
nonsense or an error. memcached's `stats` gets an empty list, so that a run without
preload reaches its clients."""

import os
import socket
import sys
import threading


def option(names: tuple[str, ...], default: str) -> str:
    for i, arg in enumerate(sys.argv[:-1]):
        if arg in names:
            return sys.argv[i + 1]
    return default


def serve(connection: socket.socket, reply: bytes) -> None:
    with connection:
        while data := connection.recv(65536):
            connection.sendall(b"END\r\n" if data.startswith(b"stats\r\n") else reply)


def main() -> None:
    reply = os.environ.get("FAKE_STORE_REPLY", "-ERR fake store\r\n").encode().decode("unicode_escape").encode("latin-1")
    host = option(("-l", "--bind"), "127.0.0.1")
    port = int(option(("-p", "--port"), "11211"))
    listener = socket.create_server((host, port))
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection, reply), daemon=True).start()


if __name__ == "__main__":
    main()
