#!/bin/bash
# One ucx_perftest test between two hosts (two network namespaces joined by
# a veth, a softrdmad each: tests/lib_netns.sh), so the data crosses the
# RoCEv2 engine: ucx_twohost.sh BUILD_DIR [VAR=VALUE...] -- ARGS...
# Server in host a, client in host b against a's veth address.  Each side
# names its veth address's GID with UCX_IB_GID_INDEX: UCX's automatic choice
# is the first RoCE v2 IPv4 GID, which on soft0 is 127.0.0.1 (the device
# serves every interface of the host, loopback included), an address that
# leads back to the same host.  Passes when both exit 0 and the client
# prints its final figures.  Needs root (namespaces); skips otherwise.
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
gid_a=$(nn_gid_index a "$(addr_a)") && gid_b=$(nn_gid_index b "$(addr_b)") || {
	echo "FAIL: no GID for the veth addresses"
	exit 1
}
srv=$(mktemp) cli=$(mktemp)
trap 'nn_cleanup; rm -f "$srv" "$cli"' EXIT
port=$((20000 + RANDOM % 20000))
nn_bg a "$srv" env "${envs[@]}" UCX_IB_GID_INDEX=$gid_a timeout 280 \
	"$NN_SR" run -q -- ucx_perftest "$@" -p $port
srv_pid=$NN_LAST_PID
if ! nn_wait_port a $port; then
	echo "FAIL: the server did not listen on port $port"
	cat "$srv"
	exit 1
fi
on_b env "${envs[@]}" UCX_IB_GID_INDEX=$gid_b timeout 250 \
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
