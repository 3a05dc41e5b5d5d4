#!/bin/bash
# Checks the include graph against the layers (docs/HACKING.md, "Layers"): a file may include a
# header of its own layer or of a layer below it, never one above.  Prints each violation as
# "file: header" and exits 1 if there is any.  There are no exceptions.
#
#   proto                       nothing of the project
#   state, runner/sandbox+spawn proto (and their own folder)
#   runner/lib                  proto only; runner/helper: proto and runner/lib
#   supervisor/core             proto, state, runner
#   supervisor/mcp              ... and supervisor/core
#   supervisor/cli              ... and supervisor/mcp
set -u
cd "$(dirname "$0")/.."

allowed() {   # allowed FILE -> the path prefixes FILE may include
	case "$1" in
	proto/*)            echo "proto/" ;;
	state/*)            echo "proto/ state/" ;;
	runner/lib/*)       echo "proto/ runner/lib/" ;;
	runner/helper/*)    echo "proto/ runner/lib/" ;;
	runner/examples/*)  echo "runner/lib/" ;;
	runner/*)           echo "proto/ runner/sandbox/ runner/spawn." ;;
	supervisor/core/*)  echo "proto/ state/ runner/sandbox/ runner/spawn. supervisor/core/" ;;
	supervisor/mcp/*)   echo "proto/ state/ runner/sandbox/ runner/spawn. supervisor/core/ supervisor/mcp/" ;;
	supervisor/cli/*)   echo "proto/ state/ runner/sandbox/ runner/spawn. supervisor/" ;;
	*)                  echo "" ;;
	esac
}

bad=0
while IFS= read -r f; do
	ok=$(allowed "$f")
	while IFS= read -r h; do
		[ -n "$h" ] || continue
		# A header beside the file (no folder in the name) is the file's own module.
		case "$h" in */*) ;; *) continue ;; esac
		hit=0
		for p in $ok; do
			case "$h" in "$p"*) hit=1 ;; esac
		done
		if [ "$hit" -eq 0 ]; then
			echo "$f: $h"
			bad=1
		fi
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(git ls-files 'proto/*.[ch]' 'state/*.[ch]' 'runner/*.[ch]' 'supervisor/*.[ch]')
exit $bad
