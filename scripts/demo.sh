#!/bin/bash
# The main job of `make demo`: show the softrdma device as an unmodified
# rdma-core program sees it, then move data between two processes with
# Debian's own ibv_rc_pingpong.  Uses a private daemon (its own socket
# name) and stops it afterwards.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
export SOFTRDMA_SOCKET="softrdma-demo-$$"
"$B/bin/softrdmad" --idle 0 & DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null || true' EXIT
SR="$B/bin/softrdma"
echo "== softrdma run -- ibv_devinfo -v"
"$SR" run -- ibv_devinfo -v
echo
echo "== ibv_rc_pingpong, server and client as two processes"
"$SR" run -- ibv_rc_pingpong -g 0 -p 18777 -s 65536 -n 2000 > /tmp/demo-srv.$$ 2>&1 & SPID=$!
for _ in $(seq 50); do ss -ltn | grep -q ':18777 ' && break; sleep 0.1; done
"$SR" run -- ibv_rc_pingpong -g 0 -p 18777 -s 65536 -n 2000 127.0.0.1
wait $SPID
echo "-- server:"; cat /tmp/demo-srv.$$; rm -f /tmp/demo-srv.$$
echo
echo "== softrdma status"
"$SR" status
