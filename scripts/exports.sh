#!/bin/sh
# scripts/exports.sh ARCHIVE... — fails if a job library archive defines a global symbol that is
# not part of its API (fp_*): libforkpoint.a is linked into users' programs, where any other
# global name (frame_read, io_write_full, ...) could clash with one of theirs.  Prints each
# offending symbol as "archive: symbol"; exit 0 when there is none, 1 otherwise, 2 on a missing
# archive or nm failure.  Each archive is also linked into a program that defines two of the
# library's internal names itself, as a user's program might (EXPORTS_LDFLAGS adds link flags:
# -fsanitize=... for the sanitizer build's archive).
set -u
cd "$(dirname "$0")/.."
rc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/user.c" <<'PROG'
#include "forkpoint.h"
int frame_read(void);
int io_write_full(int fd);
int frame_read(void) { return 0; }
int io_write_full(int fd) { return fd; }
int main(void) { fp_close(0); return frame_read() + io_write_full(0); }
PROG
for a in "$@"; do
	if [ ! -f "$a" ]; then
		echo "$a: missing" >&2
		exit 2
	fi
	syms=$(nm -g --defined-only "$a") || exit 2
	bad=$(printf '%s\n' "$syms" | awk 'NF == 3 { print $3 }' | grep -v '^fp_')
	if [ -n "$bad" ]; then
		printf '%s\n' "$bad" | sed "s|^|$a: |"
		rc=1
	fi
	if ! printf '%s\n' "$syms" | awk 'NF == 3 { print $3 }' | grep -q '^fp_open$'; then
		echo "$a: fp_open is not exported"
		rc=1
	fi
	if ! ${CC:-cc} -Irunner/lib -o "$tmp/user" "$tmp/user.c" "$a" ${EXPORTS_LDFLAGS:-} \
		$(pkg-config --libs msgpack libcjson) -lm >"$tmp/ld.log" 2>&1; then
		sed "s|^|$a: |" "$tmp/ld.log" | head -n 5
		echo "$a: a program defining frame_read and io_write_full does not link"
		rc=1
	fi
done
exit $rc
