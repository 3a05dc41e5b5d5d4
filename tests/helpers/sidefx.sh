#!/bin/bash
# tests/helpers/sidefx.sh — the crash test's job with side effects: it runs STEPS steps and
# appends every side effect to LOGDIR/<task id>.log, a folder outside the state dir that no
# crash or recovery touches, so the test can prove which steps ran in which attempt.
#
#   sidefx.sh LOGDIR STEPS DELAY_MS PAD IDIOM PRE_MS
#
# Log lines: "<µs since the epoch> <attempt>.<pid>.<start µs> resume|begin|done <step>", written
# with builtins only (bash's EPOCHREALTIME, no fork), so a line lands within microseconds of the
# event it records.  The
# checkpoint is "<step>:" followed by PAD bytes (PAD > 1024 puts it in the blob store).  After each
# checkpoint the job reports "Checkpointed <step>": whoever sees that progress knows the step's
# checkpoint is durable.  IDIOM "exact" resumes with the documented idiom (restore: 0 has a
# checkpoint, 4 has none, anything else means the supervisor is gone and the job stops);
# "legacy" uses the older `|| step=0`, which re-runs steps when restore fails for another reason.
# PRE_MS > 0 waits that long before restore, widening the window in which a crash or a cancel
# lands between an attempt's start and its restore.
set -u
log=$1/${FORKPOINT_TASK_ID:-none}.log
steps=$2
printf -v delay '%d.%03d' $(($3 / 1000)) $(($3 % 1000))
printf -v pad "%$4s" ""
pad=${pad// /x}
now() { t=${EPOCHREALTIME/./}; }
now
tok=${FORKPOINT_ATTEMPT:-0}.$$.$t

say() { now; echo "$t $tok $1 $2" >>"$log"; }

if [ "${6:-0}" -gt 0 ]; then
	printf -v pre '%d.%03d' $(($6 / 1000)) $(($6 % 1000))
	sleep "$pre"
fi
if [ "$5" = legacy ]; then
	saved=$(forkpoint-job restore) || saved=0
else
	saved=$(forkpoint-job restore) || case $? in 4) saved=0 ;; *) exit 1 ;; esac
fi
step=${saved%%:*}
case $step in '' | *[!0-9]*) forkpoint-job fail "unreadable checkpoint"; exit 1 ;; esac
say resume "$step"
while [ "$step" -lt "$steps" ]; do
	step=$((step + 1))
	say begin "$step"
	sleep "$delay"
	say done "$step"
	printf '%s:%s' "$step" "$pad" | forkpoint-job checkpoint || exit 1
	forkpoint-job progress - "Checkpointed $step" || exit 1
done
forkpoint-job result "{\"steps\":$steps}"
