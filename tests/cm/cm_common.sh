# Sourced by cm_pair.sh and cm_twohost.sh: what both do once the client
# has finished.
#
# cm_reap_server PID: the server's exit status in $src.  With
# CM_SERVER_STAYS=1 (a server that never exits by itself, like cmtime's)
# it must still be running: it is stopped and counts as 0; gone already is
# a failure.
cm_reap_server() {
	if [ "${CM_SERVER_STAYS:-0}" = 1 ]; then
		if kill -0 "$1" 2>/dev/null; then
			kill "$1"
			wait "$1"
			src=0
		else
			wait "$1"
			src=$?
			echo "FAIL: the server was gone before the client finished"
			[ $src = 0 ] && src=1
		fi
	else
		wait "$1"
		src=$?
	fi
}

# cm_order_pre DIR: CM_ORDER_PRE becomes the prefix that runs a program with
# tests/cm/cm_order.c's preload (its path in CM_ORDER) over DIR: the
# client's k-th connect waits for the server's k-th listen.  Without
# CM_ORDER: an empty prefix.
cm_order_pre() {
	CM_ORDER_PRE=()
	[ -n "${CM_ORDER:-}" ] || return 0
	CM_ORDER_PRE=(env "LD_PRELOAD=$CM_ORDER" "SR_TEST_CM_ORDER=$1")
}
