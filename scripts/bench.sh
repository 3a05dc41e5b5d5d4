#!/bin/sh
# Runs the benchmarks (build/tests/bench) in a scratch directory that is removed afterwards.
# BUILD selects the build dir; BENCH_SECONDS and BENCH_ROUNDS set the length and number of the
# measuring rounds (defaults 1 s, 5 rounds: about a minute on 2 cores); extra arguments go
# to the program (e.g. --only replay, --list).  TMPDIR picks the file system measured: the
# baselines are taken in the same directories as the figures.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bench="$BUILD/tests/bench"
if [ ! -x "$bench" ]; then
	echo "bench: $bench is missing: run make bench (or make BUILD=$BUILD $bench)" >&2
	exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/forkpoint-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
"$bench" --build "$BUILD" --work "$work" \
	--seconds "${BENCH_SECONDS:-1}" --rounds "${BENCH_ROUNDS:-5}" "$@"
