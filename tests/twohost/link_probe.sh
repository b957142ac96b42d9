#!/bin/bash
# twohost_link_probe: bench/link_probe works between two hosts (a smoke
# test, not a measurement): over a veth at MTU 9000 a GSO sender's segments
# reach a GRO receiver merged (more than one segment per read) and intact,
# and a short ping-pong completes in every receive mode.
#   link_probe.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib_netns.sh"
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
NN_NO_DAEMON=1 nn_setup "$1" 9000 || exit 1
lp=$NN_BUILD/bin/link_probe
tmp=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ready() { for _ in $(seq 300); do grep -q '^# ready' "$1" && return 0; sleep 0.01; done; return 1; }
kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1"; } # kv FILE KEY

for m in gso plain; do
	nn_bg b "$tmp/rx.$m" "$lp" bw rx -m $m -w 5
	rx=$NN_LAST_PID
	ready "$tmp/rx.$m" || fail "bw rx ($m) did not start"
	on_a "$lp" bw tx "$(addr_b)" -m $m -t 0.2 >"$tmp/tx.$m" 2>&1 || fail "bw tx ($m) failed"
	wait "$rx" || fail "bw rx ($m) exited $?"
	cat "$tmp/tx.$m" "$tmp/rx.$m"
	[ "$(kv "$tmp/rx.$m" bad)" = 0 ] || fail "$m: bad segments"
	awk -v s="$(kv "$tmp/rx.$m" recv_segs)" 'BEGIN { exit !(s > 0) }' || fail "$m: nothing received"
	[ "$(kv "$tmp/rx.$m" sent_segs)" = "$(kv "$tmp/tx.$m" sent_segs)" ] ||
		fail "$m: the receiver did not get the sender's end mark"
done
awk -v s="$(kv "$tmp/rx.gso" segs_per_dgram)" 'BEGIN { exit !(s > 1) }' ||
	fail "gso: no GRO (one segment per read)"

for m in busy block thread-spin thread-event; do
	nn_bg b "$tmp/pong.$m" "$lp" lat pong -m $m -w 5
	pong=$NN_LAST_PID
	ready "$tmp/pong.$m" || fail "lat pong ($m) did not start"
	on_a "$lp" lat ping "$(addr_b -6)" -m $m -n 500 >"$tmp/ping.$m" 2>&1 || fail "lat ping ($m) failed"
	wait "$pong" || fail "lat pong ($m) exited $?"
	cat "$tmp/ping.$m"
	[ "$(kv "$tmp/ping.$m" n)" = 500 ] || fail "$m: not 500 round trips"
done
[ $fails = 0 ] && echo PASS
[ $fails = 0 ]
