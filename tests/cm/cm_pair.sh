#!/bin/bash
# Runs a connection-manager client/server pair of Debian's unmodified
# programs (rdmacm-utils) as two processes on this host under `softrdma
# run`, against a private daemon, and checks what a user would: both exit 0
# and print their result lines, and the daemon holds no CM id afterwards.
#
# usage: cm_pair.sh BUILD_DIR SERVER_RE CLIENT_RE SERVER_CMD... -- CLIENT_CMD...
#   (an empty SERVER_RE: the server prints nothing to check, e.g. cmtime's)
#   @PORT@ in a command becomes a free random port, @ADDR@ this host's first
#   non-loopback IPv4 address (127.0.0.1 when it has none).  The client
#   starts once the daemon shows the server's listener on that port.
# Environment: CM_SERVER_STAYS=1 for servers that never exit (cmtime,
#   qperf): the server is stopped once the client is done and must still be
#   running then; CM_WAIT=tcp:PORT waits for a TCP listener instead (qperf);
#   CM_PORT=N for programs with a fixed port (udaddy: 7174; each test has
#   its own daemon, so its own port spaces); CM_NOTHING_LEFT=1: afterwards
#   `softrdma status` must list no process holding anything; CM_IDLE_CPU=1:
#   afterwards the daemon, idle, must use under 2% of a CPU (its control
#   path looks again for a while after a request: never for longer);
#   CM_ORDER=PRELOAD: the client's k-th connect waits for the server's
#   k-th listen (cm_common.sh cm_order_pre, cm_order.c).
set -u
here=$(dirname "$0")
source "$here/../lib.sh"
source "$here/cm_common.sh"
build=$1 sre=$2 cre=$3
shift 3
srv=() cli=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
shift
cli=("$@")
sr_setup "$build" || exit 1
port=${CM_PORT:-$((20000 + (RANDOM % 20000)))}
addr=$(ip -4 -o addr show scope global 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
addr=${addr:-127.0.0.1}
srv=("${srv[@]//@PORT@/$port}") cli=("${cli[@]//@PORT@/$port}")
srv=("${srv[@]//@ADDR@/$addr}") cli=("${cli[@]//@ADDR@/$addr}")
log=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$log"' EXIT

cm_order_pre "$log"
sr_bg "$log/server" "${CM_ORDER_PRE[@]}" timeout 120 stdbuf -oL "$SR" run -- "${srv[@]}"
spid=$SR_LAST_PID
case ${CM_WAIT:-cm} in
tcp:*) sr_wait_port "${CM_WAIT#tcp:}" ;;
*)
	for _ in $(seq 200); do
		"$SR" status | grep -q "LISTEN .*:$port " && break
		sleep 0.05
	done
	;;
esac
start=$(date +%s.%N)
"${CM_ORDER_PRE[@]}" timeout 120 stdbuf -oL "$SR" run -- "${cli[@]}" >"$log/client" 2>&1
crc=$?
cm_reap_server "$spid"
echo "--- client: ${cli[*]} (rc $crc, $(echo "$(date +%s.%N) - $start" | bc) s)"
cat "$log/client"
echo "--- server: ${srv[*]} (rc $src)"
cat "$log/server"
ok=1
[ $crc = 0 ] || { echo "FAIL: client exited $crc"; ok=0; }
[ $src = 0 ] || { echo "FAIL: server exited $src"; ok=0; }
grep -Eq "$cre" "$log/client" || { echo "FAIL: client did not print /$cre/"; ok=0; }
[ -z "$sre" ] || grep -Eq "$sre" "$log/server" || { echo "FAIL: server did not print /$sre/"; ok=0; }
sleep 0.2 # a stopped server's teardown
left=$("$SR" status | grep -E '^  cm: ' || true)
echo "daemon after: $left"
echo "$left" | grep -q '^  cm: 0 ids' || { echo "FAIL: CM ids left in the daemon"; "$SR" status | grep 'cm id'; ok=0; }
if [ -n "${CM_NOTHING_LEFT:-}" ]; then
	# every process gone: the daemon holds no object of any client
	for _ in $(seq 50); do
		"$SR" status | grep -q '^process' || break
		sleep 0.1
	done
	if "$SR" status | grep -q '^process'; then
		echo "FAIL: resources left in the daemon:"
		"$SR" status | grep -A3 '^process'
		ok=0
	else
		echo "daemon after: no process holds anything"
	fi
fi
if [ -n "${CM_IDLE_CPU:-}" ]; then
	sleep 0.2
	t0=$(awk '{print $14 + $15}' "/proc/$SR_DAEMON_PID/stat")
	sleep 2
	t1=$(awk '{print $14 + $15}' "/proc/$SR_DAEMON_PID/stat")
	ms=$(((t1 - t0) * 1000 / $(getconf CLK_TCK)))
	echo "daemon idle: ${ms} ms of CPU in 2 s"
	[ "$ms" -lt 40 ] || { echo "FAIL: the idle daemon keeps a CPU busy"; ok=0; }
fi
[ $ok = 1 ] && echo "PASS"
[ $ok = 1 ]
