#!/bin/bash
# verbs_robust: the control socket survives a client that speaks it badly
# (sr_abuse.c): garbage, truncated, oversized and empty records, 10 and 40
# descriptors on one record, descriptors of the wrong kind, another
# connection's handles, requests out of order, a flood of 100,000 requests
# whose replies are never read, then it disconnects.  Meanwhile a
# well-behaved verbs client keeps creating and destroying a PD, an MR, a
# CQ and an RC QP through RTS, never waiting more than 5 s.  At the end the
# daemon is alive, holds nothing and no descriptor more than at the start,
# and a new client (and ibv_devinfo, in unsanitized builds) still works.
#   robust.sh BUILD_DIR SR_ABUSE
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR SR_ABUSE" >&2; exit 2; }
tmp=$(mktemp -d)
SR_DAEMON_LOG=$tmp/daemon.log
sr_setup "$1" || exit 1
abuse=$2
trap 'sr_cleanup; rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*"
	for f in abuse good daemon; do
		[ -s "$tmp/$f.log" ] && { echo "--- $f:"; tail -n 30 "$tmp/$f.log"; }
	done
	exit 1
}

nfds() { ls "/proc/$SR_DAEMON_PID/fd" | wc -l; }
# The fewest descriptors seen over 0.5 s: the connection of a "softrdma
# status" just asked for (sr_setup's wait, the checks below) can still be
# open for a moment, and counting it made the end look like a descriptor
# was lost.
fewest_fds() {
	local f n
	f=$(nfds)
	for _ in $(seq 10); do
		sleep 0.05
		n=$(nfds)
		[ "$n" -lt "$f" ] && f=$n
	done
	echo "$f"
}
base=$(fewest_fds)

sr_bg "$tmp/good.log" "$abuse" good "$tmp/stop"
good=$SR_LAST_PID
"$abuse" abuse >"$tmp/abuse.log" 2>&1
arc=$?
touch "$tmp/stop"
wait "$good"
grc=$?
cat "$tmp/abuse.log" "$tmp/good.log"
[ $arc = 0 ] || fail "the abusing client saw the daemon misbehave"
[ $grc = 0 ] || fail "the well-behaved client failed"
kill -0 "$SR_DAEMON_PID" 2>/dev/null || fail "the daemon died"

for _ in $(seq 100); do
	"$SR" status | grep -q '^0 process(es) with resources$' && [ "$(nfds)" -le "$base" ] && break
	sleep 0.05
done
"$SR" status | grep -q '^0 process(es) with resources$' || fail "resources left: $("$SR" status)"
end=$(fewest_fds)
[ "$end" -le "$base" ] || fail "the daemon holds $end descriptors, $base at the start"
"$abuse" once || fail "a new client does not work"
# Debian's ibv_devinfo cannot load a sanitized libibverbs (build-asan/tsan)
if grep -q '^SOFTRDMA_SANITIZE:STRING=$' "$SR_BUILD/CMakeCache.txt"; then
	"$SR" run -- ibv_devinfo -d soft0 | grep -q 'PORT_ACTIVE' || fail "ibv_devinfo does not work"
	echo "ibv_devinfo ok"
fi
echo "daemon alive, nothing held, $base descriptors as at the start"
