# What a user checks of a client/server pair of Debian's RDMA programs
# (sourced by tests/interop/pair.sh and tests/twohost/pair.sh).
#
#   pair_check KIND PROGRAM LOGDIR CLIENT_RC SERVER_RC
#     both sides exited 0; KIND pingpong: both printed the "bytes in ...
#     seconds" and "iters in" lines; KIND perftest: the client (and a bw
#     server) printed the result table; KIND xsrq (ibv_xsrq_pingpong):
#     both printed "success" and each side's SRQ number is the one the
#     other printed as remote.  Prints each failure; returns 0
#     when all hold.
pair_check() {
	local kind=$1 prog=$2 log=$3 crc=$4 src=$5 ok=0 side
	[ "$crc" = 0 ] || { echo "FAIL: client exited $crc"; ok=1; }
	[ "$src" = 0 ] || { echo "FAIL: server exited $src"; ok=1; }
	for side in client server; do
		case $kind in
		pingpong)
			grep -Eq '^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec' "$log/$side" &&
				grep -Eq '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$log/$side" ||
				{ echo "FAIL: $side printed no bandwidth lines"; ok=1; }
			;;
		perftest)
			# the client always prints the table; bw servers print it too
			if [ $side = client ] || [[ $prog == *_bw ]]; then
				grep -q '#bytes' "$log/$side" &&
					grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$log/$side" ||
					{ echo "FAIL: $side printed no result table"; ok=1; }
			fi
			;;
		xsrq)
			grep -q '^success$' "$log/$side" ||
				{ echo "FAIL: $side printed no success"; ok=1; }
			;;
		esac
	done
	if [ "$kind" = xsrq ]; then
		local cl sr
		cl=$(sed -n 's/^ *local:.*SRQN \([0-9a-f]*\),.*/\1/p' "$log/client")
		sr=$(sed -n 's/^ *remote:.*SRQN \([0-9a-f]*\),.*/\1/p' "$log/server")
		[ -n "$cl" ] && [ "$cl" = "$sr" ] ||
			{ echo "FAIL: client SRQN '$cl' is not the server's remote '$sr'"; ok=1; }
	fi
	return $ok
}
