#!/bin/sh
# scripts/gen-docs.sh [--check] PPRPCD — the settings in README.md (its table),
# doc/man/pprpcd.8 (OPTIONS) and conf/pprpcd.conf (all of it), as
# `PPRPCD --help-table md|roff|conf` prints them from the one table of
# settings in daemon/server/options.c.  `make docs` writes them; `make unit`
# runs it with --check, which changes nothing and fails, with the diff, when
# a file differs from the table (then: edit the table, run make docs).  Both
# also check that the example file's values are pprpcd's defaults.
set -eu
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
pprpcd=${1:?usage: scripts/gen-docs.sh [--check] PPRPCD}
tmp=$(mktemp -d /tmp/pprpc-docs-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0

gen() {
	"$pprpcd" --help-table "$1" >"$tmp/gen" || { echo "gen-docs: $pprpcd --help-table $1 failed" >&2; exit 1; }
}

# $tmp/new against FILE: written, or (--check) compared.
update() {
	if cmp -s "$1" "$tmp/new"; then
		[ $check = 0 ] || echo "ok: $1 matches the settings table"
		return 0
	fi
	if [ $check = 1 ]; then
		echo "FAIL: $1 differs from the settings table in daemon/server/options.c (edit the table, then make docs):"
		diff -u "$1" "$tmp/new" | head -40
		fail=1
	else
		cp "$tmp/new" "$1"
		echo "gen-docs: wrote $1"
	fi
}

# FILE with the lines between its BEGIN and END marker lines replaced by
# the table in FORMAT.
splice() {
	gen "$4"
	if [ "$(grep -cxF -- "$2" "$1")" != 1 ] || [ "$(grep -cxF -- "$3" "$1")" != 1 ]; then
		echo "FAIL: $1 needs exactly one line '$2' and one '$3'"
		exit 1
	fi
	BEGIN=$2 END=$3 GEN=$tmp/gen awk '
		$0 == ENVIRON["END"] { skip = 0 }
		!skip { print }
		$0 == ENVIRON["BEGIN"] { while ((getline l < ENVIRON["GEN"]) > 0) print l; skip = 1 }' "$1" >"$tmp/new"
	update "$1"
}

splice README.md '<!-- settings: generated from daemon/server/options.c by make docs -->' \
	'<!-- end of settings -->' md
splice doc/man/pprpcd.8 '.\" settings: generated from daemon/server/options.c by make docs' \
	'.\" end of settings' roff
gen conf
cp "$tmp/gen" "$tmp/new"
update conf/pprpcd.conf

# Every flag of --help (the table's and the fixed ones) in the man page.
"$pprpcd" --help | sed -n 's/^  \(-c, \)\{0,1\}--\([a-z-]*\).*/\2/p' >"$tmp/flags"
sed -n 's/^\.BI\{0,1\} //p' doc/man/pprpcd.8 | sed 's/[\\"]//g' >"$tmp/manflags"
missing=
while read -r flag; do
	grep -Eq -- "(^|, )--$flag( |\$)" "$tmp/manflags" || missing="$missing --$flag"
done <"$tmp/flags"
if [ -n "$missing" ]; then
	echo "FAIL: doc/man/pprpcd.8 lacks$missing"
	fail=1
else
	[ $check = 0 ] || echo "ok: doc/man/pprpcd.8 has all $(wc -l <"$tmp/flags") flags of pprpcd --help"
fi

# "Values below are the defaults": the file read back gives what no file gives.
"$pprpcd" -c conf/pprpcd.conf --check-config | sed 1d >"$tmp/file" &&
	"$pprpcd" -c /dev/null --check-config | sed 1d >"$tmp/none" || fail=1
if cmp -s "$tmp/file" "$tmp/none"; then
	[ $check = 0 ] || echo "ok: conf/pprpcd.conf holds pprpcd's defaults"
else
	echo "FAIL: conf/pprpcd.conf does not give pprpcd's defaults:"
	diff -u "$tmp/none" "$tmp/file" | head -20
	fail=1
fi
exit $fail
