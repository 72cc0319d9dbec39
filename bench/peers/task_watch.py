"""Watches a cluster run from outside, the same way for every framework
(bench/embedding.sh): each task's peak resident memory (VmHWM, sampled every
50 ms until it exits), and the bytes sent over the loopback interface
(/sys/class/net/lo/statistics/tx_bytes, TCP/IP headers included). The run
must have a network namespace of its own (embedding.sh starts it under
`unshare -n` and passes --private-net), so that lo carries its traffic
only; own_loopback() brings lo up there."""
import os
import subprocess
import threading
import time


LO = "/sys/class/net/lo/statistics/tx_bytes"


def own_loopback(private):
    """`private`: this process runs in a network namespace of its own (the
    caller started it under `unshare -n`, as bench/embedding.sh does): lo is
    brought up, and counts this run's traffic only. Returns `private`."""
    if private:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    return private


def _lo_bytes():
    with open(LO) as f:
        return int(f.read())


def _read(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(l.split()[1]) for l in f if l.startswith("VmHWM:")), 0)
    except (OSError, StopIteration, ValueError):
        return None


class TaskWatch:
    """watch(name, pid) starts sampling a task's peak memory (samples[name]:
    [(time, peak_kb)]); the loopback's bytes are sampled from the start;
    lo_between(t0, t1) gives the bytes sent between two times (from the
    samples nearest them)."""

    def __init__(self, every=0.05):
        self.samples = {}
        self._lo = []
        self._every = every
        self._lock = threading.Lock()

        def lo_loop():
            while True:
                with self._lock:
                    self._lo.append((time.time(), _lo_bytes()))
                time.sleep(self._every)
        threading.Thread(target=lo_loop, daemon=True).start()

    def watch(self, name, pid):
        def loop():
            while True:
                r = _read(pid)
                if r is None:
                    return
                with self._lock:
                    self.samples.setdefault(name, []).append((time.time(), r))
                time.sleep(self._every)
        threading.Thread(target=loop, daemon=True).start()

    def peak_mb(self, name):
        with self._lock:
            s = self.samples.get(name, [])
            return max((x[1] for x in s), default=0) / 1024.0

    def lo_between(self, t0, t1):
        with self._lock:
            s = list(self._lo)
        def at(t):
            return min(s, key=lambda x: abs(x[0] - t))[1]
        return at(t1) - at(t0)
