#!/bin/bash
# One fi_pingpong run between two processes on this host, both under
# `softrdma run` (issue 13): fi_pair.sh BUILD_DIR ARGS... runs
# `fi_pingpong ARGS` as the server, then as the client against 127.0.0.1
# (fi_pingpong's own TCP control connection; the endpoints take its local
# address, so the verbs provider's rdma_cm ids bind to 127.0.0.1 too, and
# the data goes over softrdma's same-host path).  Passes when both exit 0,
# the client prints a figure for every size, and softrdma's daemon counted
# at least the payload the client reports (the transport was softrdma, not
# a fallback: the test's daemon serves only these two processes; each side
# sends the payload once, so twice the client's payload at least).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
build=$1
shift
if ! command -v fi_pingpong >/dev/null; then
	echo "SKIP: fi_pingpong is not installed (Debian package libfabric-bin; make deps installs it)"
	exit 77
fi
sr_setup "$build" || exit 1
port=$((20000 + RANDOM % 20000))
while ss -ltnH "sport = :$port" | grep -q .; do port=$((port + 1)); done
srv=$(mktemp) cli=$(mktemp) dir=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$srv" "$cli" "$dir"' EXIT
# libfabric writes a backtrace file into the working directory if it crashes
cd "$dir" || exit 1
# the verbs provider's info log names the device it enumerated
sr_bg "$srv" env FI_LOG_LEVEL=info timeout 60 "$SR" run -q -- fi_pingpong "$@" -B $port
srv_pid=$SR_LAST_PID
if ! sr_wait_port $port; then
	echo "FAIL: the server did not listen on port $port"
	cat "$srv"
	exit 1
fi
env FI_LOG_LEVEL=info timeout 50 "$SR" run -q -- fi_pingpong "$@" -P $port 127.0.0.1 >"$cli" 2>&1
crc=$?
wait "$srv_pid"
src=$?
SR_PIDS=()
show() { grep -vE '^(libfabric:|[[:space:]]|:)' "$1"; grep -E 'verbs_devs_print|listening on|vrb_get_rdmacm|warn' "$1"; }
echo "--- client (exit $crc)"
show "$cli"
echo "--- server (exit $src)"
show "$srv"
fail=0
[ $crc = 0 ] || { echo "FAIL: the client exited $crc"; fail=1; }
[ $src = 0 ] || { echo "FAIL: the server exited $src"; fail=1; }
grep -q 'verbs_devs_print.*#1 soft0' "$cli" ||
	{ echo "FAIL: the verbs provider did not name soft0"; fail=1; }
# rows: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
rows=$(awk '$3 ~ /^=[0-9]+$/ && $2 == substr($3, 2)' "$cli" | wc -l)
[ "$rows" -gt 0 ] || { echo "FAIL: no figures (every row must have #ack = #sent)"; fail=1; }
# payload the client sent: sum of size x count over its rows
payload=$(awk 'function sz(s) { if (s ~ /k$/) return s * 1024; if (s ~ /m$/) return s * 1048576; return s }
	$3 ~ /^=[0-9]+$/ { t += sz($1) * $2 } END { printf "%d", t }' "$cli")
st=$("$SR" status)
sends=$(grep -o 'counters: send [0-9]*' <<<"$st" | awk '{print $3}')
bytes=$(grep -o ' bytes [0-9]*' <<<"$st" | head -1 | awk '{print $2}')
echo "softrdma counters: sends ${sends:-?}, bytes ${bytes:-?}; client payload $payload bytes in $rows rows"
[ "${bytes:-0}" -ge $((2 * payload)) ] && [ "${sends:-0}" -gt 0 ] ||
	{ echo "FAIL: softrdma did not carry the client's payload"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
