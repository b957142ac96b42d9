#!/bin/bash
# The link's own limits between two hosts, for the RoCEv2 engine to be
# compared against: bench/link_probe between two network namespaces joined
# by a veth pair (tests/lib_netns.sh, no daemons), interleaved round after
# round, with the placement probe (bench/spin_probe) and the number of other
# runnable tasks recorded right before every measurement.
#
#   bench/link.sh [--build DIR] [--rounds N] [--mtus "9000 1500"] [--secs S]
#                 [--iters N] [--out DIR]
#
# Per round and MTU (the MTU order flips every round, the veth's MTU is
# changed in place):
#   bw   gso, gso-nogro, plain  (link_probe bw; segments of a RoCE packet:
#        4112 B = 4096 + BTH + ICRC at MTU 9000, 1040 B = 1024 + 16 at 1500)
#   lat  busy, block, thread-spin, thread-event  (64 B ping-pong)
#   sys  what one system call costs (link_probe sys), the floor under both
# Writes DIR/raw.tsv (one line per measurement: round, mtu, kind, mode,
# probe_ns, others, then link_probe's key=value line) and DIR/summary.txt
# (bench/link_summary.py: min / median / max over the rounds of each
# figure, and the ratios between modes within each round; it also sums up
# several runs: link_summary.py DIR1/raw.tsv DIR2/raw.tsv ...).  Needs root
# (ip netns).  DIR defaults to results/link-<time>.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
ROUNDS=3
MTUS="9000 1500"
SECS=2
ITERS=20000
OUT=
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$(cd "$2" && pwd); shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--mtus) MTUS=$2; shift ;;
	--secs) SECS=$2; shift ;;
	--iters) ITERS=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,21p' "$0"; exit 0 ;;
	*) echo "bench/link.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
LP=$BUILD/bin/link_probe
PROBE_BIN=$BUILD/bin/spin_probe
[ -x "$LP" ] && [ -x "$PROBE_BIN" ] || { echo "build link_probe and spin_probe first (cmake --build $BUILD)" >&2; exit 1; }
: "${OUT:=$ROOT/results/link-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
RAW=$OUT/raw.tsv
: >"$RAW"

. "$ROOT/tests/lib_netns.sh"
NN_NO_DAEMON=1 nn_setup "$BUILD" 9000 || exit 1
trap 'nn_cleanup; rm -f "$OUT/.rx" "$OUT/.tx"' EXIT
PORT=4791

PROBE=nan OTHERS=0
probe() {
	OTHERS=$(awk '/^procs_running/ { print $2 - 1 }' /proc/stat)
	PROBE=$("$PROBE_BIN" -t 10 2>/dev/null | cut -d' ' -f1)
	[ -n "$PROBE" ] || PROBE=nan
}
record() { # KIND MODE LINE
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$ROUND" "$MTU" "$1" "$2" "$PROBE" "$OTHERS" "$3" >>"$RAW"
	printf '[r%s mtu %s] %-3s %-12s probe %6s ns others %s | %s\n' "$ROUND" "$MTU" "$1" "$2" "$PROBE" "$OTHERS" "$3"
}
set_mtu() {
	MTU=$1
	ip -n "$NN_A" link set "$NN_IF" mtu "$MTU" && ip -n "$NN_B" link set "$NN_IF" mtu "$MTU"
}
# wait_ready PID: until the receiving side prints "# ready" (false if it died)
wait_ready() {
	for _ in $(seq 300); do
		grep -q '^# ready' "$OUT/.rx" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.01
	done
	return 1
}
bw() { # MODE
	local seg=$((MTU >= 9000 ? 4112 : 1040)) rx line
	probe
	nn_bg b "$OUT/.rx" "$LP" bw rx -m "$1" -p "$PORT" -s "$seg" -w 5
	rx=$NN_LAST_PID
	if wait_ready "$rx"; then
		on_a "$LP" bw tx "$(addr_b)" -m "$1" -p "$PORT" -s "$seg" -t "$SECS" >"$OUT/.tx" 2>&1
	fi
	wait "$rx"
	line=$(grep '^bw-rx' "$OUT/.rx")
	record bw "$1" "${line:-failed} $(grep '^bw-tx' "$OUT/.tx" | cut -d' ' -f3-)"
}
lat() { # MODE
	local pong line
	probe
	nn_bg b "$OUT/.rx" "$LP" lat pong -m "$1" -p "$PORT" -w 10
	pong=$NN_LAST_PID
	line=
	if wait_ready "$pong"; then
		line=$(on_a "$LP" lat ping "$(addr_b)" -m "$1" -p "$PORT" -n "$ITERS" 2>&1 | grep '^lat')
	fi
	wait "$pong"
	record lat "$1" "${line:-failed}"
}

{
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "host: $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "softrdma: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
	echo "rounds: $ROUNDS  mtus: $MTUS  bw seconds: $SECS  lat iters: $ITERS"
	echo "rmem_max in the namespace: $(on_b cat /proc/sys/net/core/rmem_max)"
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/env.txt"

for ROUND in $(seq "$ROUNDS"); do
	order=$MTUS
	[ $((ROUND % 2)) = 0 ] && order=$(echo "$MTUS" | tr ' ' '\n' | tac | tr '\n' ' ')
	for m in $order; do
		set_mtu "$m" || exit 1
		probe
		record sys cost "$("$LP" sys)"
		if [ $((ROUND % 2)) = 1 ]; then
			for x in gso gso-nogro plain; do bw $x; done
			for x in busy block thread-spin thread-event; do lat $x; done
		else
			for x in thread-event thread-spin block busy; do lat $x; done
			for x in plain gso-nogro gso; do bw $x; done
		fi
	done
done

/usr/bin/python3 "$ROOT/bench/link_summary.py" "$RAW" | tee "$OUT/summary.txt"
echo "raw: $RAW"
