#!/bin/sh
# tests/escape/run.sh — the sandbox escape battery, as the current user and, when that is root,
# again as nobody (setpriv), since real users run forkpoint unprivileged.  The binaries are
# copied to a scratch folder under /tmp that both can read; as root a setuid probe owned by
# another user is made for the setuid attempt.  Prints every test line, then the sum:
# "N passed, M failed, K skipped".  KEEP_ESCAPE=1 keeps the scratch folder (configs, state,
# server logs).  ESCAPE_ONLY=NAME[,NAME...] runs only those attempts.
#
# Then the attempts that Landlock would stop anyway run again with Landlock switched off
# (FORKPOINT_SANDBOX_DISABLE=landlock), as each user: the weaker box a host without Landlock
# gets must still contain them.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
src="$BUILD/tests/escape"
# A sanitizer build of the supervisor needs more memory: the battery's memory bounds widen.
case "$BUILD" in *san*) export FP_ESCAPE_SANITIZED=1 ;; esac
if [ ! -x "$src/battery" ] || [ ! -x "$BUILD/forkpoint" ]; then
	echo "escape: $src/battery or $BUILD/forkpoint missing (make BUILD=$BUILD tests)"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
scratch=$(mktemp -d /tmp/fp-escape-XXXXXX) || exit 1
[ -n "${KEEP_ESCAPE:-}" ] || trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"
mkdir "$scratch/bin"
cp "$BUILD/forkpoint" "$BUILD/forkpoint-job" "$src/battery" "$src"/attempts/* "$scratch/bin/"
chmod 755 "$scratch/bin" "$scratch/bin"/*

only=""
[ -n "${ESCAPE_ONLY:-}" ] && only="--only $ESCAPE_ONLY"
me=$(id -un)
suid=""
if [ "$(id -u)" = 0 ]; then
	probe="$scratch/bin/suidprobe-4242"
	cp "$src/attempts/suidprobe" "$probe"
	if chown 4242:4242 "$probe" && chmod 4755 "$probe"; then
		suid=$probe
	fi
fi

pass=0
fail=0
skip=0
tally() { # FILE: add the summary line of one run
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
	if [ -z "$line" ]; then
		echo "escape: the battery run did not finish (see above)"
		fail=$((fail + 1))
		return
	fi
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
	pass=$((pass + ${p:-0}))
	fail=$((fail + ${f:-0}))
	skip=$((skip + ${s:-0}))
}

echo "# escape battery as $me"
out="$scratch/$me.out"
# shellcheck disable=SC2086
"$scratch/bin/battery" --bin "$scratch/bin" --dir "$scratch/$me" --label "$me" --suid "$suid" $only \
	>"$out" 2>&1
grep -v -E '^[0-9]+ passed' "$out"
tally "$out"

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	echo "# escape battery as nobody"
	mkdir "$scratch/nobody"
	chown 65534:65534 "$scratch/nobody"
	out="$scratch/nobody.out"
	# shellcheck disable=SC2086
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$scratch/bin/battery" --bin "$scratch/bin" --dir "$scratch/nobody/run" --label nobody \
		--suid "$suid" $only >"$out" 2>&1
	grep -v -E '^[0-9]+ passed' "$out"
	tally "$out"
elif [ "$(id -u)" = 0 ]; then
	echo "skip - [nobody] the unprivileged run needs setpriv (util-linux)"
	skip=$((skip + 1))
else
	echo "skip - [root] this run is unprivileged already ($me); the root run needs root"
	skip=$((skip + 1))
fi

# Without Landlock: the private root, the job's own uid and the /proc masks must hold alone.
nolandlock="read_state_dir,read_config,read_other_task,read_shadow,write_outside,dev_nodes,dev_nodes_strict"
nolandlock="$nolandlock,setuid_plant,setuid_plant_strict,proc_sysctl,proc_sysctl_strict,proc_info,proc_info_strict"
only="--only ${ESCAPE_ONLY:-$nolandlock}"
echo "# escape battery as $me, without Landlock"
out="$scratch/$me-nolandlock.out"
# shellcheck disable=SC2086
FORKPOINT_SANDBOX_DISABLE=landlock "$scratch/bin/battery" --bin "$scratch/bin" --dir "$scratch/$me-nl" \
	--label "$me, no Landlock" --suid "" $only >"$out" 2>&1
grep -v -E '^[0-9]+ passed' "$out"
tally "$out"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	echo "# escape battery as nobody, without Landlock"
	mkdir "$scratch/nobody-nl"
	chown 65534:65534 "$scratch/nobody-nl"
	out="$scratch/nobody-nolandlock.out"
	# shellcheck disable=SC2086
	FORKPOINT_SANDBOX_DISABLE=landlock setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$scratch/bin/battery" --bin "$scratch/bin" --dir "$scratch/nobody-nl/run" \
		--label "nobody, no Landlock" --suid "" $only >"$out" 2>&1
	grep -v -E '^[0-9]+ passed' "$out"
	tally "$out"
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
