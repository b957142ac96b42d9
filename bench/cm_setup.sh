#!/bin/bash
# Connection set-up, side by side (issue #11): Debian's cmtime (N rdma_cm
# connections: resolve address, resolve route, create QP, connect =
# REQ/REP/RTU, disconnect = DREQ/DREP, each step all at once) against the
# kernel's TCP doing the same N connects and closes on the same path
# (bench/tcp_setup.c), on one host (127.0.0.1, a private softrdmad) and, as
# root, across two network namespaces joined by a veth (tests/lib_netns.sh).
# Rounds interleave the measurements, the order flipping each round.
# Across namespaces each round runs twice: as placed by the scheduler
# (twohost: both hosts' processes share both vCPUs) and with one CPU per
# host (twohost_cpu: host b's daemon and client on the first CPU this
# script may use, host a's daemon and server on the second, TCP's client
# and server the same), which is how two machines are placed; with fewer
# than two CPUs that one is skipped.
#   bench/cm_setup.sh BUILD_DIR OUT_FILE [ROUNDS] [N]
# OUT_FILE gets one line per measurement:
#   ROUND PATH(onehost|twohost|twohost_cpu) TOOL(cmtime|tcp) STEP MS
# with STEP one of addr, route, qp, connect, disconnect (tcp: connect,
# disconnect only); a failed run writes STEP "fail".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd -P)
OUTF=$2
ROUNDS=${3:-3}
N=${4:-1000}
TCPS=$BUILD/bin/tcp_setup
: >"$OUTF"
ulimit -n 4096 2>/dev/null

# cmtime_parse ROUND PATH FILE: its step lines (total ms) into OUT_FILE
cmtime_parse() {
	awk -v r="$1" -v p="$2" '
	!/:/ { next } # "connecting", "disconnecting": progress, not figures
	/^create qp/ { s = "qp" } /^resolve addr/ { s = "addr" } /^resolve route/ { s = "route" }
	/^connect / { s = "connect" } /^disconnect / { s = "disconnect" }
	s != "" { split($0, f, ":"); split(f[2], v, " "); print r, p, "cmtime", s, v[1]; ok = 1; s = "" }
	END { if (!ok) print r, p, "cmtime", "fail", 0 }' "$3" >>"$OUTF"
}
tcp_parse() {
	awk -v r="$1" -v p="$2" '/^(connect|disconnect): / { sub(":", "", $1); print r, p, "tcp", $1, $2; ok = 1 }
	END { if (!ok) print r, p, "tcp", "fail", 0 }' "$3" >>"$OUTF"
}
# a port no TCP socket of this namespace uses (TIME_WAIT included)
port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		ss -tanH "( sport = :$p or dport = :$p )" | grep -q . || break
	done
	echo $p
}

# ---- one host
one_cmtime() {
	local p log
	p=$(port) log=$(mktemp)
	sr_bg /dev/null timeout 120 "$SR" run -q -- cmtime -p "$p"
	local spid=$SR_LAST_PID
	for _ in $(seq 200); do "$SR" status | grep -q "LISTEN .*:$p " && break; sleep 0.02; done
	timeout 120 "$SR" run -q -- cmtime -s 127.0.0.1 -p "$p" -c "$N" >"$log" 2>&1
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	cmtime_parse "$1" onehost "$log"
	rm -f "$log"
}
one_tcp() {
	local p log
	p=$(port) log=$(mktemp)
	"$TCPS" server "$p" "$N" &
	local spid=$!
	for _ in $(seq 200); do ss -ltnH "sport = :$p" | grep -q . && break; sleep 0.02; done
	timeout 60 "$TCPS" client 127.0.0.1 "$p" "$N" >"$log" 2>&1
	wait "$spid" 2>/dev/null
	tcp_parse "$1" onehost "$log"
	rm -f "$log"
}
(
	source "$ROOT/tests/lib.sh"
	sr_setup "$BUILD" || exit 1
	trap 'sr_cleanup' EXIT
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then one_cmtime "$r"; one_tcp "$r"; else one_tcp "$r"; one_cmtime "$r"; fi
	done
)

# ---- two hosts (root)
[ "$(id -u)" = 0 ] || exit 0
# the CPUs this script may use (a cpuset may allow others than 0..n-1):
# host b gets the first, host a the second
CPUS_ALLOWED=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$$/status)
CPU_LIST=()
for r in ${CPUS_ALLOWED//,/ }; do
	for ((c = ${r%-*}; c <= ${r#*-}; c++)); do CPU_LIST+=("$c"); done
done
# cpu_of a|b: the CPU that host keeps to with one CPU per host
cpu_of() { if [ "$1" = b ]; then echo "${CPU_LIST[0]}"; else echo "${CPU_LIST[1]}"; fi; }
# on_cpu a|b: the taskset prefix for a program of that host (none unless
# PLACE=cpu)
on_cpu() { [ "$PLACE" != cpu ] || echo taskset -c "$(cpu_of "$1")"; }
# place: every thread of both daemons on the placement of this run
place() {
	local ca=$CPUS_ALLOWED cb=$CPUS_ALLOWED
	[ "$PLACE" = cpu ] && ca=$(cpu_of a) cb=$(cpu_of b)
	taskset -a -p -c "$ca" "$NN_DPID_A" >/dev/null
	taskset -a -p -c "$cb" "$NN_DPID_B" >/dev/null
}
two_cmtime() {
	local p log
	p=$(port) log=$(mktemp)
	place
	nn_bg a /dev/null timeout 120 $(on_cpu a) "$NN_SR" run -q -- cmtime -p "$p"
	for _ in $(seq 200); do on_a "$NN_SR" status | grep -q "LISTEN .*:$p " && break; sleep 0.02; done
	on_b timeout 120 $(on_cpu b) "$NN_SR" run -q -- cmtime -s "$(addr_a)" -p "$p" -c "$N" >"$log" 2>&1
	kill "$NN_LAST_PID" 2>/dev/null
	wait "$NN_LAST_PID" 2>/dev/null
	cmtime_parse "$1" "$2" "$log"
	rm -f "$log"
}
two_tcp() {
	local p log
	p=$(port) log=$(mktemp)
	nn_bg a /dev/null $(on_cpu a) "$TCPS" server "$p" "$N"
	nn_wait_port a "$p"
	on_b timeout 60 $(on_cpu b) "$TCPS" client "$(addr_a)" "$p" "$N" >"$log" 2>&1
	wait "$NN_LAST_PID" 2>/dev/null
	tcp_parse "$1" "$2" "$log"
	rm -f "$log"
}
(
	source "$ROOT/tests/lib_netns.sh"
	nn_setup "$BUILD" 1500 || exit 0
	places="any"
	[ "${#CPU_LIST[@]}" -ge 2 ] && places="any cpu"
	for r in $(seq 1 "$ROUNDS"); do
		for PLACE in $places; do
			path=twohost
			[ "$PLACE" = cpu ] && path=twohost_cpu
			if [ $((r % 2)) = 1 ]; then
				two_cmtime "$r" $path
				two_tcp "$r" $path
			else
				two_tcp "$r" $path
				two_cmtime "$r" $path
			fi
		done
	done
)
exit 0
