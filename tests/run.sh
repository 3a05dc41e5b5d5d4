#!/bin/sh
# Runs every test: the C unit test binaries, the end-to-end suite (the real binary driven by the
# official MCP TypeScript SDK client), and the sandbox escape battery.  Each part prints its own
# report; the last line sums them up as "N passed, M failed".
# BUILD selects the build dir (build, or build/san for the sanitizer build).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
total_pass=0
total_fail=0
failed_parts=""

# Node for the e2e and crash tests: the system's if it is 20 or newer, else the Node 22 that
# scripts/deps.sh installs locally for the conformance suites (Debian 12 ships Node 18).
NODE=node
if ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null &&
	[ -x tests/conformance/node_modules/.bin/node ]; then
	NODE=$PWD/tests/conformance/node_modules/.bin/node
fi

add() { # add PART PASS FAIL
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	if [ "$3" -ne 0 ]; then failed_parts="$failed_parts $1"; fi
}

# counts FILE RC: p and f from FILE's last "N passed, M failed" line (line holds it, empty if
# there is none); a non-zero RC with nothing failed counts as one failure.
counts() {
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	p=${p:-0}
	f=${f:-0}
	if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
}

# ---- layers: no file includes a header of a layer above its own (scripts/layers.sh) ----
if out=$(bash scripts/layers.sh); then
	echo "layers: ok"
	add layers 1 0
else
	echo "$out"
	echo "layers: FAILED (a file includes a header of a layer above it; see docs/HACKING.md)"
	add layers 0 1
fi

# ---- exports: the job library archives define no global symbol but the fp_ API ----
case "$BUILD" in
*san*) exports_ldflags="-fsanitize=address,undefined" ;;
*) exports_ldflags= ;;
esac
if out=$(EXPORTS_LDFLAGS=$exports_ldflags sh scripts/exports.sh "$BUILD/libforkpoint.a" \
	"$BUILD/plain-libforkpoint.a" 2>&1); then
	echo "exports: ok"
	add exports 1 0
else
	echo "$out"
	echo "exports: FAILED (libforkpoint.a must define only fp_ symbols; see GNUmakefile, fp_lib)"
	add exports 0 1
fi

# ---- unit tests: each binary ends with "N passed, M failed" ----
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	out=$(mktemp)
	"$t" >"$out" 2>&1
	counts "$out" $?
	if [ "$f" -ne 0 ] || [ -z "$line" ]; then
		cat "$out"
		[ -z "$line" ] && [ "$f" -eq 0 ] && f=1
	fi
	echo "unit  $name: $p passed, $f failed"
	add "$name" "$p" "$f"
	rm -f "$out"
done

# ---- sandbox escape battery ----
if [ -x tests/escape/run.sh ]; then
	out=$(mktemp)
	tests/escape/run.sh >"$out" 2>&1
	counts "$out" $?
	[ "$f" -ne 0 ] && cat "$out"
	grep -E '^(ok|not ok|skip)' "$out" | sed 's/^/escape /' || true
	echo "escape battery: $p passed, $f failed"
	add escape "$p" "$f"
	rm -f "$out"
fi

# ---- end-to-end tests through the official SDK client ----
if [ -d tests/e2e/node_modules ]; then
	out=$(mktemp)
	"$NODE" --test --test-concurrency=1 --test-reporter=spec tests/e2e/ >"$out" 2>&1
	rc=$?
	p=$(grep -E '^(ℹ|#) pass [0-9]+' "$out" | tail -n 1 | sed 's/.* pass //')
	f=$(grep -E '^(ℹ|#) fail [0-9]+' "$out" | tail -n 1 | sed 's/.* fail //')
	p=${p:-0}; f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	if [ "$f" -ne 0 ]; then cat "$out"; else grep -E '^\s*(✔|✖|﹣)' "$out" | head -200; fi
	echo "e2e: $p passed, $f failed"
	add e2e "$p" "$f"
	rm -f "$out"
else
	echo "e2e: tests/e2e/node_modules missing (run scripts/deps.sh)"
	add e2e 0 1
fi

# ---- the official MCP conformance suites (the stable set, and the 2026-07-28 required set with its extension scenarios) ----
if [ -x tests/conformance/run.sh ]; then
	out=$(mktemp)
	tests/conformance/run.sh >"$out" 2>&1
	counts "$out" $?
	if [ "$f" -ne 0 ]; then cat "$out"; else grep -E '^(ok|FAIL|xfail|XPASS|skip)' "$out" | sed 's/^/conformance /'; fi
	echo "conformance: $p passed, $f failed"
	add conformance "$p" "$f"
	rm -f "$out"
fi

# ---- crash-recovery torture: SIGKILLs on timers, on acknowledgements read and on inotify events
# inside compaction, segment roll, blob and upload commits and start-up; invariants checked after
# each restart (tests/crash/crash.mjs; `make torture N=1000` is the long run) ----
case "$BUILD" in
*san*) kills=${KILLS:-50} ;;   # the sanitizer build is slower; the plain build does the full run
*) kills=${KILLS:-250} ;;
esac
out=$(mktemp)
"$NODE" tests/crash/crash.mjs --kills "$kills" >"$out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then tail -n 4 "$out"; else head -c 20000 "$out"; fi
if [ "$rc" -eq 0 ]; then add crash "$kills" 0; else add crash 0 1; fi
rm -f "$out"

# ---- fuzzing: a short libFuzzer run of every target (journal, frames, config, schema, JSON-RPC) ----
case "$BUILD" in
*san*) ;;
*)
	if command -v clang >/dev/null 2>&1; then
		out=$(mktemp)
		make --no-print-directory fuzz-run FUZZ_SECONDS="${FUZZ_SECONDS:-12}" >"$out" 2>&1
		rc=$?
		grep -E '^fuzz ' "$out" || cat "$out"
		if [ "$rc" -ne 0 ]; then
			# The failing target's own words, short enough to survive a log tail: what it
			# reported, the top of the stack and where the input was saved.
			for log in build/fuzz/*.log; do
				grep -qE '^Done [0-9]+ runs' "$log" && continue
				echo "---- $log"
				grep -E 'ERROR|SUMMARY|ALARM|Timeout|timeout|deadly|fuzz_[a-z]+:|Test unit written|out-of-memory|leak| #[0-4] 0x' \
					"$log" | cut -c1-300 | head -n 24
			done
		fi
		if [ "$rc" -eq 0 ]; then add fuzz 5 0; else add fuzz 0 1; fi
		rm -f "$out"
	else
		echo "fuzz: skipped (clang not installed)"
	fi
	;;
esac

[ -n "$failed_parts" ] && echo "failing:$failed_parts"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
