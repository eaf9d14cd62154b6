#!/usr/bin/env bash
# The installed tree: make install DESTDIR=... holds everything it should,
# the shared library carries its soname, a program built with
# `pkg-config --cflags --libs pprpc` links and runs, and the shipped systemd
# unit passes `systemd-analyze verify`.
set -u
cd "$(dirname "$0")/../.."
dest=$(mktemp -d /tmp/pprpc-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

make --no-print-directory install DESTDIR="$dest" PREFIX=/usr/local >"$dest.log" 2>&1 || { cat "$dest.log"; bad "make install"; }
rm -f "$dest.log"
p="$dest/usr/local"
for f in bin/pprpcd bin/pprpcctl bin/pp-fence-test lib/libpprpc.so.1.0.0 lib/libpprpc.so.1 lib/libpprpc.so \
	lib/libpprpc.a include/pprpc.h include/pprpc/types.h lib/pkgconfig/pprpc.pc \
	lib/systemd/system/pprpcd@.service share/pprpc/pprpcd.conf share/pprpc/cluster.conf \
	share/man/man8/pprpcd.8 share/man/man1/pprpcctl.1 share/man/man1/pp-fence-test.1; do
	[ -e "$p/$f" ] && ok "installed $f" || bad "missing $f"
done
readelf -d "$p/lib/libpprpc.so.1.0.0" | grep -q 'SONAME.*\[libpprpc.so.1\]' && ok "soname libpprpc.so.1" || bad "soname"
# The ggml backend plugin, where the build had the pinned llama.cpp: it
# exports ggml_backend_init and nothing else.
if [ -e build/lib/libggml-pprpc.so ] || [ -e "${BUILD:-build}/lib/libggml-pprpc.so" ]; then
	if [ -e "$p/lib/libggml-pprpc.so" ]; then
		syms=$(nm -D --defined-only "$p/lib/libggml-pprpc.so" | awk '{print $3}' | tr '\n' ' ')
		[ "$syms" = "ggml_backend_init " ] && ok "libggml-pprpc.so exports only ggml_backend_init" ||
			bad "libggml-pprpc.so exports: $syms"
	else
		bad "missing lib/libggml-pprpc.so"
	fi
fi

# A consumer built the documented way (with the library's sanitizers when
# the tree was built with SANITIZE=...: the ASan runtime must come first).
cat >"$dest/hello.c" <<'C'
#include <stdio.h>
#include <pprpc.h>
int main(void) { printf("%s\n", pprpc_version_string()); return 0; }
C
flags=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --define-variable=prefix="$p" --cflags --libs pprpc) &&
	cc ${SANITIZE:+-fsanitize=$SANITIZE} -o "$dest/hello" "$dest/hello.c" $flags && out=$(LD_LIBRARY_PATH="$p/lib" "$dest/hello") &&
	[ "$out" = "0.1.0" ] && ok "pkg-config consumer prints $out" || bad "pkg-config consumer"
# The header alone compiles as C++ too.
if command -v g++ >/dev/null; then
	echo '#include <pprpc.h>
int main() { return pprpc_strerror(0) ? 0 : 1; }' >"$dest/cxx.cc"
	g++ -fsyntax-only -I"$p/include" "$dest/cxx.cc" && ok "header compiles as C++" || bad "header as C++"
fi

# The unit, with ExecStart pointing at the installed binary.
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$dest/units"
	sed "s|ExecStart=/usr/local/bin/pprpcd|ExecStart=$p/bin/pprpcd|" "$p/lib/systemd/system/pprpcd@.service" \
		>"$dest/units/pprpcd@.service"
	if out=$(MANPATH="$p/share/man" systemd-analyze verify "$dest/units/pprpcd@.service" 2>&1) && [ -z "$out" ]; then
		ok "systemd-analyze verify is clean"
	else
		echo "$out"
		bad "systemd-analyze verify"
	fi
else
	echo "skip: systemd-analyze not installed"
fi
# The installed daemon starts from the shipped example configuration.
"$p/bin/pprpcd" -c "$p/share/pprpc/pprpcd.conf" --check-config >/dev/null && ok "shipped pprpcd.conf validates" ||
	bad "shipped pprpcd.conf"

echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
