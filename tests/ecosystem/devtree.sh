#!/bin/bash
# The device where the ecosystem looks for it (issue 13, first deliverable):
# `softrdma run` gives its program /dev/infiniband/<dev_name> and
# /sys/class/infiniband/<dev> (checked against ibv_devinfo -v of the same
# run by devtree_check.py, which also runs ibstat, infiniband-diags, on it)
# in private namespaces, leaves the rest of the system as it was, and
# --no-devnodes leaves them out.  As root it also runs the check as an
# unprivileged user (uid 65534, its own daemon), the user + mount
# namespace path.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
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
export SR_OUTSIDE_DEV="$(ls /dev)" SR_OUTSIDE_CLASS="$(ls /sys/class)"
had_dev=$([ -e /dev/infiniband ] && echo y || echo n)
had_sys=$([ -e /sys/class/infiniband ] && echo y || echo n)
# mounts of ours would be on /dev or /sys; others' tests running beside this
# one add and remove theirs elsewhere (ip netns: /run/netns/*)
our_mounts() { awk '$5 ~ "^/(dev|sys)(/|$)"' /proc/self/mountinfo | sort; }
mounts_before=$(our_mounts)

err=$(mktemp)
"$SR" run -- python3 "$here/devtree_check.py" 2>"$err"
check "the tree matches ibv_devinfo -v (as uid $(id -u))" [ $? = 0 ]
cat "$err"
check "run says what it did, on one line of stderr" \
	grep -q '^softrdma: soft0 is /dev/infiniband/uverbs0 .* for this program only (private' "$err"
"$SR" run -q -- true 2>"$err"
check "-q says nothing" [ ! -s "$err" ]
check "outside: /dev/infiniband as it was" [ "$([ -e /dev/infiniband ] && echo y || echo n)" = $had_dev ]
check "outside: /sys/class/infiniband as it was" \
	[ "$([ -e /sys/class/infiniband ] && echo y || echo n)" = $had_sys ]
check "outside: no mount added on /dev or /sys" [ "$(our_mounts)" = "$mounts_before" ]
if [ $had_sys = n ]; then
	check "--no-devnodes: no tree" "$SR" run --no-devnodes -- sh -c '! [ -e /sys/class/infiniband ]'
fi
# a run inside a run keeps the tree it finds (no second namespace)
out=$("$SR" run -q -- "$SR" run -q -- cat /proc/self/mountinfo | grep -c ' /dev/infiniband/')
check "a run inside a run reuses the tree" [ "$out" = 1 ]

# the unprivileged path: a user + mount namespace; the daemon, outside it,
# still admits the client (SO_PEERCRED shows the real uid)
if [ "$(id -u)" = 0 ]; then
	nb=65534
	if ! command -v setpriv >/dev/null; then
		echo "SKIP unprivileged part: setpriv (util-linux) not installed"
	elif ! setpriv --reuid=$nb --regid=$nb --clear-groups unshare -U true 2>/dev/null; then
		echo "SKIP unprivileged part: user namespaces are not allowed here"
	elif ! setpriv --reuid=$nb --regid=$nb --clear-groups test -x "$SR_BUILD/bin/softrdma"; then
		echo "SKIP unprivileged part: uid $nb cannot reach $SR_BUILD"
	else
		sock="softrdma-test-nb-$$-$RANDOM"
		setpriv --reuid=$nb --regid=$nb --clear-groups env SOFTRDMA_SOCKET=$sock \
			"$SR_BUILD/bin/softrdmad" --idle 0 &
		nbd=$!
		for _ in $(seq 100); do
			setpriv --reuid=$nb --regid=$nb --clear-groups env SOFTRDMA_SOCKET=$sock \
				"$SR" status 2>/dev/null | grep -q '^device' && break
			sleep 0.05
		done
		setpriv --reuid=$nb --regid=$nb --clear-groups env SOFTRDMA_SOCKET=$sock \
			SOFTRDMA_NO_SPAWN=1 HOME=/ "$SR" run -- python3 "$here/devtree_check.py" 2>"$err"
		check "the tree matches ibv_devinfo -v (as uid $nb)" [ $? = 0 ]
		cat "$err"
		check "uid $nb: in a private user and mount namespace" \
			grep -q 'private user and mount namespace' "$err"
		m=$(setpriv --reuid=$nb --regid=$nb --clear-groups env SOFTRDMA_SOCKET=$sock \
			SOFTRDMA_NO_SPAWN=1 "$SR" run -q -- cat /proc/self/uid_map)
		check "uid $nb: mapped to itself" grep -Eq "^ *$nb +$nb +1$" <<<"$m"
		kill $nbd
		wait $nbd 2>/dev/null
	fi
fi
rm -f "$err"
echo "$passes passed, $fails failed"
[ $fails = 0 ]
