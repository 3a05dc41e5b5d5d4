#!/bin/sh
# Installs what forkpoint needs to build and test, and nothing when it is all there already.
# Debian packages through apt-get (as root, or with sudo), the e2e tests' npm packages into
# tests/e2e/node_modules from the committed lock file.
#
#   scripts/deps.sh           what the build and `make test` need
#   scripts/deps.sh --bench   only what `make bench` adds: bubblewrap, the spawn anchor
set -eu
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--bench" ]; then
	pkgs="bubblewrap"
else
	pkgs="gcc make pkg-config libc6-dev libseccomp-dev libmsgpack-dev libcjson-dev libssl-dev libpcre2-dev \
clang libclang-rt-14-dev util-linux procps python3 bash"
	command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
	command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
fi

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	echo "deps: installing Debian packages:$missing" >&2
	if [ "$(id -u)" = 0 ]; then
		sudo=""
	elif command -v sudo >/dev/null 2>&1; then
		sudo="sudo"
	else
		echo "deps: missing packages:$missing — install them as root (apt-get install$missing)" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ "${1:-}" = "--bench" ]; then
	exit 0
fi

# The end-to-end tests drive forkpoint with the official MCP TypeScript SDK client.
if [ -f tests/e2e/package-lock.json ]; then
	stamp=tests/e2e/node_modules/.forkpoint-lock
	if [ ! -f "$stamp" ] || ! cmp -s tests/e2e/package-lock.json "$stamp"; then
		echo "deps: installing npm packages for tests/e2e" >&2
		(cd tests/e2e && npm ci --silent --no-audit --no-fund >/dev/null)
		cp tests/e2e/package-lock.json "$stamp"
	fi
fi

# ---- the MCP conformance suites (tests/conformance) ----------------------------------------------
# The official suites, supergateway and Node 22 (the suites need Node >= 22), pinned by the lock file
# and installed locally; tests/conformance/run.sh would otherwise install them on first use.
if [ -f tests/conformance/package-lock.json ]; then
	stamp=tests/conformance/node_modules/.forkpoint-lock
	if [ ! -f "$stamp" ] || ! cmp -s tests/conformance/package-lock.json "$stamp"; then
		echo "deps: installing npm packages for tests/conformance" >&2
		(cd tests/conformance && npm ci --silent --no-audit --no-fund >/dev/null)
		cp tests/conformance/package-lock.json "$stamp"
	fi
fi
