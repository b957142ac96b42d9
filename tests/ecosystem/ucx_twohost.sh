#!/bin/bash
# One ucx_perftest test between two hosts (two network namespaces joined by
# a veth, a softrdmad each: tests/lib_netns.sh), so the data crosses the
# RoCEv2 engine: ucx_twohost.sh BUILD_DIR [VAR=VALUE...] -- ARGS...
# Server in host a, client in host b against a's veth address.  No GID is
# named: UCX chooses the first RoCE v2 IPv4 GID by itself, and soft0 lists
# the real interfaces' addresses before loopback's, so that is the veth's
# (were it 127.0.0.1, the data would lead back to the sender's own host and
# host a's engine would receive nothing).  Passes when both exit 0, the
# client prints its final figures and host a's engine received datagrams.
# Needs namespaces (tests/lib_netns.sh); skips without.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib_netns.sh"
build=$1
shift
envs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	envs+=("$1")
	shift
done
shift
command -v ucx_perftest >/dev/null ||
	nn_skip "ucx_perftest is not installed (Debian package ucx-utils; make deps installs it)"
nn_setup "$build" 1500 || exit 1
srv=$(mktemp) cli=$(mktemp)
trap 'nn_cleanup; rm -f "$srv" "$cli"' EXIT
port=$((20000 + RANDOM % 20000))
nn_bg a "$srv" env "${envs[@]}" timeout 280 \
	"$NN_SR" run -q -- ucx_perftest "$@" -p $port
srv_pid=$NN_LAST_PID
if ! nn_wait_port a $port; then
	echo "FAIL: the server did not listen on port $port"
	cat "$srv"
	exit 1
fi
on_b env "${envs[@]}" timeout 250 \
	"$NN_SR" run -q -- ucx_perftest "$@" -p $port "$(addr_a)" >"$cli" 2>&1
crc=$?
for _ in $(seq 100); do kill -0 "$srv_pid" 2>/dev/null || break; sleep 0.1; done
echo "--- client in host b (exit $crc)"
cat "$cli"
echo "--- server in host a"
cat "$srv"
fail=0
[ $crc = 0 ] || { echo "FAIL: the client exited $crc"; fail=1; }
kill -0 "$srv_pid" 2>/dev/null && { echo "FAIL: the server did not finish"; fail=1; }
grep -q '^Final:' "$cli" || { echo "FAIL: no final figures"; fail=1; }
# what host a's engine received from b (a UD datagram is sent by the
# posting process itself, so b's engine may have sent nothing)
rx=$(on_a "$NN_SR" status | grep -o 'rx_pkts [0-9]*' | awk '{print $2}')
echo "host a's RoCEv2 port: rx_pkts ${rx:-?}"
[ "${rx:-0}" -gt 0 ] || { echo "FAIL: nothing came over the RoCEv2 wire"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
