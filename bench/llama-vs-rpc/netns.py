"""--net RATE: the client and every rank in a network namespace of its own,
joined by a bridge through links shaped to RATE.

    lvr<PID>-sw   the "switch": a Linux bridge br0, one port per namespace below
    lvr<PID>-cl   the client (llama.cpp), 10.77.0.1/24 on eth0
    lvr<PID>-rK   rank K (every rank process of every side), 10.77.0.(10+K)/24 on eth0

Each namespace is joined to br0 by a veth pair, and both ends of every pair get
`tbf rate RATE` as their root qdisc: a namespace's egress is shaped on its own
end, its ingress on the switch's end, so a byte from the client to a rank
leaves through two shaped queues, like a host's NIC and the switch port facing
the next host.  Nothing in the root namespace changes (no sysctl, no route, no
interface): everything lives in the namespaces made here, and deleting them
takes their interfaces and qdiscs with them.  The names carry this process's
PID; teardown() deletes every one made, in any state of the setup.

Processes run in a namespace through `ip netns exec NS CMD`, which execs CMD:
the PID Popen returns is the program's own, so it is stopped by that PID.
"""

import os
import re
import shutil
import subprocess
import time

SUBNET = "10.77.0."
CLIENT_ADDR = SUBNET + "1"
FIRST_RANK = 10

_UNITS = {"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
          "kibit": 2**10, "mibit": 2**20, "gibit": 2**30, "tibit": 2**40,
          "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
          "kibps": 8 * 2**10, "mibps": 8 * 2**20, "gibps": 8 * 2**30, "tibps": 8 * 2**40}


class NetError(Exception):
    pass


def parse_rate(rate):
    """bits per second of a tc rate (tc(8) units: bit, kbit, mbit, gbit, ..., bps = bytes/s,
    kibit = 1024 bits; a bare number is bits/s).  ValueError when it is not one."""
    m = re.match(r"^([0-9]+(?:\.[0-9]*)?)([a-zA-Z]*)$", rate.strip())
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError("--net: %r is not a tc rate (e.g. 1gbit, 100mbit, 10gbit)" % rate)
    bits = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if bits < 8e3:
        raise ValueError("--net: %r is below 8 kbit/s" % rate)
    return bits


def unavailable():
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (ip netns add, veth, tc)"
    for tool in ("ip", "tc"):
        if not shutil.which(tool):
            return "%s(8) not found (iproute2)" % tool
    return None


def _sh(argv, timeout=30):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise NetError("%s: exit %d: %s" % (" ".join(argv), p.returncode, (p.stderr or p.stdout).strip()))
    return p.stdout


def list_netns():
    """Names in `ip netns list` (the first word of each line)."""
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    return [l.split()[0] for l in p.stdout.splitlines() if l.strip()]


class Net:
    def __init__(self, rate, prefix=None):
        self.rate = rate
        self.bits = parse_rate(rate)
        # tbf's bucket: 4 ms of the rate (the kernel's 250 Hz tick would need
        # as much on a low-resolution timer), at least 64 KiB so that a
        # 64 KiB GSO segment passes whole; the queue holds 50 ms beyond it
        self.burst = max(int(self.bits / 8 * 0.004), 65536)
        self.latency = "50ms"
        self.prefix = prefix or "lvr%d" % os.getpid()
        self.switch = self.prefix + "-sw"
        self.client = self.prefix + "-cl"
        self.made = []        # namespaces, in order of creation (deleted in reverse)
        self.hosts = {}       # ns -> address
        self.next_rank = FIRST_RANK

    # ---- setup -------------------------------------------------------------------------------
    def up(self):
        """The switch and the client; ranks join with add_rank()."""
        self._ns(self.switch)
        _sh(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        _sh(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        self._host(self.client, CLIENT_ADDR, "cl")
        return self

    def add_rank(self):
        """A new namespace for one rank process: (ns, address)."""
        k = self.next_rank
        if k > 254:
            raise NetError("more than %d rank namespaces" % (255 - FIRST_RANK))
        self.next_rank += 1
        ns = "%s-r%d" % (self.prefix, k - FIRST_RANK)
        addr = SUBNET + str(k)
        self._host(ns, addr, "r%d" % (k - FIRST_RANK))
        return ns, addr

    def _ns(self, ns):
        self.made.append(ns)  # before: a half-made namespace is deleted too
        _sh(["ip", "netns", "add", ns])
        _sh(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _host(self, ns, addr, port):
        self._ns(ns)
        sw = "to-" + port
        _sh(["ip", "-n", self.switch, "link", "add", sw, "type", "veth", "peer", "name", "eth0", "netns", ns])
        _sh(["ip", "-n", self.switch, "link", "set", sw, "master", "br0"])
        _sh(["ip", "-n", self.switch, "link", "set", sw, "up"])
        _sh(["ip", "-n", ns, "addr", "add", addr + "/24", "dev", "eth0"])
        _sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
        for n, dev in ((self.switch, sw), (ns, "eth0")):
            _sh(["tc", "-n", n, "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                 "burst", str(self.burst), "latency", self.latency])
        self.hosts[ns] = addr

    # ---- use ---------------------------------------------------------------------------------
    @staticmethod
    def prefix_of(ns):
        return ["ip", "netns", "exec", ns]

    def client_prefix(self):
        return self.prefix_of(self.client)

    def describe(self):
        return {"rate": self.rate, "rate_bits": self.bits, "tbf": {"burst": self.burst, "latency": self.latency},
                "client": {"ns": self.client, "addr": CLIENT_ADDR}, "switch": self.switch,
                "ranks": {ns: a for ns, a in self.hosts.items() if ns != self.client}}

    def link_check(self, ns, addr, mib=None, timeout=60):
        """Bytes sent from the client to addr (in ns) over TCP, for about a second
        of the rate (4..64 MiB): the rate the link gives, in bits/s."""
        nbytes = int(min(64, max(4, self.bits / 8 / 2**20)) * 2**20) if mib is None else mib * 2**20
        port = 47001
        srv = ("import socket,sys\n"
               "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
               "s.bind((sys.argv[1], %d)); s.listen(1); print('ready', flush=True)\n"
               "c,_=s.accept(); n=0\n"
               "while True:\n"
               "    b=c.recv(1<<20)\n"
               "    if not b: break\n"
               "    n+=len(b)\n"
               "c.sendall(b'%%d' %% n); c.close()\n" % port)
        cli = ("import socket,sys,time\n"
               "n=int(sys.argv[2]); c=socket.create_connection((sys.argv[1], %d), timeout=%d)\n"
               "buf=bytes(1<<20); t=time.monotonic(); left=n\n"
               "while left>0:\n"
               "    k=min(left, len(buf)); c.sendall(buf[:k]); left-=k\n"
               "c.shutdown(socket.SHUT_WR); got=int(c.recv(64)); dt=time.monotonic()-t\n"
               "print(got, dt)\n" % (port, timeout))
        p = subprocess.Popen(self.prefix_of(ns) + ["python3", "-c", srv, addr], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        try:
            if p.stdout.readline().strip() != "ready":
                raise NetError("link check: the receiver in %s did not start: %s" % (ns, p.stderr.read().strip()))
            q = subprocess.run(self.client_prefix() + ["python3", "-c", cli, addr, str(nbytes)], capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            if q.returncode != 0:
                raise NetError("link check to %s: %s" % (addr, q.stderr.strip()[-300:]))
            got, dt = q.stdout.split()
            if int(got) != nbytes:
                raise NetError("link check to %s: %s of %d bytes arrived" % (addr, got, nbytes))
            return {"to": addr, "bytes": nbytes, "s": float(dt), "bits_per_s": nbytes * 8 / float(dt)}
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()

    # ---- teardown ----------------------------------------------------------------------------
    def teardown(self):
        """Delete every namespace made (their veths and qdiscs go with them).
        The processes run in them must be stopped first.  Returns the names
        still listed afterwards (empty when all went)."""
        for ns in reversed(self.made):
            for _ in range(3):
                p = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True, timeout=30)
                if p.returncode == 0 or "No such file" in p.stderr:
                    break
                time.sleep(0.2)
        left = [ns for ns in list_netns() if ns in self.made]
        if not left:
            self.made = []
        return left
