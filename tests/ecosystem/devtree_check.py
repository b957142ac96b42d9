#!/usr/bin/env python3
# Runs inside `softrdma run`: checks /dev/infiniband/<dev_name> and the
# /sys/class/infiniband/<dev> tree against what `ibv_devinfo -v` (our
# libibverbs, same run) says about the device, that Debian's ibstat reads
# the same CA type, hardware and firmware versions from it, and that the
# rest of /dev and /sys/class is still there.  Prints PASS/FAIL lines;
# exit 1 on a FAIL.
import ipaddress
import os
import re
import stat
import subprocess
import sys

fails = 0


def check(name, cond, detail=""):
    global fails
    if cond:
        print(f"PASS {name}")
    else:
        fails += 1
        print(f"FAIL {name}" + (f": {detail}" if detail else ""))


def read(path):
    with open(path) as f:
        return f.read()


info = subprocess.run(["ibv_devinfo", "-v"], capture_output=True, text=True).stdout
m = re.search(r"^hca_id:\s+(\S+)", info, re.M)
if not m:
    print("FAIL ibv_devinfo -v shows no device\n" + info)
    sys.exit(1)
dev = m.group(1)
base = f"/sys/class/infiniband/{dev}"
port = f"{base}/ports/1"


def field(name):
    m = re.search(rf"^\s+{name}:\s+(.*)$", info, re.M)
    return m.group(1).strip() if m else None


# the character device UCX looks for, and the verbs node's attributes
uv = "/sys/class/infiniband_verbs"
nodes = [n for n in os.listdir(uv) if read(f"{uv}/{n}/ibdev").strip() == dev] if os.path.isdir(uv) else []
check("infiniband_verbs/<node>/ibdev names the device", len(nodes) == 1, str(nodes))
node = f"/dev/infiniband/{nodes[0] if nodes else 'uverbs0'}"
st = os.stat(node) if os.path.exists(node) else None
check(f"{node} is a character device", st is not None and stat.S_ISCHR(st.st_mode))
check(f"{node} may be read and written", os.access(node, os.R_OK | os.W_OK))
try:
    fd = os.open(node, os.O_RDWR)
    os.close(fd)
    check(f"{node} opens read/write", True)
except OSError as e:
    check(f"{node} opens read/write", False, str(e))
if nodes:
    dev_attr = read(f"{uv}/{nodes[0]}/dev").strip()
    check("infiniband_verbs/<node>/dev is the node's major:minor",
          st is not None and dev_attr == f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", dev_attr)

# device attributes
check("node_guid = ibv_devinfo node_guid", read(f"{base}/node_guid").strip() == field("node_guid"),
      read(f"{base}/node_guid").strip())
check("sys_image_guid = ibv_devinfo sys_image_guid",
      read(f"{base}/sys_image_guid").strip() == field("sys_image_guid"))
check("fw_ver = ibv_devinfo fw_ver", read(f"{base}/fw_ver").strip() == field("fw_ver"))


def read_or(path, missing="(absent)"):
    return read(path).strip() if os.path.exists(path) else missing


# hca_type and hw_rev, as mlx5 makes them from the PCI ids: a vendor prefix
# and vendor_part_id in decimal, hw_ver in hex
hca_type, hw_rev = read_or(f"{base}/hca_type"), read_or(f"{base}/hw_rev")
part, hw_ver = field("vendor_part_id"), field("hw_ver")
m = re.fullmatch(r"[A-Z]+(\d+)", hca_type)
check("hca_type ends with ibv_devinfo vendor_part_id", m is not None and m.group(1) == part,
      f"hca_type {hca_type}, vendor_part_id {part}")
check("hw_rev = ibv_devinfo hw_ver", re.fullmatch(r"[0-9a-f]+", hw_rev) is not None and
      hw_ver is not None and int(hw_rev, 16) == int(hw_ver, 16), f"hw_rev {hw_rev}, hw_ver {hw_ver}")
# Debian's ibstat (infiniband-diags) reads them through libibumad
try:
    ibstat = subprocess.run(["ibstat", dev], capture_output=True, text=True)
except FileNotFoundError:
    ibstat = None
    print("SKIP ibstat: not installed (Debian package infiniband-diags; make deps installs it)")
if ibstat is not None:
    def ibstat_field(name):
        m = re.search(rf"^\s*{name}:[ \t]*(.*)$", ibstat.stdout, re.M)
        return m.group(1).strip() if m else None
    check("ibstat runs", ibstat.returncode == 0, ibstat.stderr.strip())
    check("ibstat CA type = hca_type", ibstat_field("CA type") == hca_type and hca_type != "",
          f"CA type {ibstat_field('CA type')!r}")
    check("ibstat Hardware version = hw_rev", ibstat_field("Hardware version") == hw_rev and hw_rev != "",
          f"Hardware version {ibstat_field('Hardware version')!r}")
    check("ibstat Firmware version = ibv_devinfo fw_ver",
          ibstat_field("Firmware version") == field("fw_ver"), ibstat_field("Firmware version"))
check("node_type is a CA (transport InfiniBand)",
      read(f"{base}/node_type").strip() == "1: CA" and field("transport").startswith("InfiniBand"),
      read(f"{base}/node_type").strip())

# port 1
state = re.match(r"PORT_(\w+) \((\d+)\)", field("state"))
check("ports/1/state = ibv_devinfo state",
      state and read(f"{port}/state").strip() == f"{state.group(2)}: {state.group(1)}",
      read(f"{port}/state").strip())
phys = re.match(r"\S+ \((\d+)\)", field("phys_state"))
check("ports/1/phys_state = ibv_devinfo phys_state",
      phys and read(f"{port}/phys_state").strip().startswith(f"{phys.group(1)}: "),
      read(f"{port}/phys_state").strip())
if phys and phys.group(1) == "5":
    check("ports/1/phys_state says LinkUp", read(f"{port}/phys_state").strip() == "5: LinkUp")
check("ports/1/link_layer = ibv_devinfo link_layer",
      read(f"{port}/link_layer").strip() == field("link_layer"))
width = int(re.match(r"(\d+)X", field("active_width")).group(1))
speed = float(re.match(r"([\d.]+) Gbps", field("active_speed")).group(1))
rate = read(f"{port}/rate").strip()
rm = re.match(r"([\d.]+) Gb/sec \((\d+)X \w+\)", rate)
check("ports/1/rate = active_width x active_speed",
      rm and abs(float(rm.group(1)) - width * speed) < 0.6 and int(rm.group(2)) == width, rate)
check("ports/1/cap_mask = ibv_devinfo port_cap_flags",
      int(read(f"{port}/cap_mask"), 16) == int(field("port_cap_flags"), 16))
check("ports/1/lid = ibv_devinfo port_lid", int(read(f"{port}/lid"), 16) == int(field("port_lid")))
check("ports/1/sm_lid = ibv_devinfo sm_lid", int(read(f"{port}/sm_lid"), 16) == int(field("sm_lid")))
check("ports/1/lid_mask_count = ibv_devinfo port_lmc",
      int(read(f"{port}/lid_mask_count")) == int(field("port_lmc"), 16))

# GID table: every entry, its type and its network device
tbl = int(field("gid_tbl_len"))
check("ports/1/gids has gid_tbl_len entries", len(os.listdir(f"{port}/gids")) == tbl)
gids = {int(i): (g, t) for i, g, t in re.findall(r"GID\[\s*(\d+)\]:\s+(\S+), (RoCE v2|RoCE v1|IB/RoCE v1)", info)}
check("ibv_devinfo shows GIDs", len(gids) > 0)
addr_dev = {}
for line in subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    a = ipaddress.ip_address(f[3].split("/")[0])
    addr_dev[ipaddress.IPv6Address(f"::ffff:{a}") if a.version == 4 else a] = f[1].split("@")[0]
ndevs = set()
for i in range(tbl):
    raw = read(f"{port}/gids/{i}").strip()
    ok = re.fullmatch(r"([0-9a-f]{4}:){7}[0-9a-f]{4}", raw) is not None
    g = ipaddress.IPv6Address(raw) if ok else None
    tpath, npath = f"{port}/gid_attrs/types/{i}", f"{port}/gid_attrs/ndevs/{i}"
    if i in gids:
        want = ipaddress.IPv6Address(gids[i][0]) if ":" in gids[i][0] else None
        check(f"gids/{i} = GID[{i}] {gids[i][0]}", ok and g == want, raw)
        check(f"gid_attrs/types/{i} = {gids[i][1]}",
              os.path.exists(tpath) and read(tpath).strip() == gids[i][1])
        if g in addr_dev:
            check(f"gid_attrs/ndevs/{i} = {addr_dev[g]} (the interface with that address)",
                  os.path.exists(npath) and read(npath).strip() == addr_dev[g])
            ndevs.add(addr_dev[g])
        else:
            check(f"gid_attrs/ndevs/{i} absent (no interface has {g})", not os.path.exists(npath))
    else:
        check(f"gids/{i} (empty slot) is zero", ok and int(g) == 0, raw)
        check(f"gid_attrs/types/{i} (empty slot) absent", not os.path.exists(tpath))

pk = int(field("pkey_tbl_len"))
check("ports/1/pkeys has pkey_tbl_len entries", len(os.listdir(f"{port}/pkeys")) == pk)
check("ports/1/pkeys/0 is the default P_Key", read(f"{port}/pkeys/0").strip() == "0xffff")

# device/net: the network devices of the GIDs, as pyverbs' tests look them up
net = f"{base}/device/net"
check("device/net lists the GIDs' network devices",
      os.path.isdir(net) and set(os.listdir(net)) == ndevs, f"{sorted(os.listdir(net)) if os.path.isdir(net) else None} vs {sorted(ndevs)}")
for n in ndevs:
    check(f"device/net/{n} leads to the interface", os.path.exists(f"{net}/{n}/ifindex"))

# the rest of the system as it was
# (the lists of /dev and /sys/class outside, from the caller)
for var, d in (("SR_OUTSIDE_DEV", "/dev"), ("SR_OUTSIDE_CLASS", "/sys/class")):
    outside = set(os.environ.get(var, "").split()) - {"infiniband", "infiniband_verbs"}
    inside = set(os.listdir(d))
    check(f"every entry of the real {d} is still there", outside and outside <= inside,
          str(sorted(outside - inside)))
check("/dev/null is still the null device", os.major(os.stat("/dev/null").st_rdev) == 1)
check("/sys/class/net still shows this host's interfaces", os.path.isdir("/sys/class/net/lo"))
try:
    open(f"{base}/node_guid", "w").close()
    check("the tree is read-only", False)
except OSError:
    check("the tree is read-only", True)
print(f"inside: {fails} failed")
sys.exit(1 if fails else 0)
