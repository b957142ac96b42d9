#!/bin/bash
# One fi_pingpong run between two processes, both under `softrdma run`
# (issue 13): fi_pair.sh BUILD_DIR [--twohost] ARGS... runs `fi_pingpong
# ARGS` as the server, then as the client against the server's address.
#   one host (default): the client connects to 127.0.0.1 (fi_pingpong's own
#     TCP control connection; the endpoints take its local address, so the
#     verbs provider's rdma_cm ids bind to 127.0.0.1 too, and the data goes
#     over softrdma's same-host path);
#   --twohost: server in host a, client in host b of two network namespaces
#     (tests/lib_netns.sh, root), the data over RoCEv2.  Only endpoints
#     whose address is the device's GID and QP number work there (verbs
#     dgram, verbs;ofi_rxd): for msg and rxm endpoints fi_pingpong has no
#     way to name the server's address, and the verbs provider then binds
#     the listener to "localhost" (vrb_get_rdma_rai, as it does on any
#     verbs device), which it hands to a client on another host.
# Passes when both exit 0, the client prints a figure for every size, and
# softrdma counted at least the payload the client reports (the transport
# was softrdma, not a fallback; each side sends the payload once, so twice
# the client's payload at least): on one host the test daemon's byte
# counter (it serves only these two processes), across hosts the bytes the
# two hosts' RoCEv2 engines received.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$1
shift
twohost=0
if [ "${1:-}" = --twohost ]; then
	twohost=1
	shift
fi
if ! command -v fi_pingpong >/dev/null; then
	echo "SKIP: fi_pingpong is not installed (Debian package libfabric-bin; make deps installs it)"
	exit 77
fi
# (first: not root, lib_netns.sh runs this script again in a user namespace)
[ $twohost = 1 ] && source "$here/../lib_netns.sh"
srv=$(mktemp) cli=$(mktemp) dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
if [ $twohost = 1 ]; then
	nn_setup "$build" 1500 || exit 1
	trap 'nn_cleanup; rm -rf "$srv" "$cli" "$dir"' EXIT
	SR=$NN_SR
	server_bg() { nn_bg a "$@" && srv_pid=$NN_LAST_PID; }
	client() { on_b "$@"; }
	wait_port() { nn_wait_port a "$1"; }
	server_addr=$(addr_a)
	# rx_bytes of the RoCEv2 engines of both hosts, summed
	carried() {
		local h n t=0
		for h in a b; do
			n=$(on_host $h "$SR" status | sed -n 's/^  roce v2 .* rx_bytes \([0-9]*\) .*/\1/p')
			t=$((t + ${n:-0}))
		done
		echo $t
	}
else
	source "$here/../lib.sh"
	sr_setup "$build" || exit 1
	trap 'sr_cleanup; rm -rf "$srv" "$cli" "$dir"' EXIT
	while ss -ltnH "sport = :$port" | grep -q .; do port=$((port + 1)); done
	server_bg() { sr_bg "$@" && srv_pid=$SR_LAST_PID; }
	client() { "$@"; }
	wait_port() { sr_wait_port "$1"; }
	server_addr=127.0.0.1
	# the same-host byte counter of the test's daemon
	carried() { "$SR" status | grep -o ' bytes [0-9]*' | head -1 | awk '{print $2}'; }
fi
# libfabric writes a backtrace file into the working directory if it crashes
cd "$dir" || exit 1
# the verbs provider's info log names the device it enumerated
server_bg "$srv" env FI_LOG_LEVEL=info timeout 60 "$SR" run -q -- fi_pingpong "$@" -B $port
if ! wait_port $port; then
	echo "FAIL: the server did not listen on port $port"
	cat "$srv"
	exit 1
fi
client env FI_LOG_LEVEL=info timeout 50 "$SR" run -q -- fi_pingpong "$@" -P $port \
	"$server_addr" >"$cli" 2>&1
crc=$?
wait "$srv_pid"
src=$?
SR_PIDS=() NN_PIDS=()
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
bytes=$(carried)
echo "softrdma carried ${bytes:-?} bytes; client payload $payload bytes in $rows rows"
[ "${bytes:-0}" -ge $((2 * payload)) ] && [ "$payload" -gt 0 ] ||
	{ echo "FAIL: softrdma did not carry the client's payload"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
