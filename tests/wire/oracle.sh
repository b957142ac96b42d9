#!/bin/bash
# wire_scapy / wire_tshark: roce_gen writes a pcap of random RoCEv2 packets
# (every RC/UC/UD opcode and CNP, IPv4 and IPv6) through src/wire, and an
# independent tool reads it back (check_wire.py says what is compared).
#   oracle.sh BIN_DIR scapy|tshark [N] [SEED]
# Skipped (77) when the tool is missing; `make test` installs both.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BIN_DIR scapy|tshark [N] [SEED]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd -P)
bin=$1 mode=$2 n=${3:-600} seed=${4:-$RANDOM}
PY=/usr/bin/python3 # Debian's, which has python3-scapy (not a pyenv one)
[ -x $PY ] || PY=python3
if ! $PY -c 'import scapy.contrib.roce' 2>/dev/null; then
	echo "SKIP: python3-scapy is not installed"
	exit 77
fi
if [ "$mode" = tshark ] && ! command -v tshark >/dev/null; then
	echo "SKIP: tshark is not installed"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# roce_gen: $n packets, seed $seed"
"$bin/roce_gen" "$tmp/gen.pcap" "$n" "$seed" >"$tmp/gen.txt" || { echo "FAIL: roce_gen"; exit 1; }
$PY "$here/check_wire.py" "$mode" "$tmp/gen.txt" "$tmp/gen.pcap" || {
	echo "FAIL (reproduce with: $0 $bin $mode $n $seed)"
	exit 1
}
