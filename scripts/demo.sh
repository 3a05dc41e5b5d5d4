#!/bin/sh
# make run: a report task through the real MCP code path (forkpoint call starts forkpoint mcp and
# talks to it as an MCP host would), with a live progress bar.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The demo config names build/; point it at this build and this checkout.
sed -e "s|\"\.\./\.\./build/|\"$PWD/$BUILD/|g" -e "s|\"\./shell-report.sh\"|\"$PWD/runner/examples/shell-report.sh\"|" \
	runner/examples/demo.json > "$tmp/demo.json"

echo "== forkpoint call generate-report: a background task, polled through durable_task_get =="
"$BUILD/forkpoint" call generate-report '{"topic":"EV batteries","sections":4,"delayMs":700}' \
	--config "$tmp/demo.json" --state "$tmp/state"
echo
echo "Try it with a question:  $BUILD/forkpoint call generate-report '{\"topic\":\"x\",\"ask\":true}' --config runner/examples/demo.json"
