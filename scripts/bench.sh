#!/bin/sh
# Runs the benchmarks (build/tests/bench) in a scratch directory that is removed afterwards.
# BUILD selects the build dir; BENCH_SECONDS and BENCH_ROUNDS set the length and number of the
# measuring rounds (defaults 1 s, 5 rounds: about five minutes on 2 cores); --quick as the first
# argument means 3 rounds of 0.5 s.  Other arguments go to the program (e.g. --only replay,
# --list).  TMPDIR picks the file system measured: the floors are taken in the same directories
# as the figures.  bubblewrap, the spawn anchor, is installed first if it is missing
# (scripts/deps.sh --bench); where that fails its rows are skipped with the reason.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bench="$BUILD/tests/bench"
rounds=${BENCH_ROUNDS:-5}
seconds=${BENCH_SECONDS:-1}
if [ "${1:-}" = "--quick" ]; then
	shift
	rounds=${BENCH_ROUNDS:-3}
	seconds=${BENCH_SECONDS:-0.5}
fi
if [ ! -x "$bench" ]; then
	echo "bench: $bench is missing: run make bench (or make BUILD=$BUILD $bench)" >&2
	exit 1
fi
if ! command -v bwrap >/dev/null 2>&1; then
	scripts/deps.sh --bench || echo "bench: bubblewrap could not be installed; its rows are skipped" >&2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/forkpoint-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
"$bench" --build "$BUILD" --work "$work" --seconds "$seconds" --rounds "$rounds" "$@"
