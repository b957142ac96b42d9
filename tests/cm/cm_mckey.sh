#!/bin/bash
# Debian's unmodified mckey (rdmacm-utils): two receivers join an IPv4
# multicast group through rdma_join_multicast, a sender (a full member, or
# with -o a send-only one) sends them N datagrams, and every receiver must
# get all of them.  On one host (all three in host a) or across two (the
# receivers in b).  The hosts are namespaces of ours (tests/lib_netns.sh)
# with a multicast route on their veth: IP multicast never leaves them.
# With --gid MEMBERS the members named (r1, r2, s: comma-separated) join
# as AF_IB members instead (mckey -M ::ffff:GROUP, the group's MGID), the
# others by the group's IP address, and every member must report the
# same MGID.
#
# usage: cm_mckey.sh BUILD_DIR onehost|twohost [--gid MEMBERS] [SENDER_FLAGS...]
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
build=$1 mode=$2
shift 2
gid_members=
if [ "${1:-}" = --gid ]; then
	gid_members=,$2,
	shift 2
fi
nn_setup "$build" || exit 1
for ns in "$NN_A" "$NN_B"; do
	ip -n "$ns" route add 224.0.0.0/4 dev "$NN_IF" || exit 1
done
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT
group=239.$((RANDOM % 200 + 10)).$((RANDOM % 250)).$((RANDOM % 250 + 1))
count=20
# how member $1 names the group: -M MGID (AF_IB) or -m GROUP (IP)
group_opt() {
	case $gid_members in
	*,$1,*) echo "-M ::ffff:$group" ;;
	*) echo "-m $group" ;;
	esac
}
rhost=a
[ "$mode" = twohost ] && rhost=b
raddr=$(addr_$rhost)
for r in 1 2; do
	# shellcheck disable=SC2046 # the option and its value are two words
	nn_bg $rhost "$log/recv$r" timeout 60 stdbuf -oL mckey $(group_opt r$r) -b "$raddr" -C $count
	rpid[$r]=$NN_LAST_PID
done
# the receivers are members once they say so (mckey prints after its join)
for _ in $(seq 200); do
	n=$(cat "$log"/recv1 "$log"/recv2 2>/dev/null | grep -c "joined")
	[ "$n" -ge 2 ] && break
	sleep 0.05
done
start=$(date +%s.%N)
# shellcheck disable=SC2046
on_a timeout 60 stdbuf -oL mckey $(group_opt s) -b "$(addr_a)" -s -C $count "$@" >"$log/send" 2>&1
src=$?
ok=1
for r in 1 2; do
	wait "${rpid[$r]}"
	rc[$r]=$?
done
echo "--- sender: mckey $(group_opt s) -b $(addr_a) -s -C $count $* (rc $src, $(echo "$(date +%s.%N) - $start" | bc) s)"
cat "$log/send"
for r in 1 2; do
	echo "--- receiver $r in host $rhost: mckey $(group_opt r$r) (rc ${rc[$r]})"
	cat "$log/recv$r"
	[ "${rc[$r]}" = 0 ] || { echo "FAIL: receiver $r exited ${rc[$r]}"; ok=0; }
	grep -q "data transfers complete" "$log/recv$r" || { echo "FAIL: receiver $r did not get its $count messages"; ok=0; }
done
[ $src = 0 ] || { echo "FAIL: sender exited $src"; ok=0; }
grep -q "data transfers complete" "$log/send" || { echo "FAIL: the sender did not finish"; ok=0; }
# AF_IB or IP, every member is in the group of one MGID
for f in recv1 recv2 send; do
	grep -q "joined dgid: ::ffff:$group " "$log/$f" ||
		{ echo "FAIL: $f did not join MGID ::ffff:$group"; ok=0; }
done
for h in a b; do
	left=$(on_host $h "$NN_SR" status | grep -E '^  cm: ' || true)
	echo "host $h daemon after: $left"
	echo "$left" | grep -q '^  cm: 0 ids' || { echo "FAIL: CM ids left in host $h"; ok=0; }
done
[ $ok = 1 ] && echo "PASS"
[ $ok = 1 ]
