#!/bin/bash
# Runs a verbs test program against a private softrdmad.
#   run.sh BUILD_DIR PROGRAM [ARGS...]
# tests/lib.sh starts `softrdmad --idle 0` on a private SOFTRDMA_SOCKET (with
# SOFTRDMA_NO_SPAWN=1, so nothing reaches the user's daemon) and stops it when
# this script exits.  The program's exit status is the test's.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR PROGRAM [ARGS...]" >&2; exit 2; }
sr_setup "$1" || exit 1
shift
"$@"
