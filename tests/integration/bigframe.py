#!/usr/bin/env python3
"""bigframe.py HOST PORT ANNOUNCED SEND [TYPE [HOLD]]: a raw ZMTP 3.0 DEALER
(or TYPE, e.g. PUSH for a PULL socket; no ZeroMQ)
that announces one frame of ANNOUNCED bytes and streams up to SEND bytes of
it, never holding more than 1 MiB; prints how many bytes the peer took before
it closed the connection, then keeps the connection open HOLD seconds (0),
so that what the peer holds for the frame can be measured. A bound socket
with a message limit drops it at the frame header."""
import time
import socket
import struct
import sys

host, port, announced, send = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
kind = (sys.argv[5] if len(sys.argv) > 5 else "DEALER").encode()
hold = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
s = socket.create_connection((host, port), timeout=10)
greeting = b"\xff" + b"\0" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0") + b"\0" * 32
prop = b"\x0bSocket-Type" + struct.pack(">I", len(kind)) + kind
ready = b"\x05READY" + prop
sent = 0
try:
    s.sendall(greeting)
    s.sendall(bytes([0x04, len(ready)]) + ready)
    s.sendall(bytes([0x02]) + struct.pack(">Q", announced))
    chunk = b"\0" * (1 << 20)
    while sent < send:
        s.sendall(chunk)
        sent += len(chunk)
except OSError:
    pass
print(f"announced {announced} bytes; the peer took {sent} before closing", flush=True)
time.sleep(hold)
