#!/bin/bash
# ABI export check (ctest: abi_exports).
#
# Compares what softrdma's drop-in libraries export with what Debian 12's
# rdma-core 44 libraries export, as surveyed in tests/interop/abi/*.symbols.txt
# (linker version-script form: one node per version, "} PARENT;" for
# inheritance, default-versioned symbols listed, data objects marked
# "/* OBJECT */", non-default compat versions named in a comment).  For each
# library it checks the SONAME, the version nodes and their parents
# (readelf -V), and the defined dynamic symbols (readelf --dyn-syms -W):
# every listed symbol must be exported as name@@NODE with the right type
# (FUNC or OBJECT), nothing else may be exported, and a non-default name@NODE
# export is allowed only where the survey lists that compat version (missing
# compat versions are only reported: no target program uses them).
#
# Usage: check_exports.sh BUILD_DIR [ABI_DIR]   (libraries in BUILD_DIR/lib)
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
	echo "usage: $0 BUILD_DIR [ABI_DIR]" >&2
	exit 2
fi
libdir=$1/lib
abidir=${2:-$(dirname "$0")/abi}
failed=0
passed=0

# Expected exports from a survey list: "D name@@NODE TYPE" for default
# versions, "C name@NODE" for compat versions, "N NODE PARENT" for nodes.
expected() {
	awk '
	match($0, /^[A-Za-z0-9_.]+ \{/) { node = $1; next }
	/^[ \t]+[A-Za-z_][A-Za-z0-9_]*;/ {
		name = $1; sub(/;.*/, "", name)
		print "D", name "@@" node, ($0 ~ /OBJECT/ ? "OBJECT" : "FUNC")
		next
	}
	/non-default \(compat\) symbols also versioned/ {
		line = $0
		sub(/.*versioned /, "", line)
		ver = line; sub(/:.*/, "", ver)
		sub(/^[^:]*: */, "", line); sub(/ *\*\/.*/, "", line)
		n = split(line, names, /, */)
		for (i = 1; i <= n; i++) print "C", names[i] "@" ver
		next
	}
	/^\}/ {
		parent = $2; sub(/;.*/, "", parent)
		print "N", node, (parent == "" ? "-" : parent)
	}' "$1"
}

# Actual defined dynamic symbols: "name@@NODE TYPE" / "name@NODE TYPE" /
# "name TYPE" (unversioned); version-node marker symbols are skipped.
actual_syms() {
	readelf --dyn-syms -W "$1" | awk '
	$1 ~ /^[0-9]+:$/ && $7 != "UND" && NF >= 8 {
		if ($4 != "FUNC" && $4 != "OBJECT" && $4 != "IFUNC") next
		if ($5 != "GLOBAL" && $5 != "WEAK") next
		if ($7 == "ABS" && $3 == 0) next  # version node definitions
		print $8, ($4 == "IFUNC" ? "FUNC" : $4)
	}'
}

# Actual version definitions: "NODE PARENT" (PARENT "-" when none).
actual_nodes() {
	readelf -V -W "$1" | awk '
	/^Version definition section/ { in_def = 1; next }
	/^Version (needs|symbols) section/ { in_def = 0 }
	!in_def { next }
	/Flags: BASE/ { next }
	/Name: / {
		if (node != "") print node, (parent == "" ? "-" : parent)
		node = $NF; parent = ""; next
	}
	/Parent 1: / { parent = $NF }
	END { if (node != "") print node, (parent == "" ? "-" : parent) }'
}

check_lib() {
	local lib=$1 list=$2 path=$libdir/$1 problems=() exp soname
	local -A want_type=() have_type=() compat=()
	local line kind sym type node parent n_exp=0

	if [ ! -f "$list" ]; then
		echo "FAIL $lib: survey list $list missing"
		failed=$((failed + 1))
		return
	fi
	if [ ! -e "$path" ]; then
		echo "FAIL $lib: $path not built"
		failed=$((failed + 1))
		return
	fi

	soname=$(readelf -d -W "$path" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	[ "$soname" = "$lib" ] || problems+=("SONAME is '$soname', expected '$lib'")

	exp=$(expected "$list")
	# Version nodes and their parents must match exactly.
	local want_nodes have_nodes
	want_nodes=$(awk '$1 == "N" { print $2, $3 }' <<<"$exp" | sort)
	have_nodes=$(actual_nodes "$path" | sort)
	while read -r line; do
		[ -n "$line" ] && problems+=("version node missing or with wrong parent: $line")
	done < <(comm -23 <(echo "$want_nodes") <(echo "$have_nodes"))
	while read -r line; do
		[ -n "$line" ] && problems+=("unexpected version node: $line")
	done < <(comm -13 <(echo "$want_nodes") <(echo "$have_nodes"))

	while read -r kind sym type; do
		case "$kind" in
		D) want_type[$sym]=$type; n_exp=$((n_exp + 1)) ;;
		C) compat[$sym]=1 ;;
		esac
	done <<<"$exp"
	while read -r sym type; do
		[ -n "$sym" ] && have_type[$sym]=$type
	done < <(actual_syms "$path")

	for sym in "${!want_type[@]}"; do
		if [ -z "${have_type[$sym]:-}" ]; then
			problems+=("missing $sym")
		elif [ "${have_type[$sym]}" != "${want_type[$sym]}" ]; then
			problems+=("$sym is ${have_type[$sym]}, expected ${want_type[$sym]}")
		fi
	done
	local n_compat=0 missing_compat=()
	for sym in "${!have_type[@]}"; do
		[ -n "${want_type[$sym]:-}" ] && continue
		if [ -n "${compat[$sym]:-}" ]; then
			n_compat=$((n_compat + 1))
			continue
		fi
		problems+=("unexpected export $sym (${have_type[$sym]})")
	done
	for sym in "${!compat[@]}"; do
		[ -n "${have_type[$sym]:-}" ] || missing_compat+=("$sym")
	done

	if [ ${#problems[@]} -eq 0 ]; then
		echo "PASS $lib: $n_exp default exports, $n_compat compat, nodes match" \
			"(${#missing_compat[@]} optional compat versions not provided)"
		passed=$((passed + 1))
	else
		echo "FAIL $lib: ${#problems[@]} problem(s)"
		printf '     %s\n' "${problems[@]}" | sort
		failed=$((failed + 1))
	fi
}

for lib in libibverbs librdmacm libmlx5 libefa; do
	check_lib "$lib.so.1" "$abidir/$lib.symbols.txt"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
