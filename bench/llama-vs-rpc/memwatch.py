"""Memory while a side runs: the rank processes' resident memory and the free
memory of their device, sampled the same way for every side (no connection to
any rank: /proc, and nvidia-smi for GPU devices)."""

import shutil
import subprocess
import threading


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def _gpu_free_and_procs(smi):
    """({gpu index: free bytes}, {pid: used bytes}) from nvidia-smi, or ({}, {})."""
    free, used = {}, {}
    try:
        p = subprocess.run([smi, "--query-gpu=index,memory.free", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
        for line in p.stdout.splitlines():
            i, v = [x.strip() for x in line.split(",")]
            free[int(i)] = int(v) * 2**20
        p = subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
        for line in p.stdout.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                used[int(parts[0])] = used.get(int(parts[0]), 0) + int(parts[1]) * 2**20
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    return free, used


class Watch:
    """Samples every `period` s between start() and stop().  Per rank: the
    lowest free memory of its device and the highest memory the rank itself
    held (VmRSS on the CPU; the GPU memory nvidia-smi attributes to it)."""

    def __init__(self, ranks, gpu_index=None, period=0.2):
        self.ranks, self.gpu, self.period = ranks, gpu_index, period
        self.smi = shutil.which("nvidia-smi") if gpu_index is not None else None
        self.free_min = {}
        self.held_max = {}
        self.samples = 0
        self._stop = threading.Event()
        self._t = None

    def _sample(self):
        if self.gpu is not None and self.smi:
            free, used = _gpu_free_and_procs(self.smi)
            dev_free = free.get(self.gpu)
        else:
            used = {}
            dev_free = mem_available()
        for r in self.ranks:
            held = used.get(r.proc.pid) if self.gpu is not None else r.status().get("VmRSS")
            if dev_free is not None:
                self.free_min[r.index] = min(self.free_min.get(r.index, dev_free), dev_free)
            if held is not None:
                self.held_max[r.index] = max(self.held_max.get(r.index, 0), held)
        self.samples += 1

    def _loop(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.period)

    def start(self):
        self._sample()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def stop(self):
        self._stop.set()
        if self._t:
            self._t.join()
        self._sample()
        return self
