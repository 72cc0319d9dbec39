"""Loopback TCP bandwidth, for bench/distributed.sh: a receiver process and a
sender process on 127.0.0.1 move --mb megabytes (default 256) over one TCP
connection, in 1 MiB writes; prints one JSON line with the best of --repeat
runs in MB/s and Gbit/s. This bounds what any ps/worker runtime on this
machine can move per second between its tasks (and both ends share the
machine's cores with it).
"""
import argparse
import json
import os
import socket
import sys
import time

CHUNK = 1 << 20


def receive(port_w, total):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    os.write(port_w, srv.getsockname()[1].to_bytes(4, "little"))
    os.close(port_w)
    conn, _ = srv.accept()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if n == 0:
            break
        got += n
    conn.sendall(b"k")  # tells the sender that everything arrived
    conn.close()
    srv.close()
    os._exit(0 if got == total else 1)


def once(total):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        receive(w, total)
    os.close(w)
    port = int.from_bytes(os.read(r, 4), "little")
    os.close(r)
    data = bytes(CHUNK)
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        s.sendall(data[:min(CHUNK, total - sent)])
        sent += min(CHUNK, total - sent)
    if s.recv(1) != b"k":
        sys.exit("loopback_bw: the receiver did not get everything")
    dt = time.perf_counter() - t0
    s.close()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit("loopback_bw: the receiver failed")
    return total / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    total = a.mb * CHUNK
    rates = [once(total) for _ in range(a.repeat)]
    best = max(rates)
    print(json.dumps({"bytes": total, "runs_MBps": [round(x / 1e6) for x in rates],
                      "best_MBps": round(best / 1e6), "best_Gbps": round(best * 8 / 1e9, 2)}))


if __name__ == "__main__":
    main()
