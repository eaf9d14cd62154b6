"""--disk-rate: a disk of its own for the client and for every rank, on one host.

On one machine the client's model file and the ranks' copies share a disk: a
rank reading its share while llama.cpp reads the whole file slows both down,
and a cold load measures the shared disk, not hosts with disks of their own
(issue 30's setting: each rank reads its share from its own storage).  Each
process (the client's tools, each rank) runs in a block-I/O cgroup of its own
whose reads from the model's disk are throttled to RATE, so they behave as
separate disks of that speed as long as their sum stays under what the real
disk does.  cgroup v1 blkio (blkio.throttle.read_bps_device) or v2 io.max.
Needs root."""

import os

V1 = "/sys/fs/cgroup/blkio"
V2 = "/sys/fs/cgroup"


class DiskError(Exception):
    pass


def parse_rate(text):
    """MB/s (10^6 bytes) as an int > 0; ValueError otherwise."""
    try:
        v = int(text)
    except ValueError:
        raise ValueError("--disk-rate: a whole number of MB/s, not %r" % text)
    if v <= 0:
        raise ValueError("--disk-rate must be > 0 MB/s")
    return v


def disk_of(path):
    """major:minor of the whole disk that holds path (a partition's parent)."""
    st = os.stat(path)
    dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    sysdev = "/sys/dev/block/%s" % dev
    if not os.path.exists(sysdev):
        raise DiskError("%s is on %s, not a block device (a filesystem without one: tmpfs, overlay?)" % (path, dev))
    if os.path.exists(os.path.join(sysdev, "partition")):
        with open(os.path.join(os.path.realpath(sysdev), "..", "dev")) as f:
            dev = f.read().strip()
    return dev


def unavailable():
    """Why --disk-rate cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (block-I/O cgroups)"
    if os.path.exists(os.path.join(V1, "blkio.throttle.read_bps_device")):
        return None
    try:
        # v2: the io controller handed to the root's children (not enabled
        # here: that would change the host's cgroup setup)
        with open(os.path.join(V2, "cgroup.subtree_control")) as f:
            if "io" in f.read().split():
                return None
    except OSError:
        pass
    return "no block-I/O cgroup controller for new cgroups (cgroup v1 blkio, or v2 io in cgroup.subtree_control)"


class Disks:
    """One cgroup per name (client, rank0, rank1, ...), made on first use."""

    def __init__(self, rate_mbps, model):
        self.rate = rate_mbps * 1000 * 1000
        self.dev = disk_of(model)
        self.v1 = os.path.exists(os.path.join(V1, "blkio.throttle.read_bps_device"))
        self.prefix_name = "lvr%d" % os.getpid()
        self.made = []

    def _dir(self, name):
        return os.path.join(V1 if self.v1 else V2, "%s-%s" % (self.prefix_name, name))

    def _make(self, name):
        d = self._dir(name)
        if d in self.made:
            return d
        try:
            os.makedirs(d, exist_ok=True)
            self.made.append(d)
            knob, line = (("blkio.throttle.read_bps_device", "%s %d\n") if self.v1 else ("io.max", "%s rbps=%d\n"))
            with open(os.path.join(d, knob), "w") as f:
                f.write(line % (self.dev, self.rate))
        except OSError as e:
            raise DiskError("cgroup %s: %s" % (d, e))
        return d

    def prefix(self, name):
        """A command prefix that puts the command (and what it starts) in
        name's cgroup before it runs."""
        procs = os.path.join(self._make(name), "cgroup.procs")
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs]

    def describe(self):
        return {"rate_mbps": self.rate // 1000000, "device": self.dev, "cgroups": "v1 blkio" if self.v1 else "v2 io"}

    def down(self):
        """Remove the cgroups (their processes are gone).  Returns those left."""
        left = []
        for d in self.made:
            try:
                os.rmdir(d)
            except OSError:
                left.append(d)
        self.made = []
        return left
