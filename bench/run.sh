#!/bin/bash
# softrdma side by side with the physical limits and its peers.
#
#   bench/run.sh [--short] [--rounds N] [--no-deps] [--pin]
#                [--no-twohost | --twohost-only] [--twohost-rounds N]
#                [--against SRC_DIR]
#   make bench             full: 8 sizes (8 B .. 1 MiB), all tests, 5 rounds;
#                          about 6-10 minutes on an idle 2-vCPU VM, plus
#                          the two-host section (3 rounds: 25 minutes measured
#                          at load 10, roughly a third of that when idle)
#   make bench BENCH=short just what the targets need (write 8 B / 64 KiB /
#                          1 MiB, read 1 MiB, write/send latency), 3 rounds:
#                          under 2 minutes once build-release is built; the
#                          two-host section with 2 rounds of fewer
#                          iterations (7 more minutes measured at load 7)
#
# 1. installs what is missing from Debian (perftest, ucx-utils,
#    libfabric-bin, python3-matplotlib, build tools; apt-get update first);
# 2. builds softrdma in Release mode into build-release, and the bench
#    programs (bench/*.c) with gcc -O2 into build-release/bench;
# 3. starts a private softrdmad (its own socket name) and runs, INTERLEAVED
#    round after round (A B A B; the order inside each pair flips every
#    round), with the placement probe (bench/spin_probe) right before every
#    single measurement:
#      limit  single-thread memcpy per size (bench/memcpy_bw), and the
#             same with softrdma's own copy routine (memcpy_bw -a)
#      softrdma  Debian's unmodified perftest under `softrdma run --`:
#             ib_write_bw / ib_read_bw / ib_send_bw per size,
#             ib_write_lat / ib_send_lat / ib_read_lat / ib_atomic_lat 8 B
#      peers  UCX uct over posix shared memory (ucx_perftest put_bw, get,
#             put_lat, am_lat, fadd) and libfabric shm (fi_pingpong)
#      ucx-softrdma  UCX uct over rc_verbs on soft0 (ucx_perftest put_bw,
#             put_lat under `softrdma run`), next to UCX posix: what
#             softrdma gives a UCX user against UCX's own shared memory
#    then the resource costs (bench/resource_cost: bytes per QP / MR) and
#    the time to create and connect 1,000 RC QP pairs (bench/qp_scale);
#    then (root only) the two-host section, bench/twohost.sh: two network
#    namespaces joined by a veth at MTU 9000 and 1500, a softrdmad in each,
#    perftest across them next to the link's own limits (UDP GSO+GRO, UDP
#    busy-poll latency: bench/link_probe), UCX over TCP and libfabric's tcp
#    provider, and ib_write_bw under 1% injected loss where the daemon
#    supports SOFTRDMA_FAULT;
# 4. writes results/<timestamp>/: raw.tsv (every measurement), logs/,
#    report.md and PNG plots (bench/report.py, Debian's python3).
#
# --against SRC_DIR: an A/B run of two trees (SRC_DIR is another checkout,
# say the commit before a change: `git worktree add /tmp/base HEAD~1`).
# It is built into build-release-against with its own softrdmad, and each
# same-host softrdma measurement runs on both, interleaved within every
# round (system "softrdma" and "softrdma-against"), and so does each
# two-host softrdma measurement (both hosts' daemons restarted with the
# tree's softrdmad; the trees' order flips every round); the peers,
# memcpy, the link probes and the other sections are left out.  ab.txt gets the table (bench/ab.py):
# each figure's median on both trees, their ratio and each tree's
# round-to-round spread.
#
# Nothing is pinned by default (--pin: servers on CPU 1, clients on CPU 0,
# for every program alike, probe included); the full run also measures
# pinned against unpinned latency for softrdma and UCX to show whether it
# matters.  Every process started here is killed by PID on exit.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=full
ROUNDS=
DEPS=1
PIN=0
SAMEHOST=1
TWOHOST=1
TH_ROUNDS=
AGAINST=
while [ $# -gt 0 ]; do
	case "$1" in
	--short) MODE=short ;;
	--full) MODE=full ;;
	--rounds) ROUNDS=$2; shift ;;
	--no-deps) DEPS=0 ;;
	--pin) PIN=1 ;;
	--no-twohost) TWOHOST=0 ;;
	--twohost-only) SAMEHOST=0 ;;
	--twohost-rounds) TH_ROUNDS=$2; shift ;;
	--against) AGAINST=$(cd "$2" && pwd) || exit 2; shift ;;
	-h | --help) sed -n '2,55p' "$0"; exit 0 ;;
	*) echo "bench/run.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
# short: what the deliverable-2 targets need, and the two-sided 8 B rate
if [ "$MODE" = short ]; then
	SIZES="8 65536 1048576"
	READ_SIZES="1048576"
	SEND_SIZES="8"
	LAT_PAIRS="write send"
	: "${ROUNDS:=3}"
else
	SIZES="8 64 512 4096 16384 65536 262144 1048576"
	READ_SIZES=$SIZES
	SEND_SIZES=$SIZES
	LAT_PAIRS="write send read atomic"
	: "${ROUNDS:=5}"
fi
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "bad --rounds" >&2; exit 2; }

BUILD=$ROOT/build-release
TS=$(date +%Y%m%d-%H%M%S)
OUT=$ROOT/results/$TS
LOGS=$OUT/logs
RAW=$OUT/raw.tsv
mkdir -p "$LOGS"
T_START=$(date +%s)

say() { printf '%s\n' "$*" | tee -a "$OUT/progress.log"; }

# ---------------------------------------------------------------- cleanup
DPID=
AB_DPID=
BGPIDS=()
cleanup() {
	local p
	if [ -n "$AB_DPID" ]; then
		kill "$AB_DPID" 2>/dev/null
		wait "$AB_DPID" 2>/dev/null
	fi
	for p in "${BGPIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${BGPIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	if [ -n "$DPID" ]; then
		kill "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------- dependencies
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
# the same as the Makefile's DEB_BUILD (what is needed here) and DEB_BENCH
PKGS="cmake gcc make pkg-config libibverbs-dev perftest ucx-utils libfabric-bin python3-matplotlib iproute2 util-linux"
if [ "$DEPS" = 1 ]; then
	missing=
	for p in $PKGS; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		say "installing:$missing"
		$SUDO apt-get update -qq >"$LOGS/apt.log" 2>&1 &&
			DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >>"$LOGS/apt.log" 2>&1 ||
			{ say "apt-get failed, see $LOGS/apt.log"; exit 1; }
	fi
fi

# ----------------------------------------------------------------- build
say "building softrdma (Release) into build-release ..."
if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
	cmake --build "$BUILD" -j2; } >"$LOGS/build.log" 2>&1; then
	say "build failed, see $LOGS/build.log"
	tail -20 "$LOGS/build.log"
	exit 1
fi
BB=$BUILD/bench
mkdir -p "$BB"
gcc -O2 -Wall -I"$ROOT/src" -o "$BB/memcpy_bw" "$ROOT/bench/memcpy_bw.c" "$ROOT/src/core/copy.c" || exit 1
gcc -O2 -Wall -o "$BB/spin_probe" "$ROOT/bench/spin_probe.c" || exit 1
COPY_PLAIN_MAX=$("$BB/memcpy_bw" -p | cut -d" " -f1) # sr_copy differs from memcpy above this
for p in resource_cost qp_scale; do
	gcc -O2 -Wall -I/usr/include -o "$BB/$p" "$ROOT/bench/$p.c" "$BUILD/lib/libibverbs.so.1" || exit 1
done
SR=$BUILD/bin/softrdma
if [ -n "$AGAINST" ]; then
	AB_BUILD=$ROOT/build-release-against
	say "building $AGAINST (Release) into build-release-against ..."
	if ! { cmake -S "$AGAINST" -B "$AB_BUILD" -DCMAKE_BUILD_TYPE=Release &&
		cmake --build "$AB_BUILD" -j2; } >"$LOGS/build-against.log" 2>&1; then
		say "build failed, see $LOGS/build-against.log"
		exit 1
	fi
fi

# ------------------------------------------------------------ environment
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "mode: $MODE  rounds: $ROUNDS  sizes: $SIZES  pin: $PIN"
	echo "host: $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' '))"
	echo "cpu MHz (perftest converts TSC cycles with it): $(grep -m1 'cpu MHz' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')"
	echo "caches: $(lscpu 2>/dev/null | grep -E '^L[123]' | sed 's/  */ /g' | tr '\n' ';')"
	echo "softrdma: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (working tree has changes)')"
	for p in perftest ucx-utils libfabric-bin python3-matplotlib gcc; do
		echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)"
	done
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.txt"

# ---------------------------------------------------------------- daemon
export SOFTRDMA_SOCKET=bench-$$
export SOFTRDMA_NO_SPAWN=1
"$BUILD/bin/softrdmad" --idle 0 >"$LOGS/softrdmad.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do
	"$SR" status 2>/dev/null | grep -q '^device' && break
	sleep 0.05
done
"$SR" status 2>/dev/null | grep -q '^device' || { say "softrdmad did not come up"; exit 1; }
# perftest's -x: the GID of 127.0.0.1, the address its client connects to
. "$ROOT/tests/gid_index.sh"
GID=$("$SR" run -- ibv_devinfo -v 2>/dev/null | gid_from_devinfo 127.0.0.1) ||
	{ say "soft0 has no GID for 127.0.0.1"; exit 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null; }
D_TICKS0=$(cpu_ticks "$DPID")
# the other tree's daemon, on a socket of its own
if [ -n "$AGAINST" ]; then
	AB_SR=$AB_BUILD/bin/softrdma
	AB_SOCKET=bench-against-$$
	SOFTRDMA_SOCKET=$AB_SOCKET "$AB_BUILD/bin/softrdmad" --idle 0 >"$LOGS/softrdmad-against.log" 2>&1 &
	AB_DPID=$!
	for _ in $(seq 100); do
		SOFTRDMA_SOCKET=$AB_SOCKET "$AB_SR" status 2>/dev/null | grep -q '^device' && break
		sleep 0.05
	done
	AB_GID=$(SOFTRDMA_SOCKET=$AB_SOCKET "$AB_SR" run -- ibv_devinfo -v 2>/dev/null | gid_from_devinfo 127.0.0.1) ||
		{ say "the other tree's soft0 has no GID for 127.0.0.1"; exit 1; }
	echo "against: $AGAINST at $(git -C "$AGAINST" rev-parse --short HEAD 2>/dev/null)" >>"$OUT/env.txt"
fi
# against CMD...: CMD on the other tree (its softrdma, daemon and GID)
against() {
	local SR=$AB_SR GID=$AB_GID SR_SYS=softrdma-against SR_TAG=_against
	local -x SOFTRDMA_SOCKET=$AB_SOCKET
	"$@"
}
SR_SYS=softrdma
SR_TAG=

# ---------------------------------------------------------------- helpers
if [ "$PIN" = 1 ]; then
	PIN_S="taskset -c 1"; PIN_C="taskset -c 0"; PROBE_PIN="-c 0,1"; UCX_S="-c 1"; UCX_C="-c 0"
else
	PIN_S=""; PIN_C=""; PROBE_PIN=""; UCX_S=""; UCX_C=""
fi
PORT_LO=$((20000 + ($$ % 200) * 100))
PORT=$PORT_LO
next_port() {
	local i
	for i in $(seq 100); do
		PORT=$((PORT + 1))
		[ "$PORT" -ge $((PORT_LO + 100)) ] && PORT=$((PORT_LO + 1))
		[ -z "$(ss -tanH "( sport = :$PORT or dport = :$PORT )" 2>/dev/null)" ] && return 0
	done
	return 0
}
# wait_port PORT PID: until something listens on PORT (false if PID died)
wait_port() {
	local i
	for i in $(seq 500); do
		[ -n "$(ss -ltnH "sport = :$1" 2>/dev/null)" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.01
	done
	return 1
}
# stop_server PID: give it a moment to finish, then kill it by PID
stop_server() {
	local i
	for i in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.02
	done
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	BGPIDS=()
}

PROBE=nan
PROBES=0
OTHERS=0
probe() {
	local out
	# runnable tasks right now, less this awk: anything else competes for the 2 vCPUs
	OTHERS=$(awk '/^procs_running/ { print $2 - 1 }' /proc/stat)
	out=$("$BB/spin_probe" -t 10 $PROBE_PIN 2>/dev/null)
	PROBE=${out%% *}
	[ -n "$PROBE" ] || PROBE=nan
	PROBES=$((PROBES + 1))
}

ROUND=0
GROUP=
# record METRIC SYSTEM SIZE VALUE UNIT EXTRA LABEL
record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$ROUND" "$GROUP" "$1" "$2" "$3" "$4" "$5" "$PROBE" "$6;others=$OTHERS" >>"$RAW"
	say "$(printf '[%s r%s/%s] %-14s %-9s %8s B  %12s %-6s  %s  (probe %s ns)' \
		"$(date +%H:%M:%S)" "$ROUND" "$ROUNDS" "$1" "$2" "$3" "$4" "$5" "$7" "$PROBE")"
}

# perftest under softrdma: pt TEST SIZE ITERS -> sets PT_JSON (client json file)
pt() {
	local test=$1 size=$2 iters=$3 extra=() tag spid
	case "$test" in
	*_bw) extra=(--report_gbits) ;;
	*_lat) extra=(-C) ;; # report in TSC cycles: 0.5 ns resolution instead of 10 ns
	esac
	next_port
	tag=$LOGS/r${ROUND}_${test}_${size}$SR_TAG
	PT_JSON=$tag.cli.json
	rm -f "$PT_JSON"
	$PIN_S timeout 120 "$SR" run -- "$test" -d soft0 -x "$GID" -F "${extra[@]}" -p "$PORT" -s "$size" -n "$iters" \
		>"$tag.srv.txt" 2>&1 &
	spid=$!
	BGPIDS=("$spid")
	if wait_port "$PORT" "$spid"; then
		$PIN_C timeout 120 "$SR" run -- "$test" -d soft0 -x "$GID" -F "${extra[@]}" -p "$PORT" -s "$size" -n "$iters" \
			--out_json --out_json_file="$PT_JSON" 127.0.0.1 >"$tag.cli.txt" 2>&1
	fi
	stop_server "$spid"
}
# jget FILE KEY: a value from perftest's (not quite JSON) report file
jget() {
	local v
	v=$(sed -n "s/^$2: *\([^,]*\),.*/\1/p" "$1" 2>/dev/null | head -1)
	case "$v" in '' | *nan*) echo nan ;; *) echo "$v" ;; esac
}

# ucx_perftest over uct posix: ucx TEST SIZE ITERS [extra...] -> UCX_LINE (final numbers)
ucx() {
	local test=$1 size=$2 iters=$3 tag spid
	shift 3
	next_port
	tag=$LOGS/r${ROUND}_ucx_${test}_${size}
	timeout 120 ucx_perftest -p "$PORT" $UCX_S >"$tag.srv.txt" 2>&1 &
	spid=$!
	BGPIDS=("$spid")
	UCX_LINE=
	if wait_port "$PORT" "$spid"; then
		timeout 120 ucx_perftest 127.0.0.1 -p "$PORT" $UCX_C -t "$test" -d memory -x posix -s "$size" -n "$iters" \
			-f "$@" >"$tag.cli.txt" 2>&1
		UCX_LINE=$(grep -E '^ *(Final:)? *[0-9]+ +[0-9.]+ ' "$tag.cli.txt" | tail -1 | sed 's/Final://')
	fi
	stop_server "$spid"
}
# ucx_perftest over uct rc_verbs on soft0, both sides under `softrdma run`:
# ucx_sr TEST SIZE ITERS [extra...] -> UCX_LINE (as ucx())
ucx_sr() {
	local test=$1 size=$2 iters=$3 tag spid
	shift 3
	next_port
	tag=$LOGS/r${ROUND}_ucxsr_${test}_${size}$SR_TAG
	timeout 120 "$SR" run -q -- ucx_perftest -p "$PORT" $UCX_S >"$tag.srv.txt" 2>&1 &
	spid=$!
	BGPIDS=("$spid")
	UCX_LINE=
	if wait_port "$PORT" "$spid"; then
		timeout 120 "$SR" run -q -- ucx_perftest 127.0.0.1 -p "$PORT" $UCX_C -t "$test" -d soft0:1 -x rc_verbs \
			-s "$size" -n "$iters" -f "$@" >"$tag.cli.txt" 2>&1
		UCX_LINE=$(grep -E '^ *(Final:)? *[0-9]+ +[0-9.]+ ' "$tag.cli.txt" | tail -1 | sed 's/Final://')
	fi
	stop_server "$spid"
}
# ucx_field N: field N of the final line (1 iters, 2 lat 50%ile, 3 lat avg,
# 4 lat overall, 5 MB/s avg, 6 MB/s overall, 7 msg/s avg, 8 msg/s overall)
ucx_field() { echo "$UCX_LINE" | awk -v n="$1" 'NF >= 8 { print $n; ok=1 } END { if (!ok) print "nan" }'; }

# libfabric shm ping-pong: fi SIZE ITERS -> FI_LINE
fi_pp() {
	local size=$1 iters=$2 tag spid
	next_port
	tag=$LOGS/r${ROUND}_fi_${size}
	$PIN_S timeout 120 fi_pingpong -p shm -e rdm -S "$size" -I "$iters" -B "$PORT" >"$tag.srv.txt" 2>&1 &
	spid=$!
	BGPIDS=("$spid")
	FI_LINE=
	if wait_port "$PORT" "$spid"; then
		$PIN_C timeout 120 fi_pingpong -p shm -e rdm -S "$size" -I "$iters" -P "$PORT" 127.0.0.1 >"$tag.cli.txt" 2>&1
		FI_LINE=$(awk 'NR > 1 && NF >= 8 { l = $0 } END { print l }' "$tag.cli.txt")
	fi
	stop_server "$spid"
}

gbs_from_gbits() { awk -v v="$1" 'BEGIN { if (v == "nan" || v == "") print "nan"; else printf "%.4f", v / 8 }'; }
gbs_from_mib() { awk -v v="$1" 'BEGIN { if (v == "nan" || v == "") print "nan"; else printf "%.4f", v * 1048576 / 1e9 }'; }
gbs_from_mb() { awk -v v="$1" 'BEGIN { if (v == "nan" || v == "") print "nan"; else printf "%.4f", v / 1000 }'; }
clampi() { awk -v a="$1" -v lo="$2" -v hi="$3" 'BEGIN { a = int(a); if (a < lo) a = lo; if (a > hi) a = hi; print a }'; }

# -------------------------------------------------------- the measurements
m_memcpy() {
	local s=$1 out
	probe
	out=$("$BB/memcpy_bw" -t 20 -r 5 "$s")
	set -- $out
	record memcpy limit "$s" "${2:-nan}" GB/s "min=${3:-nan};max=${4:-nan}" "memcpy"
	[ "$s" -gt "$COPY_PLAIN_MAX" ] || return 0 # up to there sr_copy is memcpy
	out=$("$BB/memcpy_bw" -a -t 20 -r 5 "$s")
	set -- $out
	record memcpy_alt limit "$s" "${2:-nan}" GB/s "min=${3:-nan};max=${4:-nan}" "sr_copy"
}
m_sr_bw() { # TEST SIZE
	local test=$1 s=$2 n gb rate
	n=$(clampi "$((4000000000 / s))" 5000 2000000) # as many as the UCX run gets: short runs measure start-up
	probe
	pt "$test" "$s" "$n"
	gb=$(gbs_from_gbits "$(jget "$PT_JSON" BW_average)")
	rate=$(jget "$PT_JSON" MsgRate)
	record "$test" "$SR_SYS" "$s" "$gb" GB/s "msgrate_mpps=$rate;iters=$n" "$rate Mpps"
}
m_ucx_bw() { # TEST(put_bw|get|am_bw) SIZE
	local test=$1 s=$2 n w gb rate
	n=$(clampi "$((4000000000 / s))" 4000 2000000)
	w=$(clampi "$((n / 10))" 100 10000)
	probe
	if [ "$test" = get ]; then
		ucx get "$s" "$n" -w "$w" -D bcopy
	elif [ "$test" = am_bw ]; then
		# active messages: short (inline in the FIFO element) up to 64 B,
		# bcopy (into a receive segment) above; uct posix has no am zcopy
		if [ "$s" -le 64 ]; then ucx am_bw "$s" "$n" -w "$w" -D short; else ucx am_bw "$s" "$n" -w "$w" -D bcopy; fi
	else
		ucx "$test" "$s" "$n" -w "$w"
	fi
	gb=$(gbs_from_mib "$(ucx_field 6)")
	rate=$(ucx_field 8)
	record "ucx_$test" ucx "$s" "$gb" GB/s "msgrate=$rate;iters=$n" "$rate msg/s"
}
# UCX's put_bw over softrdma (uct rc_verbs on soft0:1): short (inline in
# the work request) up to 64 B, bcopy up to 8 KiB (UCX's bounce buffer),
# zcopy (the registered buffer itself) above
m_ucxsr_bw() { # SIZE
	local s=$1 n w gb rate layout=zcopy
	n=$(clampi "$((4000000000 / s))" 4000 2000000)
	w=$(clampi "$((n / 10))" 100 10000)
	[ "$s" -le 8192 ] && layout=bcopy
	[ "$s" -le 64 ] && layout=short
	probe
	ucx_sr put_bw "$s" "$n" -w "$w" -D "$layout"
	gb=$(gbs_from_mib "$(ucx_field 6)")
	rate=$(ucx_field 8)
	record ucxsr_put_bw "ucx-$SR_SYS" "$s" "$gb" GB/s "msgrate=$rate;iters=$n;layout=$layout" "$rate msg/s ($layout)"
}
m_ucxsr_lat() {
	local typ avg
	probe
	ucx_sr put_lat 8 200000
	typ=$(ucx_field 2)
	avg=$(ucx_field 4)
	record ucxsr_put_lat "ucx-$SR_SYS" 8 "$typ" usec "avg=$avg" "avg $avg"
}
m_fi_bw() {
	local s=$1 n gb
	n=$(clampi "$((1000000000 / s))" 500 20000)
	probe
	fi_pp "$s" "$n"
	set -- $FI_LINE
	gb=$(gbs_from_mb "${6:-nan}")
	record fi_pingpong libfabric "$s" "$gb" GB/s "oneway_usec=${7:-nan};iters=$n" "${7:-nan} us one-way"
}
# perftest -C prints TSC cycles (under the usual [usec] headings): to µs with
# the same cpu MHz perftest itself uses
CPU_MHZ=$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo)
cyc2us() { awk -v c="$1" -v mhz="$CPU_MHZ" 'BEGIN { if (c == "nan" || c == "" || mhz <= 0) print "nan"; else printf "%.4f", c / mhz }'; }
m_sr_lat() { # TEST
	local test=$1 typ avg
	probe
	pt "$test" 8 100000
	typ=$(cyc2us "$(jget "$PT_JSON" t_typical)")
	avg=$(cyc2us "$(jget "$PT_JSON" t_avg)")
	record "$test" "$SR_SYS" 8 "$typ" usec "avg=$avg;min=$(cyc2us "$(jget "$PT_JSON" t_min)");p99=$(cyc2us "$(jget "$PT_JSON" percentile_99)")" "avg $avg"
}
m_ucx_lat() { # TEST(put_lat|am_lat|get|fadd)
	local test=$1 typ avg name
	probe
	case "$test" in
	get) ucx get 8 500000 -D bcopy ;;
	fadd) ucx fadd 8 500000 ;;
	*) ucx "$test" 8 200000 ;;
	esac
	typ=$(ucx_field 2)
	avg=$(ucx_field 4)
	case "$test" in get | fadd) name=ucx_${test}_lat ;; *) name=ucx_$test ;; esac
	record "$name" ucx 8 "$typ" usec "avg=$avg" "avg $avg"
}
# a pair, in either order
pair() { # ODD_FIRST_CMD SECOND_CMD (strings)
	if [ $((ROUND % 2)) = 1 ]; then
		eval "$1"; eval "$2"
	else
		eval "$2"; eval "$1"
	fi
}
# three, A B C in odd rounds and C B A in even ones: B always next to A
triple() { # A B C (strings)
	if [ $((ROUND % 2)) = 1 ]; then
		eval "$1"; eval "$2"; eval "$3"
	else
		eval "$3"; eval "$2"; eval "$1"
	fi
}

say "results: $OUT"
awk '$1 > 1.0 { exit 1 }' /proc/loadavg ||
	say "NOTE: load average $(cut -d' ' -f1 /proc/loadavg): other work is running on this machine; expect noise (see 'others' per row)"
say "mode $MODE: $ROUNDS rounds, sizes $SIZES; softrdmad pid $DPID (socket $SOFTRDMA_SOCKET); pin=$PIN"
printf 'round\tgroup\tmetric\tsystem\tsize\tvalue\tunit\tprobe_ns\textra\n' >"$RAW"

# the same-host measurements (everything but the two-host section)
samehost_section() {
	for ROUND in $(seq 1 "$ROUNDS"); do
		GROUP=bw
		for s in $SIZES; do
			m_memcpy "$s"
			# UCX posix between softrdma's perftest and UCX over softrdma
			triple "m_sr_bw ib_write_bw $s" "m_ucx_bw put_bw $s" "m_ucxsr_bw $s"
			case " $READ_SIZES " in *" $s "*) pair "m_sr_bw ib_read_bw $s" "m_ucx_bw get $s" ;; esac
			case " $SEND_SIZES " in *" $s "*)
				if [ "$s" -le 8192 ]; then
					# and UCX's streaming two-sided test, where uct posix has
					# one (am bcopy: up to 8 KiB), next to softrdma both ways
					triple "m_sr_bw ib_send_bw $s" "m_ucx_bw am_bw $s" "m_fi_bw $s"
				else
					pair "m_sr_bw ib_send_bw $s" "m_fi_bw $s"
				fi
				;;
			esac
		done
		GROUP=lat
		for l in $LAT_PAIRS; do
			case $l in
			write) triple "m_sr_lat ib_write_lat" "m_ucx_lat put_lat" "m_ucxsr_lat" ;;
			send) pair "m_sr_lat ib_send_lat" "m_ucx_lat am_lat" ;;
			read) pair "m_sr_lat ib_read_lat" "m_ucx_lat get" ;;
			atomic) pair "m_sr_lat ib_atomic_lat" "m_ucx_lat fadd" ;;
			esac
		done
	done

	# Does pinning matter?  Unpinned against pinned (server CPU 1, client CPU 0),
	# softrdma and UCX latency, interleaved.  Full mode only.
	if [ "$MODE" = full ]; then
		GROUP=pincheck
		save=("$PIN_S" "$PIN_C" "$PROBE_PIN" "$UCX_S" "$UCX_C")
		for ROUND in 1 2 3; do
			for pin in 0 1; do
				if [ $pin = 1 ]; then
					PIN_S="taskset -c 1"; PIN_C="taskset -c 0"; PROBE_PIN="-c 0,1"; UCX_S="-c 1"; UCX_C="-c 0"
				else
					PIN_S=""; PIN_C=""; PROBE_PIN=""; UCX_S=""; UCX_C=""
				fi
				probe; pt ib_write_lat 8 100000
				record "pin${pin}_ib_write_lat" softrdma 8 "$(cyc2us "$(jget "$PT_JSON" t_typical)")" usec "" "pinned=$pin"
				probe; ucx put_lat 8 200000
				record "pin${pin}_ucx_put_lat" ucx 8 "$(ucx_field 2)" usec "" "pinned=$pin"
			done
		done
		PIN_S=${save[0]}; PIN_C=${save[1]}; PROBE_PIN=${save[2]}; UCX_S=${save[3]}; UCX_C=${save[4]}
	fi

	# ------------------------------------------------------ resource costs
	GROUP=resources
	ROUND=0
	say "resource cost: 1000 QPs, 1000 MRs on one page, 500 MRs on their own pages ..."
	"$SR" run -- "$BB/resource_cost" "$SR" 1000 1000 >"$OUT/resources.txt" 2>"$LOGS/resource_cost.err" ||
		say "resource_cost failed, see $LOGS/resource_cost.err"
	sed 's/^/  /' "$OUT/resources.txt" | tee -a "$OUT/progress.log"
	: >"$OUT/qp_scale.txt"
	for ROUND in 1 2 3; do
		"$SR" run -- "$BB/qp_scale" 1000 >>"$OUT/qp_scale.txt" 2>>"$LOGS/qp_scale.err" ||
			say "qp_scale failed, see $LOGS/qp_scale.err"
		say "qp_scale round $ROUND: $(tail -1 "$OUT/qp_scale.txt") (pairs create_s connect_s total_s destroy_s)"
	done
}

# --against: softrdma's same-host figures on both trees, A B / B A
ab_section() {
	for ROUND in $(seq 1 "$ROUNDS"); do
		GROUP=bw
		for s in $SIZES; do
			pair "m_sr_bw ib_write_bw $s" "against m_sr_bw ib_write_bw $s"
			pair "m_ucxsr_bw $s" "against m_ucxsr_bw $s"
			case " $READ_SIZES " in *" $s "*) pair "m_sr_bw ib_read_bw $s" "against m_sr_bw ib_read_bw $s" ;; esac
			case " $SEND_SIZES " in *" $s "*) pair "m_sr_bw ib_send_bw $s" "against m_sr_bw ib_send_bw $s" ;; esac
		done
		GROUP=lat
		for l in $LAT_PAIRS; do
			pair "m_sr_lat ib_${l}_lat" "against m_sr_lat ib_${l}_lat"
		done
		pair "m_ucxsr_lat" "against m_ucxsr_lat"
	done
}

# the two-host section (bench/twohost.sh): with --against, softrdma's rows
# on both trees (th_main's A/B mode)
twohost_section() {
	. "$ROOT/bench/twohost.sh"
	# in a subshell: its namespaces and daemons are cleaned up by its own
	# EXIT trap, and lib_netns.sh's exit on a machine without namespaces
	# ends only this section
	(
		trap 'exit 130' INT TERM
		[ -n "$TH_ROUNDS" ] || unset TH_ROUNDS
		th_setup_params
		ROUNDS=$TH_ROUNDS
		TH_AGAINST=${AB_BUILD:-}
		th_main
	)
	rc=$?
	[ $rc = 0 ] || { say "two-host section ended early (exit $rc)"; echo "ended early (exit $rc)" >>"$OUT/twohost.txt"; }
	echo "wall time with the two-host section: $(($(date +%s) - T_START)) s" >>"$OUT/env.txt"
}

if [ -n "$AGAINST" ]; then
	[ "$SAMEHOST" = 1 ] && ab_section
	if [ "$TWOHOST" = 1 ]; then
		cleanup
		DPID=
		trap - EXIT
		twohost_section
	fi
	/usr/bin/python3 "$ROOT/bench/ab.py" "$RAW" >"$OUT/ab.txt"
	rc=$?
	tee -a "$OUT/progress.log" <"$OUT/ab.txt"
	say "A/B table: $OUT/ab.txt"
	exit $rc
fi
[ "$SAMEHOST" = 1 ] && samehost_section

D_TICKS1=$(cpu_ticks "$DPID")
{
	echo "daemon CPU time during the run: $(awk -v a="$D_TICKS0" -v b="$D_TICKS1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f s", (b - a) / hz }')"
	echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "placement probes run: $PROBES"
	echo "wall time: $(($(date +%s) - T_START)) s"
} >>"$OUT/env.txt"
"$SR" status >"$LOGS/status-end.txt" 2>&1

cleanup
DPID=
trap - EXIT

# ---------------------------------------------------- two hosts (root)
[ "$TWOHOST" = 1 ] && twohost_section

# connection set-up: cmtime against TCP on one host and (root) two
say "connection set-up (bench/cm_setup.sh) ..."
"$ROOT/bench/cm_setup.sh" "$BUILD" "$OUT/cm_setup.txt" 3 1000 >>"$OUT/progress.log" 2>&1 ||
	say "cm_setup.sh failed"

say "writing report and plots ..."
if /usr/bin/python3 "$ROOT/bench/report.py" "$OUT"; then
	say "report: $OUT/report.md"
else
	say "report.py failed"
	exit 1
fi
