#!/bin/bash
# The device as Debian's programs see it (issue "Foundation" acceptance):
# ibv_devices lists soft0; ibv_devinfo -v shows it ACTIVE, Ethernet, with
# this host's addresses in its GID table; ibv_asyncwatch opens it and waits;
# pyverbs lists it.
set -u
source "$(dirname "$0")/../lib.sh"
sr_setup "$1" || exit 1
fails=0 passes=0
check() { # check NAME CONDITION-COMMAND...
	local name=$1
	shift
	if "$@"; then
		echo "PASS $name"; passes=$((passes + 1))
	else
		echo "FAIL $name"; fails=$((fails + 1))
	fi
}

out=$("$SR" run -- ibv_devices 2>&1)
echo "$out"
check "ibv_devices lists soft0 with a GUID" grep -Eq '^ +soft0[[:space:]]+[0-9a-f]{16}$' <<<"$out"

info=$(LD_BIND_NOW=1 "$SR" run -- ibv_devinfo -v 2>&1)
echo "$info" | head -20
check "devinfo: hca_id soft0" grep -q $'^hca_id:\tsoft0' <<<"$info"
check "devinfo: port ACTIVE" grep -q 'state:.*PORT_ACTIVE (4)' <<<"$info"
check "devinfo: link layer Ethernet" grep -q 'link_layer:.*Ethernet' <<<"$info"
check "devinfo: active_mtu >= 1024" grep -Eq 'active_mtu:.*(1024|2048|4096)' <<<"$info"
check "devinfo: max_qp_rd_atom > 0" grep -Eq 'max_qp_rd_atom:[[:space:]]+[1-9]' <<<"$info"
# every IPv4 address of this host appears as an IPv4-mapped RoCE v2 GID
for a in $(ip -4 -o addr show up | awk '{print $4}' | cut -d/ -f1); do
	check "devinfo: GID for $a" grep -q "::ffff:$a, RoCE v2" <<<"$info"
done
for a in $(ip -6 -o addr show up | awk '{print $4}' | cut -d/ -f1); do
	check "devinfo: GID for $a" grep -Eq "[[:space:]]$a, RoCE v2" <<<"$info"
done

log=$(mktemp)
sr_bg "$log" stdbuf -oL "$SR" run -- ibv_asyncwatch -d soft0
for _ in $(seq 50); do grep -q 'async event FD' "$log" && break; sleep 0.1; done
cat "$log"
check "ibv_asyncwatch opens the device" grep -q 'soft0: async event FD [0-9]' "$log"
sleep 0.5
check "ibv_asyncwatch keeps waiting" kill -0 "$SR_LAST_PID"
rm -f "$log"

py=$("$SR" run -- /usr/bin/python3 -c "import pyverbs.device as d; print([x.name for x in d.get_device_list()])" 2>&1)
echo "$py"
check "pyverbs lists soft0" grep -q "\[b'soft0'\]" <<<"$py"
echo "$passes passed, $fails failed"
[ $fails = 0 ]
