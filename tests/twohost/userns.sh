#!/bin/bash
# twohost_unprivileged: two hosts with no privilege at all, as a developer
# without root makes them on a laptop or in a CI container
# (scripts/two-hosts.sh: a user namespace of the caller's own holding two
# network namespaces joined by a veth, a softrdmad in each).  Run as root,
# the test drops to nobody first, so nothing it does can lean on root.
#   userns.sh BUILD_DIR
#  1. the processes are the caller's user outside their namespace (uid_map:
#     0 inside is nobody's uid outside), and hold no capability there;
#  2. Debian's ibv_rc_pingpong, ib_write_bw (RC) and ib_send_bw (UD) across
#     the hosts: both sides exit 0, and each host's engine sent and
#     received RoCEv2 packets (softrdma status: tx_pkts, rx_pkts);
#  3. Debian's rping across the hosts, through the connection manager,
#     verifying its data (-V);
#  4. when the script is done, none of its processes is left and neither is
#     its temporary directory.
# Skipped (77) where unprivileged user namespaces are off or the build
# cannot be read by nobody.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
B=$(cd "$1" && pwd -P)
TH=$here/../../scripts/two-hosts.sh

if [ "$(id -u)" = 0 ]; then
	command -v setpriv >/dev/null || { echo "SKIP: no setpriv(1)"; exit 77; }
	as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
	"${as[@]}" test -x "$B/bin/softrdmad" -a -r "$TH" ||
		{ echo "SKIP: nobody cannot read $B or $TH"; exit 77; }
else
	as=()
fi
out=$(mktemp -d)
chmod 777 "$out"
trap 'rm -rf "$out"' EXIT

# the inside: one line per check, "ok NAME" or "FAIL NAME: why"
cat >"$out/inside.sh" <<'EOF'
set -u
o=$1 sr=$2
ok() { echo "ok $1"; }
bad() { echo "FAIL $1: $2"; }
echo "$TWO_HOSTS_PIDS" >"$o/pids"
dirname "$(dirname "$(command -v on_a)")" >"$o/dir"
read -r _ outer _ </proc/self/uid_map
[ "$outer" = "$OUTER_UID" ] && ok uid_map || bad uid_map "0 inside is uid $outer outside, wanted $OUTER_UID"
port=18900
# pair NAME SERVER... -- CLIENT...: both sides exit 0
pair() {
	local name=$1 s=() c=() sp
	shift
	while [ "$1" != -- ]; do s+=("$1"); shift; done
	shift
	c=("$@")
	port=$((port + 1))
	timeout 60 on_a "${s[@]}" -p $port >"$o/$name.srv" 2>&1 &
	sp=$!
	for _ in $(seq 200); do ss -ltnH "sport = :$port" | grep -q . && break; sleep 0.02; done
	timeout 60 on_b "${c[@]}" -p $port >"$o/$name.cli" 2>&1
	local crc=$? src
	wait $sp
	src=$?
	if [ $crc = 0 ] && [ $src = 0 ]; then ok "$name"; else
		bad "$name" "client $crc, server $src"
		tail -3 "$o/$name.cli" "$o/$name.srv"
	fi
}
pair rc_pingpong ibv_rc_pingpong -g "$GID_A" -s 4096 -n 500 -- ibv_rc_pingpong -g "$GID_B" -s 4096 -n 500 "$ADDR_A"
pair write_bw_rc ib_write_bw -d soft0 -x "$GID_A" -F -s 65536 -n 2000 -- \
	ib_write_bw -d soft0 -x "$GID_B" -F -s 65536 -n 2000 "$ADDR_A"
pair send_bw_ud ib_send_bw -d soft0 -x "$GID_A" -F -c UD -s 1024 -n 2000 -- \
	ib_send_bw -d soft0 -x "$GID_B" -F -c UD -s 1024 -n 2000 "$ADDR_A"
# rping's server takes its port from -p as well; -V checks every ping's data
port=$((port + 1))
timeout 60 on_a rping -s -a "$ADDR_A" -p $port -C 10 -V >"$o/rping.srv" 2>&1 &
sp=$!
for _ in $(seq 200); do on_a "$sr" status | grep -q "LISTEN .*:$port " && break; sleep 0.02; done
timeout 60 on_b rping -c -a "$ADDR_A" -p $port -C 10 -V >"$o/rping.cli" 2>&1
crc=$?
wait $sp
src=$?
[ $crc = 0 ] && [ $src = 0 ] && ok rping || { bad rping "client $crc, server $src"; tail -3 "$o/rping.cli" "$o/rping.srv"; }
for h in a b; do
	st=$(on_$h "$sr" status)
	tx=$(sed -n 's/.* tx_pkts \([0-9]*\) .*/\1/p' <<<"$st" | head -1)
	rx=$(sed -n 's/.* rx_pkts \([0-9]*\) .*/\1/p' <<<"$st" | head -1)
	[ "${tx:-0}" -gt 1000 ] && [ "${rx:-0}" -gt 1000 ] && ok "wire_$h" ||
		bad "wire_$h" "host $h's engine: tx_pkts ${tx:-none}, rx_pkts ${rx:-none}"
done
EOF

OUTER_UID=${as:+65534}
OUTER_UID=${OUTER_UID:-$(id -u)}
export OUTER_UID
"${as[@]}" "$TH" -b "$B" -- bash "$out/inside.sh" "$out" "$B/bin/softrdma" >"$out/result" 2>&1
rc=$?
[ $rc = 77 ] && { cat "$out/result"; echo "SKIP: no unprivileged user namespace here"; exit 77; }
cat "$out/result"
fails=$(grep -c '^FAIL' "$out/result")
oks=$(grep -c '^ok' "$out/result")

# no capability outside: a process of nobody's holds none in the first
# namespace (checked from outside, on a helper that lives as long as we look)
if [ ${#as[@]} -gt 0 ]; then
	"${as[@]}" sleep 5 &
	cp=$!
	sleep 0.1
	capeff=$(awk '/^CapEff/ {print $2}' /proc/$cp/status)
	kill $cp
	wait $cp 2>/dev/null
	[ "$capeff" = 0000000000000000 ] && { echo "ok no_caps"; oks=$((oks + 1)); } ||
		{ echo "FAIL no_caps: CapEff $capeff"; fails=$((fails + 1)); }
fi

# nothing left: none of the processes two-hosts.sh started (its daemons and
# host b's holder), not its temporary directory
sleep 0.2
left='' after=''
for p in $(cat "$out/pids" 2>/dev/null); do [ -e /proc/$p ] && left="$left $p"; done
d=$(cat "$out/dir" 2>/dev/null)
[ -n "$d" ] && [ -e "$d" ] && after=$d
if [ -s "$out/pids" ] && [ -z "$left" ] && [ -z "$after" ]; then
	echo "ok nothing_left"
	oks=$((oks + 1))
else
	echo "FAIL nothing_left: processes '$left', directory '$after'"
	fails=$((fails + 1))
fi
echo "$oks passed, $fails failed"
want=8
[ ${#as[@]} -gt 0 ] && want=9 # and no_caps
[ "$fails" = 0 ] && [ "$oks" -ge "$want" ] && [ $rc = 0 ]
