#!/bin/bash
# Debian's iperf3 under librspreload across two hosts (network namespaces,
# tests/lib_netns.sh; root): the server in host a, the client in host b,
# both unmodified TCP programs whose sockets are rsockets, for a few
# seconds at the veth's MTU.  Both must exit 0, the JSON each writes must
# report bytes received (iperf3 exits 0 even when its test failed, so its
# "error" is what tells: the only one allowed is the TCP_INFO /
# TCP_CONGESTION query that rsockets refuse, as rdma-core's do), and every
# RoCEv2 datagram a host counts as sent must have reached the other host:
# a process's own wire socket was once made through librspreload's
# socket() (an rsocket's /dev/null placeholder: src/core/own_socket.h), so
# whatever a receive half or a posting thread sent was lost, and iperf3's
# control connection died ("unable to receive control message") in 5 runs
# of 6 with one PSN resent until its retries were nearly gone.
#
#   rs_iperf.sh BUILD_DIR MTU [SECONDS]
set -u
here=$(dirname "$0")
build=$1 mtu=$2 secs=${3:-3}
pre=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
command -v iperf3 >/dev/null || { echo "FAIL: no iperf3 (Debian package iperf3)"; exit 1; }
[ -e $pre ] || { echo "FAIL: $pre missing (package librdmacm1)"; exit 1; }
source "$here/../lib_netns.sh"
nn_setup "$build" "$mtu" || exit 1
dir=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$dir"' EXIT
SR=$NN_SR
port=$((20000 + (RANDOM % 20000)))
limit=$((secs + 40))

nn_bg a "$dir/server.log" timeout $limit "$SR" run -- env LD_PRELOAD=$pre \
	iperf3 -s -1 -J --logfile "$dir/server.json" -B "$(addr_a)" -p $port
spid=$NN_LAST_PID
for _ in $(seq 200); do
	on_a "$SR" status | grep -q "LISTEN .*:$port " && break
	sleep 0.05
done
ok=1
on_a "$SR" status | grep -q "LISTEN .*:$port " || { echo "FAIL: no rsocket listener"; ok=0; }
on_a ss -Htln "sport = :$port" | grep -q . && { echo "FAIL: a TCP listener on $port"; ok=0; }
start=$(date +%s%N)
on_b timeout $limit "$SR" run -- env LD_PRELOAD=$pre \
	iperf3 -c "$(addr_a)" -p $port -t "$secs" -J --logfile "$dir/client.json" \
	>"$dir/client.log" 2>&1
crc=$?
wait "$spid"
src=$?
echo "--- client (rc $crc, $((($(date +%s%N) - start) / 1000000)) ms)"
cat "$dir/client.log"
echo "--- server (rc $src)"
cat "$dir/server.log"
[ $crc = 0 ] || { echo "FAIL: client exited $crc"; ok=0; }
[ $src = 0 ] || { echo "FAIL: server exited $src"; ok=0; }
/usr/bin/python3 - "$dir/client.json" "$dir/server.json" <<'EOF' || ok=0
import json, sys

ok = True
for role, path in zip(("client", "server"), sys.argv[1:]):
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL: {role}: no JSON report ({e})")
        ok = False
        continue
    err = j.get("error")
    got = j.get("end", {}).get("sum_received", {}).get("bytes", 0)
    rate = j.get("end", {}).get("sum_received", {}).get("bits_per_second", 0)
    print(f"{role}: received {got} bytes, {rate / 8e6:.1f} MB/s, error: {err}")
    if err is not None and err != "getsockopt - Operation not supported":
        print(f"FAIL: {role}: {err}")
        ok = False
    if not got:
        print(f"FAIL: {role}: no bytes moved")
        ok = False
sys.exit(0 if ok else 1)
EOF
# counter NAME HOST: that host's counter from `softrdma status`'s RoCE line
counter() { on_host "$2" "$SR" status | grep 'roce v2' | tr ' ' '\n' | grep -A1 -x "$1" | tail -1; }
sleep 0.2 # the last ACKs
for h in a b; do
	o=$([ $h = a ] && echo b || echo a)
	tx=$(counter tx_pkts $o) rx=$(counter rx_pkts $h)
	echo "host $o sent $tx datagrams, host $h received $rx"
	[ "${rx:-0}" -ge $((${tx:-1} * 99 / 100)) ] 2>/dev/null ||
		{ echo "FAIL: host $o's datagrams did not reach host $h"; ok=0; }
done
for h in a b; do
	echo "--- host $h: $(on_host $h "$SR" status | grep 'roce v2' | sed 's/ [a-z_-]* 0\b//g')"
done
[ $ok = 1 ] && echo "PASS: iperf3 under librspreload across two hosts, MTU $mtu"
[ $ok = 1 ]
