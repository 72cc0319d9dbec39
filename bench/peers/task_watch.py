"""Watches a cluster run from outside, the same way for every framework
(bench/embedding.sh): each task's peak resident memory (VmHWM, sampled every
50 ms until it exits), and the bytes sent over the loopback interface
(its transmitted bytes in /proc/net/dev, TCP/IP headers included), read
when the timed steps start and end. The run
must have a network namespace of its own (embedding.sh starts it under
`unshare -n` and passes --private-net), so that lo carries its traffic
only; own_loopback() brings lo up there."""
import subprocess
import threading
import time




def own_loopback(private):
    """`private`: this process runs in a network namespace of its own (the
    caller started it under `unshare -n`, as bench/embedding.sh does): lo is
    brought up, and counts this run's traffic only. Returns `private`."""
    if private:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    return private


def lo_bytes():
    """Bytes sent over the loopback interface of this network namespace so
    far (/proc/net/dev is per namespace; /sys/class/net is the machine's)."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, counters = line.partition(":")
            if name.strip() == "lo":
                return int(counters.split()[8])
    raise SystemExit("task_watch: no lo in /proc/net/dev")


def _read(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(l.split()[1]) for l in f if l.startswith("VmHWM:")), 0)
    except (OSError, StopIteration, ValueError):
        return None


class TaskWatch:
    """watch(name, pid) starts sampling a task's peak memory (samples[name]:
    [(time, peak_kb)])."""

    def __init__(self, every=0.05):
        self.samples = {}
        self._every = every
        self._lock = threading.Lock()

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
