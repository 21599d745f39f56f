#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""oob_relay.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT [TIMEOUT_S]

Relays one TCP connection: accepts one on LISTEN_HOST:LISTEN_PORT, connects
to TARGET_HOST:TARGET_PORT (retrying while it refuses, as the far side may
still be starting), and copies bytes both ways until both sides closed.

Why: perftest 4.5 exchanges its QP numbers and GIDs over a TCP socket that it
resolves for IPv4 only, and the two VMs of the twohost suite share nothing
but an IPv6 link-local wire. Each VM runs one relay (IPv4 loopback on one
end, the link-local address on the other), so perftest's side channel
crosses the wire while its QPs connect with the GIDs it exchanged.
Exit: 0 after a relayed connection, 1 on a timeout or an error.
"""
import socket
import sys
import threading
import time


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__.splitlines()[0])
    lhost, lport, thost, tport = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    timeout = float(sys.argv[5]) if len(sys.argv) == 6 else 120.0
    fam = socket.AF_INET6 if ":" in lhost else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    ls.bind(socket.getaddrinfo(lhost, lport, fam, socket.SOCK_STREAM)[0][4])
    ls.listen(1)
    print(f"oob_relay: listening on {lhost} port {lport}", flush=True)
    ls.settimeout(timeout)
    try:
        a, _ = ls.accept()
    except socket.timeout:
        sys.exit(f"oob_relay: nobody connected to {lhost} port {lport} in {timeout:.0f} s")
    ls.close()
    deadline = time.monotonic() + timeout
    while True:
        try:
            b = socket.create_connection((thost, tport), timeout=10)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                sys.exit(f"oob_relay: cannot connect to {thost} port {tport}: {e}")
            time.sleep(0.2)
    a.settimeout(None)
    b.settimeout(None)
    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()
    a.close()
    b.close()


if __name__ == "__main__":
    main()
