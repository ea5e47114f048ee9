"""A TCP request-response server with known timing, for the tcp:PORT span tests.

Listens on an ephemeral loopback port (printed as "port N"), one thread per connection
(its native thread id and the client's port printed as "conn-thread TID PEER_PORT" when the
connection is accepted). A
request is bytes up to a blank line, ending "\\r\\n\\r\\n"; the thread sleeps DELAY_MS, then
answers with an 8-byte big-endian length and that many bytes: SIZE, or LARGE for a request
that asks "GET /large"; "GET /split" gets the length and the bytes in two writes (with Nagle's
algorithm on, the second waits for the client to acknowledge the first). A request for
"GET /http" gets an HTTP/1.1 answer instead (headers, then SIZE bytes), in one send or, for
"GET /http-vector", one sendmsg of two buffers (headers, body); when the request has an
"echo-traceresponse: VALUE" header, the answer carries "traceresponse: VALUE", as a server
whose tracing names its own span does.  python3 tcp_server.py DELAY_MS SIZE LARGE"""
from __future__ import annotations

import socket
import sys
import threading
import time

SAY = threading.Lock()

def serve(conn: socket.socket, delay_s: float, size: int, large: int) -> None:
    with SAY:  # one line at a time: print writes the text and its newline apart
        print(f"conn-thread {threading.get_native_id()} {conn.getpeername()[1]}", flush=True)
    buf = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            req, buf = buf.split(b"\r\n\r\n", 1)
            time.sleep(delay_s)
            if req.startswith(b"GET /http"):
                answer_http(conn, req, size)
                continue
            n = large if req.startswith(b"GET /large") else size
            if req.startswith(b"GET /split"):  # two writes: Nagle holds the second
                conn.sendall(n.to_bytes(8, "big"))
                conn.sendall(b"x" * n)
            else:
                conn.sendall(n.to_bytes(8, "big") + b"x" * n)


def answer_http(conn: socket.socket, req: bytes, size: int) -> None:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {size}\r\n"
    for line in req.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"echo-traceresponse":
            head += f"traceresponse: {value.strip().decode()}\r\n"
    head = (head + "\r\n").encode()
    if req.startswith(b"GET /http-vector"):
        conn.sendmsg([head, b"x" * size])
    else:
        conn.sendall(head + b"x" * size)


def main() -> None:
    delay_s, size, large = int(sys.argv[1]) / 1000, int(sys.argv[2]), int(sys.argv[3])
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    print(f"port {ls.getsockname()[1]}", flush=True)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, delay_s, size, large), daemon=True).start()


if __name__ == "__main__":
    main()
