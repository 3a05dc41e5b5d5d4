#!/bin/sh
# runner/examples/shell-report.sh — a shell job speaking the forkpoint protocol through the
# forkpoint-job helper: five steps with progress, a checkpoint after each step, resume from
# the last checkpoint, one optional question (arguments {"ask": true}), then a JSON result.
#
# The helper is found as $FORKPOINT_JOB, else on PATH, else in ../../build next to this file.
# Run by hand (no FORKPOINT_FD) it works too: the helper then only describes what it would do.
set -eu

FJ=${FORKPOINT_JOB:-}
if [ -z "$FJ" ]; then
	if command -v forkpoint-job >/dev/null 2>&1; then
		FJ=forkpoint-job
	else
		FJ=$(dirname "$0")/../../build/forkpoint-job
	fi
fi
if ! [ -x "$FJ" ] && ! command -v "$FJ" >/dev/null 2>&1; then
	echo "shell-report: forkpoint-job not found (set FORKPOINT_JOB)" >&2
	exit 1
fi

# Exit status 3 from the helper means the task was cancelled: say so and stop.
stop() {
	status=$1
	if [ "$status" -eq 3 ]; then
		"$FJ" fail --code cancelled "cancelled at step $step of $steps" || :
	fi
	exit "$status"
}

steps=5
step=0

args=$("$FJ" args) || stop $?
case $args in
*'"ask":true'*) ask=yes ;;
*) ask=no ;;
esac

# The checkpoint is just the number of the last finished step.  restore exits 4 when there is
# none; any other failure means the supervisor is gone, and then the job must stop: another
# attempt resumes from the checkpoint, so starting over here would redo its steps.
start=0
have=yes
saved=$("$FJ" restore) || case $? in
	4) have=no ;;
	*) exit 1 ;;
esac
if [ "$have" = yes ]; then
	case $saved in
	'' | *[!0-9]*) "$FJ" log warning "unreadable checkpoint '$saved', starting over" || stop $? ;;
	*) start=$saved ;;
	esac
fi
if [ "$start" -gt 0 ]; then
	echo "resumed at step $((start + 1)) of $steps"
	"$FJ" log info "resumed at step $((start + 1)) of $steps" || stop $?
fi

step=$start
while [ "$step" -lt "$steps" ]; do
	step=$((step + 1))
	sleep 0.2
	fraction=$(awk -v s="$step" -v n="$steps" 'BEGIN { printf "%.2f", s / n }')
	"$FJ" progress "$fraction" "Step $step/$steps done" || stop $?
	printf '%s' "$step" | "$FJ" checkpoint || stop $?
	echo "step $step/$steps done"
done

summary=null
if [ "$ask" = yes ]; then
	answer=$("$FJ" ask --id add-summary "Add a summary line?" yes no) || stop $?
	if [ "$answer" = yes ]; then summary=true; else summary=false; fi
fi

"$FJ" result "{\"steps\":$steps,\"resumedFrom\":$start,\"summary\":$summary}"
