#!/bin/sh
# make run: a report task through the real MCP code path (forkpoint call starts forkpoint mcp and
# talks to it as an MCP host would), with a live progress bar; then the crash-recovery story:
# the server is killed with SIGKILL mid-run, restarted, and the same task resumes from its last
# checkpoint.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
FP="$PWD/$BUILD/forkpoint"
tmp=$(mktemp -d)
trap 'pkill -KILL -f "$tmp/demo.json" 2>/dev/null || true; rm -rf "$tmp"' EXIT
# The demo config names build/; point it at this build and this checkout.
sed -e "s|\"\.\./\.\./build/|\"$PWD/$BUILD/|g" -e "s|\"\./shell-report.sh\"|\"$PWD/runner/examples/shell-report.sh\"|" \
	runner/examples/demo.json > "$tmp/demo.json"
cfg="$tmp/demo.json"
state="$tmp/state"

echo "== 1. A report task: the call returns a task id at once, progress is polled with durable_task_get =="
"$FP" call generate-report '{"topic":"EV batteries","sections":3,"delayMs":600}' --config "$cfg" --state "$state" >"$tmp/result.json"
grep -E '"(topic|sections|words)"' "$tmp/result.json" | tr -d '\t'
echo

echo "== 2. Crash recovery: a 5-section report; the server is killed with SIGKILL halfway through =="
"$FP" call generate-report '{"topic":"solid-state cells","sections":5,"delayMs":1000}' \
	--config "$cfg" --state "$state" >"$tmp/r2.json" 2>"$tmp/call2.err" &
caller=$!
# Wait until the report is half done (two sections checkpointed by then).
i=0
until "$FP" ls --state "$state" 2>/dev/null | grep -q "working.*\[#####"; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "demo: the task never reached section 3" >&2; exit 1; }
	sleep 0.05
done
id=$("$FP" ls --state "$state" | awk '$3 == "working" {print $1; exit}')
pkill -KILL -f "forkpoint mcp --config $cfg" || true
wait $caller 2>/dev/null || true
echo "forkpoint was killed with SIGKILL. The journal still knows the task:"
"$FP" ls --state "$state"
echo
echo "== 3. Restart: the same task id resumes from its last checkpoint =="
"$FP" call --task "$id" --config "$cfg" --state "$state" >"$tmp/r3.json"
grep -E '"(sections|resumedFrom)"' "$tmp/r3.json" | tr -d '\t'
echo "The job's own log says where it picked up:"
"$FP" logs "$id" --state "$state" | grep -i resumed
echo
echo "Next: point an MCP host at it (README.md), or try a question:"
echo "  build/forkpoint call generate-report '{\"topic\":\"x\",\"ask\":true}' --config runner/examples/demo.json"
echo "(runner/examples/demo.json names the jobs in build/, which plain \`make\` builds)"
