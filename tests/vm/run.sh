#!/bin/bash
# tests/vm/run.sh — real RDMA for pprpc on a machine without RDMA hardware:
# boot Debian's distribution kernel under QEMU with Soft-RoCE (rdma_rxe) and
# run the project's RDMA tests inside (tests/vm/guest.sh).
#
#   tests/vm/run.sh BUILD_DIR        (make test-rdma calls it)
#
# The guest is assembled from Debian packages only: the kernel package is
# downloaded and unpacked (not installed), the initramfs holds busybox,
# rdma-core's rxe provider, perftest, iproute2 and our binaries with their
# shared libraries.  The guest has no network device: rxe sits on a dummy
# interface (10.0.0.1) and every RDMA byte stays inside the guest.
#
# Exit: 0 all guest checks passed; 1 a check failed; 77 the VM cannot run
# here (reason printed: no qemu, no kernel package, ...).
#
# Lessons kept from /work/shared/rxe-vm (the reference this is based on):
#  - a /dev/kvm backed by kvm_pvm only runs PVM guest kernels: Debian's
#    kernel hangs; real KVM is detected by kvm_intel/kvm_amd, else TCG;
#  - under TCG use -cpu qemu64 (glibc picks SSE2 paths; faster than
#    emulated AVX), and compare ratios, never absolute numbers;
#  - rdma_rxe needs crc32_generic (loaded at run time, not in modules.dep)
#    and the .deb ships no modules.dep (depmod -b);
#  - rxe on lo breaks rdma_cm, veth pairs and netns do not work: one rxe on
#    a dummy interface, server and client on its address;
#  - the rxe provider (librxe-rdmav34.so, rxe.driver) and libgcc_s are
#    dlopen()ed: ldd does not list them.
set -euo pipefail

BUILD=$(cd "${1:-build}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$BUILD/vm
VM_MEM=${VM_MEM:-3G}
VM_CPUS=${VM_CPUS:-2}
VM_TIMEOUT=${VM_TIMEOUT:-420}
MTU=${MTU:-9000}
ARCH_LIB=/usr/lib/x86_64-linux-gnu
mkdir -p "$WORK"
skip() { echo "test-rdma: SKIPPED: $*"; exit 77; }
t0=$(date +%s)

# ---- what the host must have ------------------------------------------------------
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (scripts/setup-debian.sh installs qemu-system-x86)"
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 || skip "busybox (static) not installed"
for b in ib_write_bw ib_read_bw ib_write_lat rdma ibv_devinfo cpio depmod modprobe; do
	command -v $b >/dev/null || skip "$b not found (perftest, rdma-core, iproute2, cpio, kmod)"
done
[ -f $ARCH_LIB/libibverbs/librxe-rdmav34.so ] || skip "rxe provider not installed (ibverbs-providers)"
for f in bin/pprpcd bin/pprpcctl bin/bench-rdma bin/pp-fence-test tests/test_rdma_ring; do
	[ -x "$BUILD/$f" ] || { echo "test-rdma: $BUILD/$f missing (build first)"; exit 1; }
done
# The help text is read whole first: under pipefail, `grep -q` closing the
# pipe early would fail the check with SIGPIPE once the text passes 4 KiB.
help=$("$BUILD/bin/pprpcd" --help)
[[ $help == *--rdma-chunk* ]] || { echo "test-rdma: pprpcd built without RDMA"; exit 1; }

if [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
	ACCEL="-accel kvm -cpu host"; CRC="crc32_generic crc32_pclmul"
else
	ACCEL="-accel tcg,thread=multi -cpu qemu64"; CRC="crc32_generic"
fi
echo "test-rdma: accelerator: ${ACCEL%% -cpu*}"

# ---- the distribution kernel, unpacked once ------------------------------------------
if [ ! -f "$WORK/kernel/.done" ]; then
	rm -rf "$WORK/kernel" "$WORK/debs"; mkdir -p "$WORK/debs" "$WORK/kernel"
	KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	[ -n "$KPKG" ] || skip "apt-cache knows no linux-image-amd64 (run apt-get update)"
	( cd "$WORK/debs" && apt-get download -q "$KPKG" >/dev/null 2>&1 ) || skip "cannot download $KPKG"
	dpkg-deb -x "$WORK"/debs/"$KPKG"_*.deb "$WORK/kernel"
	KV=$(ls "$WORK/kernel/lib/modules")
	depmod -b "$WORK/kernel" "$KV"
	touch "$WORK/kernel/.done"
fi
KV=$(ls "$WORK/kernel/lib/modules")
VMLINUZ=$WORK/kernel/boot/vmlinuz-$KV
[ -f "$VMLINUZ" ] || skip "no kernel image in the unpacked package"

# ---- initramfs ---------------------------------------------------------------------------
R=$WORK/root
rm -rf "$R"
mkdir -p "$R"/{usr/bin,usr/sbin,usr/lib64,$ARCH_LIB,etc,proc,sys,dev,tmp,run,root,opt/pprpc}
ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"; ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"

: > "$R/etc/modules.order"
for m in $CRC rdma_rxe rdma_ucm ib_uverbs dummy; do
	modprobe -d "$WORK/kernel" -S "$KV" --show-depends "$m"
done | awk '$1=="insmod" && !seen[$2]++ {print $2}' | while read -r ko; do
	rel=${ko#"$WORK/kernel"}
	mkdir -p "$R$(dirname "$rel")"; cp "$ko" "$R$rel"; echo "$rel" >> "$R/etc/modules.order"
done

copy_with_libs() {   # file [dest]: the file and its shared-library closure
	local f=$1 dst=${2:-$1} p d
	mkdir -p "$R$(dirname "$dst")"; cp -L "$f" "$R$dst"
	for p in $(ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^[ \t]*\/lib64\//{print $1}'); do
		d=$(readlink -f "$(dirname "$p")")
		[ -e "$R$d/$(basename "$p")" ] && continue
		mkdir -p "$R$d"; cp -L "$p" "$R$d/$(basename "$p")"
	done
}
for b in ib_write_bw ib_read_bw ib_write_lat rdma ibv_devinfo; do copy_with_libs "$(command -v $b)" /usr/bin/$b; done
copy_with_libs "$(command -v ip)" /usr/sbin/ip
copy_with_libs $ARCH_LIB/libibverbs/librxe-rdmav34.so
copy_with_libs $ARCH_LIB/libgcc_s.so.1
mkdir -p "$R/etc/libibverbs.d"; cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
for f in bin/pprpcd bin/pprpcctl bin/bench-rdma bin/pp-fence-test tests/test_rdma_ring; do
	copy_with_libs "$BUILD/$f" "/opt/pprpc/$(basename "$f")"
done
# PPRPCD_BASELINE=path: another pprpcd build for SECTIONS=abtest (this
# tree's, or PPRPCD_CANDIDATE's, against it, paired, in one boot).
[ -n "${PPRPCD_BASELINE:-}" ] && copy_with_libs "$PPRPCD_BASELINE" /opt/pprpc/pprpcd-baseline
copy_with_libs "${PPRPCD_CANDIDATE:-$BUILD/bin/pprpcd}" /opt/pprpc/pprpcd-candidate
cp "$SRC/tests/vm/guest.sh" "$R/opt/pprpc/guest.sh"

cp /bin/busybox "$R/usr/bin/busybox"
for a in $(/bin/busybox --list); do
	[ -e "$R/usr/bin/$a" ] || [ -e "$R/usr/sbin/$a" ] || ln -s busybox "$R/usr/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\n' > "$R/etc/passwd"
printf 'root:x:0:\nuser:x:1000:\n' > "$R/etc/group"
printf '127.0.0.1 localhost\n10.0.0.1 rxehost\n' > "$R/etc/hosts"
cat > "$R/init" <<INIT
#!/bin/sh
export PATH=/opt/pprpc:/usr/sbin:/usr/bin HOME=/root
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
# /tmp is the initramfs's own (writable) directory, not a tmpfs mounted over
# it: a tree checked out under /tmp has its llama.cpp libraries copied to
# the same path here (copy_with_libs), where the binaries' RUNPATH finds them.
mkdir -p /tmp; chmod 1777 /tmp
while read -r m; do insmod \$m 2>/dev/null || echo "note: insmod \${m##*/} failed"; done < /etc/modules.order
MIN_RATIO=${MIN_RATIO:-} MTU=$MTU SECTIONS=${SECTIONS:-all} ROUNDS=${ROUNDS:-6} SETTLE=${SETTLE:-3} sh /opt/pprpc/guest.sh
echo "VM-EXIT: \$?"
sync; poweroff -f
INIT
chmod +x "$R/init"
( cd "$R" && find . -print0 | cpio --null -o -H newc --quiet ) > "$WORK/initramfs.cpio"
echo "test-rdma: kernel $KV, initramfs $(du -h "$WORK/initramfs.cpio" | cut -f1), prepared in $(( $(date +%s) - t0 )) s"

# ---- boot --------------------------------------------------------------------------------
set +e
timeout "$VM_TIMEOUT" qemu-system-x86_64 $ACCEL -smp "$VM_CPUS" -m "$VM_MEM" \
	-nodefaults -no-user-config -display none -serial stdio -no-reboot \
	-kernel "$VMLINUZ" -initrd "$WORK/initramfs.cpio" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" </dev/null | tr -d '\r' | tee "$WORK/vm.log"
qrc=${PIPESTATUS[0]}
set -e
echo "test-rdma: VM ran, qemu rc=$qrc, total $(( $(date +%s) - t0 )) s; log $WORK/vm.log"
if ! grep -q '^VM-EXIT: ' "$WORK/vm.log"; then
	grep -q 'RXE-READY' "$WORK/vm.log" || skip "the guest did not come up (qemu rc=$qrc; see $WORK/vm.log)"
	echo "test-rdma: FAILED: the guest did not finish (timeout ${VM_TIMEOUT}s?)"
	exit 1
fi
grep -E '^(CHECK|RDMA-SUMMARY)' "$WORK/vm.log" || true
grep -q '^VM-EXIT: 0$' "$WORK/vm.log" && grep -q '^RDMA-SUMMARY: .*result=PASS' "$WORK/vm.log"
