#!/bin/bash
# verbs_reclaim: the daemon gives back everything a process held when the
# process dies without cleaning up (SIGKILL), as the kernel does for uverbs.
#   reclaim.sh BUILD_DIR SR_HOLD
# Two rounds: start sr_hold (PDs, MRs, CQs on a channel, RC/UC/UD QPs in RTS
# with work posted, an SRQ, MWs, a multicast group), check that `softrdma
# status` lists exactly what it reports holding, SIGKILL it, and require
# within 2 s: no process with resources, 0 KiB of arena objects, and a new
# client that can allocate and free a PD.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR SR_HOLD" >&2; exit 2; }
sr_setup "$1" || exit 1
hold=$2
tmp=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*"
	echo "--- softrdma status:"
	"$SR" status
	[ -f "$tmp/hold.log" ] && { echo "--- sr_hold output:"; cat "$tmp/hold.log"; }
	exit 1
}

objects_kib() { "$SR" status | sed -n 's/^  arena: .* \([0-9][0-9]*\) KiB in objects$/\1/p'; }

[ "$(objects_kib)" = 0 ] || fail "arena objects before the test: $(objects_kib) KiB"

for round in 1 2; do
	: >"$tmp/hold.log"
	sr_bg "$tmp/hold.log" "$hold"
	pid=$SR_LAST_PID
	for _ in $(seq 200); do
		grep -q '^ready' "$tmp/hold.log" && break
		kill -0 "$pid" 2>/dev/null || fail "round $round: sr_hold exited early"
		sleep 0.05
	done
	counts=$(sed -n 's/^ready //p' "$tmp/hold.log")
	[ -n "$counts" ] || fail "round $round: sr_hold never got ready"

	status=$("$SR" status)
	line=$(grep "^process $pid (" <<<"$status")
	[ -n "$line" ] || fail "round $round: pid $pid not listed"
	[ "${line##*: }" = "$counts" ] ||
		fail "round $round: status counts '${line##*: }', sr_hold holds '$counts'"
	grep -q '^1 process(es) with resources$' <<<"$status" ||
		fail "round $round: expected exactly one process with resources"
	# the listing itself: one line per object (QPs in RTS, the SRQ, keys)
	n_qp=$(grep -c '^    qp 0x' <<<"$status")
	n_rts=$(grep -c '^    qp 0x.* RTS ' <<<"$status")
	n_mr=$(grep -c '^    mr lkey' <<<"$status")
	[ "$n_qp" = "${counts##*qp }" ] || fail "round $round: $n_qp qp lines"
	[ "$n_rts" = 5 ] || fail "round $round: $n_rts QPs in RTS, want 5"
	[ "$n_mr" -ge 1 ] || fail "round $round: no mr lines"
	kib=$(objects_kib)
	[ "$kib" -gt 0 ] || fail "round $round: no arena objects while held"
	echo "round $round: pid $pid holds $counts ($kib KiB of arena objects)"

	start=$(date +%s%N)
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	SR_PIDS=()
	ok=
	for _ in $(seq 100); do
		status=$("$SR" status)
		if grep -q '^0 process(es) with resources$' <<<"$status" &&
			grep -q ' 0 KiB in objects$' <<<"$status"; then
			ok=1
			break
		fi
		sleep 0.02
	done
	ms=$((($(date +%s%N) - start) / 1000000))
	[ -n "$ok" ] || fail "round $round: resources not reclaimed after ${ms} ms"
	[ "$ms" -le 2000 ] || fail "round $round: reclaim took ${ms} ms (limit 2000)"
	echo "round $round: reclaimed in ${ms} ms"

	out=$("$hold" pd 2>&1) || fail "round $round: a new client failed: $out"
	[ "$out" = "pd ok" ] || fail "round $round: a new client said: $out"
	status=$("$SR" status)
	grep -q '^0 process(es) with resources$' <<<"$status" ||
		fail "round $round: the new client left resources"
done
echo "verbs_reclaim: ok"
