#!/usr/bin/env bash
# The installed tree: make install DESTDIR=... holds everything it should,
# the shared library carries its soname and exports only pprpc_* symbols, a
# program built with `pkg-config --cflags --libs pprpc` links and runs, every
# public header compiles alone as C and as C++, handles of different kinds do
# not convert into each other, and the shipped systemd unit passes
# `systemd-analyze verify`, an installed rank runs with the build tree
# hidden (ggml in PREFIX/lib/pprpc), and the ggml backend plugin compiles
# against the installed headers alone (no libclient/, no proto/).
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
soname=$(sed -n 's/^LIB_SOVERSION := //p' Makefile)
headers="pprpc.h pprpc_graph.h pprpc_blocks.h pprpc_pipeline.h pprpc_ggml.h pprpc_weights.h pprpc/types.h"
for f in bin/pprpcd bin/pprpcctl bin/pp-fence-test lib/libpprpc.so.$soname.0.0 lib/libpprpc.so.$soname lib/libpprpc.so \
	lib/libpprpc.a $(for h in $headers; do echo include/$h; done) lib/pkgconfig/pprpc.pc \
	lib/systemd/system/pprpcd@.service lib/systemd/system/pprpc-llama-server@.service \
	share/pprpc/pprpcd.conf share/pprpc/cluster.conf share/pprpc/llama-server.env \
	share/man/man8/pprpcd.8 share/man/man1/pprpcctl.1 share/man/man1/pp-fence-test.1; do
	[ -e "$p/$f" ] && ok "installed $f" || bad "missing $f"
done
readelf -d "$p/lib/libpprpc.so.$soname.0.0" | grep -q "SONAME.*\[libpprpc.so.$soname\]" && ok "soname libpprpc.so.$soname" ||
	bad "soname"
# Internal helpers and test hooks (pipeline_hook_*) stay hidden.
extra=$(nm -D --defined-only "$p/lib/libpprpc.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^pprpc_/ {print $3}')
[ -z "$extra" ] && ok "libpprpc.so exports only pprpc_* symbols" || bad "exported beyond pprpc_*: $(echo $extra)"
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
	[ "$out" = "$(sed -n 's/^#define PPRPC_VERSION "\(.*\)"$/\1/p' util/version.h)" ] && ok "pkg-config consumer prints $out" || bad "pkg-config consumer"
# Each public header alone, as C and as C++, warning-free.
for h in $headers; do
	printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$dest/one.c"
	cc -std=c99 -Wall -Wextra -Werror -fsyntax-only -I"$p/include" "$dest/one.c" && ok "$h alone as C" || bad "$h as C"
	if command -v g++ >/dev/null; then
		cp "$dest/one.c" "$dest/one.cc"
		g++ -Wall -Wextra -Werror -fsyntax-only -I"$p/include" "$dest/one.cc" && ok "$h alone as C++" || bad "$h as C++"
	fi
done
# Handle kinds are distinct types: a buffer is no timeline (and the
# well-typed call next to it compiles, so the failure is the type's).
cat >"$dest/handles.c" <<'C'
#include <pprpc.h>
int f(pprpc_client *c, pprpc_buffer b, pprpc_timeline t)
{
#ifdef WRONG
	return pprpc_signal(c, b, 1);
#else
	return pprpc_signal(c, t, 1) + pprpc_buffer_free(c, b);
#endif
}
C
cc -fsyntax-only -I"$p/include" "$dest/handles.c" && ok "typed handles: the right kind compiles" || bad "typed handles (right kind)"
cc -fsyntax-only -DWRONG -I"$p/include" "$dest/handles.c" 2>/dev/null && bad "a buffer passed as a timeline compiled" ||
	ok "typed handles: a buffer is refused as a timeline"

# The plugin is a libpprpc user like any other: its sources, copied out of
# the tree (so its own headers are found beside them and nothing else of
# the tree is), compile against the installed headers, ggml's and
# util/ggml_release.h alone.  A copy that includes an internal header must
# fail, or the check would prove nothing.
if [ -e "$p/lib/libggml-pprpc.so" ]; then
	mkdir -p "$dest/plugin/ggml-pprpc"
	cp ggml-pprpc/*.c ggml-pprpc/*.h "$dest/plugin/ggml-pprpc/"
	check() { make --no-print-directory -s plugin-header-check PLUGIN_CHECK_INC="$p/include" \
		PLUGIN_CHECK_SRCS="$(echo "$dest"/plugin/ggml-pprpc/*.c)"; }
	if out=$(check 2>&1); then
		ok "ggml-pprpc/*.c compile against the installed headers only"
	else
		echo "$out" | head -n 20
		bad "ggml-pprpc/*.c against the installed headers"
	fi
	for inc in libclient/client.h proto/pprpc.pb-c.h; do
		sed -i "0,/^#include \"pg.h\"/s||#include \"pg.h\"\n#include \"$inc\"|" "$dest/plugin/ggml-pprpc/graphs.c"
		check >/dev/null 2>&1 && bad "the plugin's check let #include \"$inc\" through" ||
			ok "the plugin's check refuses #include \"$inc\""
		cp ggml-pprpc/graphs.c "$dest/plugin/ggml-pprpc/"
	done
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
	# llama-server's unit, where the build has llama.cpp (its llama-server installed)
	if [ -e "$p/lib/pprpc/llama-server" ]; then
		sed "s|ExecStart=/usr/local/|ExecStart=$p/|" "$p/lib/systemd/system/pprpc-llama-server@.service" \
			>"$dest/units/pprpc-llama-server@.service"
		if out=$(MANPATH="$p/share/man" systemd-analyze verify "$dest/units/pprpc-llama-server@.service" 2>&1) &&
			[ -z "$out" ]; then
			ok "systemd-analyze verify pprpc-llama-server@.service is clean"
		else
			echo "$out"
			bad "systemd-analyze verify pprpc-llama-server@.service"
		fi
	fi
else
	echo "skip: systemd-analyze not installed"
fi
# A rank installs on its own: with the ggml engine, ggml's libraries are in
# PREFIX/lib/pprpc and pprpcd finds them relative to itself.  The installed
# pprpcd runs in a mount namespace where the build tree and ext/ (llama.cpp's
# build) are hidden under empty tmpfs mounts, serves ggml:CPU, and a graph
# goes through the installed plugin: test-backend-ops (from the llama.cpp
# build, outside the namespace) compares the rank's results with its CPU's.
if [ -e "$p/lib/libggml-pprpc.so" ]; then
	root=$PWD
	run=$(readelf -d "$p/bin/pprpcd" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
	[ "$run" = '$ORIGIN/../lib/pprpc' ] && ok "pprpcd RUNPATH is \$ORIGIN/../lib/pprpc" || bad "pprpcd RUNPATH: '$run'"
	ls "$p"/lib/pprpc/libggml-base.so* "$p"/lib/pprpc/libggml.so* >/dev/null 2>&1 && ok "ggml's libraries in lib/pprpc" ||
		bad "no ggml libraries in lib/pprpc"
	nvar=$(ls "$p"/lib/pprpc/libggml-cpu*.so 2>/dev/null | wc -l)
	[ "$nvar" -gt 0 ] && ok "$nvar ggml CPU backend variant(s) in lib/pprpc" || bad "no ggml CPU backend in lib/pprpc"
	hide="mount -t tmpfs none $root/ext && mount -t tmpfs none $root/${BUILD:-build} && [ -z \"\$(ls -A $root/ext)\" ]"
	ns=""
	for u in "unshare -m" "unshare -Urm"; do
		if $u sh -c "$hide" 2>/dev/null; then ns=$u; break; fi
	done
	if [ -z "$ns" ]; then
		bad "cannot hide the build tree (unshare -m / -Urm refused): the installed rank is not tested"
	else
		rm -f "$dest/port"
		$ns sh -c "$hide && exec $p/bin/pprpcd --listen 127.0.0.1:0 --port-file $dest/port --devices ggml:CPU --threads 1 --log-level info" \
			>"$dest/rank.log" 2>&1 &
		rpid=$!
		for _ in $(seq 1 500); do [ -s "$dest/port" ] || ! kill -0 $rpid 2>/dev/null && break; sleep 0.02; done
		if [ -s "$dest/port" ]; then
			ok "the installed pprpcd serves ggml:CPU with the build tree hidden ($ns)"
			maps=$(grep -o '/[^ ]*libggml[^ ]*\.so[^ ]*' /proc/$rpid/maps | sort -u | tr '\n' ' ')
			case "$maps" in
			*"$root/ext"*|"") bad "the rank's ggml libraries: $maps" ;;
			*) ok "the rank maps ggml from the install: $(echo $maps | sed "s|$p/||g")" ;;
			esac
			lb=${LLAMA_BIN:-$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")/build-cpu/bin}
			if [ -n "${SANITIZE:-}" ]; then
				echo "skip: the installed plugin in llama.cpp's (unsanitized) test-backend-ops: SANITIZE build"
			elif GGML_BACKEND_PATH="$p/lib/libggml-pprpc.so" PPRPC_RANKS=127.0.0.1:$(cat "$dest/port") \
				"$lb/test-backend-ops" -b PPRPC0 -o MUL_MAT -p "type_a=f16,type_b=f32,m=16,n=1,k=256" >"$dest/tbo.log" 2>&1 &&
				grep -q "[1-9][0-9]*/[0-9]* tests passed" "$dest/tbo.log"; then
				ok "a graph through the installed plugin: $(grep -o '[0-9]*/[0-9]* tests passed' "$dest/tbo.log" | head -n 1)"
			else
				tail -n 15 "$dest/tbo.log"
				bad "a graph through the installed plugin and the installed rank"
			fi
			# The service's llama-server as its unit runs it (LD_LIBRARY_PATH=lib/pprpc), the
			# build tree hidden from it too: it loads the installed plugin, lists the rank.
			if [ -n "${SANITIZE:-}" ]; then
				echo "skip: the installed plugin in the installed llama-server: SANITIZE build"
			elif [ -e "$p/lib/pprpc/llama-server" ]; then
				$ns sh -c "$hide && LD_LIBRARY_PATH=$p/lib/pprpc GGML_BACKEND_PATH=$p/lib/libggml-pprpc.so \
					PPRPC_RANKS=127.0.0.1:$(cat "$dest/port") exec $p/lib/pprpc/llama-server --list-devices" \
					>"$dest/ls.log" 2>&1
				if grep -q "PPRPC0: pprpc rank0 127.0.0.1:$(cat "$dest/port") ggml:CPU" "$dest/ls.log"; then
					ok "the installed llama-server lists the rank with the build tree hidden"
				else
					tail -n 15 "$dest/ls.log"
					bad "the installed llama-server with the build tree hidden"
				fi
			else
				bad "no lib/pprpc/llama-server installed"
			fi
		else
			cat "$dest/rank.log"
			bad "the installed pprpcd did not start with the build tree hidden"
		fi
		kill -TERM $rpid 2>/dev/null
		wait $rpid 2>/dev/null
	fi
fi

# The installed daemon starts from the shipped example configuration.
"$p/bin/pprpcd" -c "$p/share/pprpc/pprpcd.conf" --check-config >/dev/null && ok "shipped pprpcd.conf validates" ||
	bad "shipped pprpcd.conf"

echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
