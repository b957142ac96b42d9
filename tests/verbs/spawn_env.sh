#!/bin/bash
# verbs_spawn_env: a daemon started on demand.
#   spawn_env.sh BUILD_DIR
#  1. SOFTRDMA_NO_SPAWN=0 leaves spawning on (only "1" turns it off, as
#     every on/off setting reads, src/core/env.h): ibv_devinfo on a fresh
#     socket name starts a daemon and lists soft0;
#  2. that daemon takes none of its starter's tuning: its environment holds
#     no SOFTRDMA_* but SOFTRDMA_SOCKET and SOFTRDMA_LOG (the two passed on,
#     src/core/daemon_link.c), and the starter's SOFTRDMA_IDLE_TIMEOUT=1
#     does not make it leave after a second idle (its own default is 10 s);
#  3. SOFTRDMA_NO_SPAWN=1 starts nothing: no device, no daemon.
# Each daemon found is ours (its socket name is this run's) and is stopped
# by its pid.
set -u
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd -P)
SR=$build/bin/softrdma
tmp=$(mktemp -d)
sock=softrdma-spawn-env-$$-$RANDOM
dpid=

# the softrdmad (of this user) whose environment names socket $1
daemon_of() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = softrdmad ] || continue
		tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SOFTRDMA_SOCKET=$1" &&
			echo "${p#/proc/}" && return 0
	done
	return 1
}

cleanup() {
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null
	local p
	p=$(daemon_of "$sock-off") && kill "$p"
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	for f in "$tmp"/*; do echo "--- $f"; cat "$f"; done
	exit 1
}

echo "# 1. SOFTRDMA_NO_SPAWN=0: a daemon is started"
env -u LD_PRELOAD SOFTRDMA_SOCKET="$sock" SOFTRDMA_NO_SPAWN=0 SOFTRDMA_IDLE_TIMEOUT=1 \
	SOFTRDMA_ACK_DEFER_US=7 SOFTRDMA_FAULT=seed=1,drop=50% SOFTRDMA_LOG=1 \
	"$SR" run -- ibv_devinfo >"$tmp/devinfo.out" 2>"$tmp/devinfo.err" ||
	fail "ibv_devinfo with SOFTRDMA_NO_SPAWN=0 failed"
grep -q "hca_id:.*soft0" "$tmp/devinfo.out" || fail "ibv_devinfo did not list soft0"
for _ in $(seq 50); do
	dpid=$(daemon_of "$sock") && break
	sleep 0.02
done
[ -n "$dpid" ] || fail "no softrdmad with SOFTRDMA_SOCKET=$sock"
echo "started: pid $dpid"

echo "# 2. its environment: only what is passed on"
tr '\0' '\n' <"/proc/$dpid/environ" | grep '^SOFTRDMA_' | sort >"$tmp/daemon.env"
printf 'SOFTRDMA_LOG=1\nSOFTRDMA_SOCKET=%s\n' "$sock" >"$tmp/want.env"
cmp -s "$tmp/daemon.env" "$tmp/want.env" ||
	fail "the daemon's SOFTRDMA_* are not SOCKET and LOG alone: $(tr '\n' ' ' <"$tmp/daemon.env")"
sleep 3
kill -0 "$dpid" 2>/dev/null ||
	fail "the daemon left within 3 s idle: it took its starter's SOFTRDMA_IDLE_TIMEOUT=1"
echo "still serving after 3 s idle"

echo "# 3. SOFTRDMA_NO_SPAWN=1: nothing is started"
env -u LD_PRELOAD SOFTRDMA_SOCKET="$sock-off" SOFTRDMA_NO_SPAWN=1 SOFTRDMA_LOG=0 \
	"$SR" run -- ibv_devinfo >"$tmp/off.out" 2>&1
grep -q "hca_id:" "$tmp/off.out" && fail "ibv_devinfo found a device with SOFTRDMA_NO_SPAWN=1"
sleep 0.2
daemon_of "$sock-off" >/dev/null && fail "a daemon was started with SOFTRDMA_NO_SPAWN=1"
echo "PASS"
exit 0
