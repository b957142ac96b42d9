# The index of an address's GID in soft0's table (source this file; used by
# tests/lib.sh, tests/lib_netns.sh and bench/).  The table lists the real
# interfaces' addresses first and loopback's last (docs/architecture.md,
# "Device model"), so a script names the GID it means by its address
# instead of by a number.
#
#   gid_from_devinfo ADDR   stdin: `ibv_devinfo -v`; prints the index of the
#                           RoCE v2 GID of ADDR (IPv4 or IPv6 as ibv_devinfo
#                           prints it); fails if there is none
gid_from_devinfo() {
	local a=$1
	case $a in *:*) ;; *) a=::ffff:$a ;; esac
	awk -v want="$a, RoCE v2" '
		{ l = $0; sub(/^[ \t]+/, "", l) }
		l ~ /^GID\[/ {
			sub(/^GID\[ */, "", l); n = l + 0
			sub(/^[0-9]+\]:[ \t]*/, "", l)
			if (l == want) { print n; f = 1; exit }
		}
		END { exit !f }'
}
