/*
 * `softrdma run`'s device nodes: the device where the ecosystem looks for
 * it.  Some programs look past libibverbs: UCX opens only devices whose
 * /dev/infiniband/<dev_name> is a character device it may read and write,
 * and pyverbs' tests, UCX and others read /sys/class/infiniband/<dev>/...
 * This gives the program about to be exec'd (and its children) both, in a
 * private mount namespace (as root) or a private user + mount namespace
 * (otherwise), so the rest of the system sees nothing:
 *   - /dev becomes a tmpfs holding a bind mount of every entry of the real
 *     /dev (symlinks recreated), plus infiniband/<dev_name>, a bind mount of
 *     /dev/null (a harmless character device anyone may open read/write);
 *   - /sys/class becomes a read-only tmpfs holding a bind mount of every
 *     class of the real one, plus infiniband/<dev> and
 *     infiniband_verbs/<dev_name>, written from what our own libibverbs
 *     answers for the device (ibv_query_device/port/gid/pkey,
 *     ibv_query_gid_ex), in the formats of the kernel's
 *     drivers/infiniband/core/sysfs.c.
 * The daemon is found through an abstract socket, which belongs to the
 * network namespace, so the namespaces made here do not hide it; the user
 * namespace maps our uid and gid to themselves, so the daemon still sees
 * our real uid (SO_PEERCRED) and we see its.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "cli/devns.h"

#define MAX_GIDS 256

/* What the tree shows, read from the device before the namespaces exist. */
struct dev_view {
	char name[IBV_SYSFS_NAME_MAX];
	char dev_name[IBV_SYSFS_NAME_MAX];
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr[2]; /* [1]: port 1, softrdma's only port */
	enum ibv_node_type node_type;
	int ngids;
	union ibv_gid gids[MAX_GIDS];
	bool gid_valid[MAX_GIDS];
	enum ibv_gid_type gid_type[MAX_GIDS];
	char gid_ndev[MAX_GIDS][IF_NAMESIZE];
	int npkeys;
	uint16_t pkeys[64];
};

static int query_view(struct dev_view *v, char *why, size_t whylen)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	int n = 0;

	memset(v, 0, sizeof(*v));
	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		snprintf(why, whylen, "no softrdma device (%s)",
			 list ? "empty list" : strerror(errno));
		if (list)
			ibv_free_device_list(list);
		return -1;
	}
	snprintf(v->name, sizeof(v->name), "%s", list[0]->name);
	snprintf(v->dev_name, sizeof(v->dev_name), "%s", list[0]->dev_name);
	v->node_type = list[0]->node_type;
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx) {
		snprintf(why, whylen, "cannot open %s: %s", v->name, strerror(errno));
		return -1;
	}
	if (ibv_query_device(ctx, &v->dattr)) {
		snprintf(why, whylen, "ibv_query_device: %s", strerror(errno));
		goto fail;
	}
	if (ibv_query_port(ctx, 1, &v->pattr[1])) {
		snprintf(why, whylen, "ibv_query_port: %s", strerror(errno));
		goto fail;
	}
	v->ngids = v->pattr[1].gid_tbl_len < MAX_GIDS ? v->pattr[1].gid_tbl_len : MAX_GIDS;
	for (int i = 0; i < v->ngids; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid(ctx, 1, i, &v->gids[i])) {
			snprintf(why, whylen, "ibv_query_gid %d: %s", i, strerror(errno));
			goto fail;
		}
		/* an empty slot: ENODATA; the kernel shows it as a zero GID
		 * with unreadable gid_attrs */
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		v->gid_valid[i] = true;
		v->gid_type[i] = e.gid_type;
		if (e.ndev_ifindex && !if_indextoname(e.ndev_ifindex, v->gid_ndev[i]))
			v->gid_ndev[i][0] = 0;
	}
	v->npkeys = v->pattr[1].pkey_tbl_len < 64 ? v->pattr[1].pkey_tbl_len : 64;
	for (int i = 0; i < v->npkeys; i++) {
		__be16 pk;

		if (ibv_query_pkey(ctx, 1, i, &pk)) {
			snprintf(why, whylen, "ibv_query_pkey %d: %s", i, strerror(errno));
			goto fail;
		}
		v->pkeys[i] = be16toh(pk);
	}
	ibv_close_device(ctx);
	return 0;
fail:
	ibv_close_device(ctx);
	return -1;
}

/* ------------------------------------------------------------------ */
/* writing the tree                                                   */
/* ------------------------------------------------------------------ */

static int wfile(const char *dir, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int wfile(const char *dir, const char *name, const char *fmt, ...)
{
	char path[512], buf[512];
	va_list ap;
	int fd, n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -1;
	if (write(fd, buf, n) != n) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static int mkdirf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int mkdirf(const char *fmt, ...)
{
	char path[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return mkdir(path, 0755) && errno != EEXIST ? -1 : 0;
}

static void guid_str(char *buf, size_t len, __be64 guid_be)
{
	uint64_t g = be64toh(guid_be);

	snprintf(buf, len, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

/* %pI6: eight groups of four hex digits */
static void gid_str(char *buf, size_t len, const union ibv_gid *g)
{
	snprintf(buf, len,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 g->raw[0], g->raw[1], g->raw[2], g->raw[3], g->raw[4], g->raw[5], g->raw[6],
		 g->raw[7], g->raw[8], g->raw[9], g->raw[10], g->raw[11], g->raw[12], g->raw[13],
		 g->raw[14], g->raw[15]);
}

static const char *node_type_name(enum ibv_node_type t)
{
	switch (t) {
	case IBV_NODE_CA:
		return "CA";
	case IBV_NODE_SWITCH:
		return "switch";
	case IBV_NODE_ROUTER:
		return "router";
	case IBV_NODE_RNIC:
		return "RNIC";
	case IBV_NODE_USNIC:
		return "usNIC";
	case IBV_NODE_USNIC_UDP:
		return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED:
		return "unspecified";
	default:
		return "<unknown>";
	}
}

static const char *port_state_name(enum ibv_port_state s)
{
	static const char *const n[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};

	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "UNKNOWN";
}

static const char *phys_state_name(uint8_t s)
{
	static const char *const n[] = {"<unknown>",
					"Sleep",
					"Polling",
					"Disabled",
					"PortConfigurationTraining",
					"LinkUp",
					"LinkErrorRecovery",
					"Phy Test"};

	return s < sizeof(n) / sizeof(n[0]) ? n[s] : "<unknown>";
}

static int width_int(uint8_t w)
{
	switch (w) {
	case 1:
		return 1;
	case 2:
		return 4;
	case 4:
		return 8;
	case 8:
		return 12;
	case 16:
		return 2;
	default:
		return -1;
	}
}

/* the kernel's rate_show(): "<rate> Gb/sec (<width>X <speed>)" */
static void rate_str(char *buf, size_t len, const struct ibv_port_attr *p)
{
	const char *speed;
	int rate; /* deci-Gb/s per lane */

	switch (p->active_speed) {
	case 2:
		speed = " DDR", rate = 50;
		break;
	case 4:
		speed = " QDR", rate = 100;
		break;
	case 8:
		speed = " FDR10", rate = 100;
		break;
	case 16:
		speed = " FDR", rate = 140;
		break;
	case 32:
		speed = " EDR", rate = 250;
		break;
	case 64:
		speed = " HDR", rate = 500;
		break;
	case 128:
		speed = " NDR", rate = 1000;
		break;
	default:
		speed = " SDR", rate = 25;
		break;
	}
	rate *= width_int(p->active_width);
	snprintf(buf, len, "%d%s Gb/sec (%dX%s)", rate / 10, rate % 10 ? ".5" : "",
		 width_int(p->active_width), speed);
}

static int write_port(const char *devdir, const struct dev_view *v, int port)
{
	const struct ibv_port_attr *p = &v->pattr[port];
	char dir[384], sub[448], buf[64];

	snprintf(dir, sizeof(dir), "%s/ports/%d", devdir, port);
	if (mkdirf("%s/ports", devdir) || mkdirf("%s", dir) || mkdirf("%s/gids", dir) ||
	    mkdirf("%s/pkeys", dir) || mkdirf("%s/gid_attrs", dir) ||
	    mkdirf("%s/gid_attrs/types", dir) || mkdirf("%s/gid_attrs/ndevs", dir))
		return -1;
	rate_str(buf, sizeof(buf), p);
	if (wfile(dir, "state", "%d: %s\n", p->state, port_state_name(p->state)) ||
	    wfile(dir, "phys_state", "%u: %s\n", p->phys_state, phys_state_name(p->phys_state)) ||
	    wfile(dir, "rate", "%s\n", buf) ||
	    wfile(dir, "link_layer", "%s\n",
		  p->link_layer == IBV_LINK_LAYER_ETHERNET     ? "Ethernet"
		  : p->link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
							       : "Unknown") ||
	    wfile(dir, "lid", "0x%x\n", p->lid) || wfile(dir, "lid_mask_count", "%u\n", p->lmc) ||
	    wfile(dir, "sm_lid", "0x%x\n", p->sm_lid) || wfile(dir, "sm_sl", "%u\n", p->sm_sl) ||
	    wfile(dir, "cap_mask", "0x%08x\n", p->port_cap_flags))
		return -1;
	for (int i = 0; i < v->ngids; i++) {
		char name[16], g[48];

		snprintf(name, sizeof(name), "%d", i);
		gid_str(g, sizeof(g), &v->gids[i]);
		snprintf(sub, sizeof(sub), "%s/gids", dir);
		if (wfile(sub, name, "%s\n", g))
			return -1;
		/* empty slots: the kernel fails the read (EINVAL); we leave the
		 * file out, so a reader gets ENOENT */
		if (!v->gid_valid[i])
			continue;
		snprintf(sub, sizeof(sub), "%s/gid_attrs/types", dir);
		if (wfile(sub, name, "%s\n",
			  v->gid_type[i] == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1"))
			return -1;
		snprintf(sub, sizeof(sub), "%s/gid_attrs/ndevs", dir);
		if (v->gid_ndev[i][0] && wfile(sub, name, "%s\n", v->gid_ndev[i]))
			return -1;
	}
	snprintf(sub, sizeof(sub), "%s/pkeys", dir);
	for (int i = 0; i < v->npkeys; i++) {
		char name[16];

		snprintf(name, sizeof(name), "%d", i);
		if (wfile(sub, name, "0x%04x\n", v->pkeys[i]))
			return -1;
	}
	return 0;
}

static int write_class_tree(const char *classdir, const struct dev_view *v, dev_t node_rdev)
{
	char dir[320], sub[384], buf[64];

	if (mkdirf("%s/infiniband", classdir) || mkdirf("%s/infiniband/%s", classdir, v->name))
		return -1;
	snprintf(dir, sizeof(dir), "%s/infiniband/%s", classdir, v->name);
	guid_str(buf, sizeof(buf), v->dattr.node_guid);
	if (wfile(dir, "node_guid", "%s\n", buf))
		return -1;
	guid_str(buf, sizeof(buf), v->dattr.sys_image_guid);
	if (wfile(dir, "sys_image_guid", "%s\n", buf) ||
	    wfile(dir, "node_type", "%d: %s\n", (int)v->node_type, node_type_name(v->node_type)) ||
	    wfile(dir, "fw_ver", "%s\n", v->dattr.fw_ver))
		return -1;
	/* what ibstat prints as "CA type" and "Hardware version", made as
	 * mlx5 makes them from the same numbers ibv_query_device reports:
	 * a vendor prefix and the part id in decimal, the revision in hex */
	if (wfile(dir, "hca_type", "SR%u\n", v->dattr.vendor_part_id) ||
	    wfile(dir, "hw_rev", "%x\n", v->dattr.hw_ver))
		return -1;
	/* device/: the parent device; softrdma's is virtual (no PCI function,
	 * no NUMA node), and its network devices are those its GIDs come from */
	snprintf(sub, sizeof(sub), "%s/device", dir);
	if (mkdirf("%s", sub) || mkdirf("%s/net", sub) || wfile(sub, "numa_node", "-1\n"))
		return -1;
	for (int i = 0; i < v->ngids; i++) {
		char link[448], target[64];

		if (!v->gid_ndev[i][0])
			continue;
		snprintf(link, sizeof(link), "%s/net/%s", sub, v->gid_ndev[i]);
		snprintf(target, sizeof(target), "/sys/class/net/%s", v->gid_ndev[i]);
		if (symlink(target, link) && errno != EEXIST)
			return -1;
	}
	if (write_port(dir, v, 1))
		return -1;
	/* infiniband_verbs/<dev_name>: the verbs node's attributes */
	if (mkdirf("%s/infiniband_verbs", classdir) ||
	    mkdirf("%s/infiniband_verbs/%s", classdir, v->dev_name))
		return -1;
	snprintf(sub, sizeof(sub), "%s/infiniband_verbs/%s", classdir, v->dev_name);
	if (wfile(sub, "ibdev", "%s\n", v->name) ||
	    wfile(sub, "dev", "%u:%u\n", major(node_rdev), minor(node_rdev)))
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* namespaces and mounts                                              */
/* ------------------------------------------------------------------ */

static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A private mount namespace; a user namespace with it unless we may make
 * one alone.  Returns a description of what was made, NULL on failure. */
static const char *enter_namespaces(char *why, size_t whylen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];

	if (uid == 0 && !unshare(CLONE_NEWNS))
		return "private mount namespace";
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS)) {
		snprintf(why, whylen, "cannot make a user namespace: %s", strerror(errno));
		return NULL;
	}
	/* ourselves, as ourselves: the uid the daemon and the files see */
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_proc("/proc/self/uid_map", map)) {
		snprintf(why, whylen, "uid_map: %s", strerror(errno));
		return NULL;
	}
	if (write_proc("/proc/self/setgroups", "deny") && errno != ENOENT) {
		snprintf(why, whylen, "setgroups: %s", strerror(errno));
		return NULL;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (write_proc("/proc/self/gid_map", map)) {
		snprintf(why, whylen, "gid_map: %s", strerror(errno));
		return NULL;
	}
	return "private user and mount namespace";
}

/*
 * Covers dir with a tmpfs that shows what dir showed (each entry a bind
 * mount of the original, symlinks recreated), except the entries named in
 * skip.  The original stays reachable through /proc/self/fd of a descriptor
 * opened before the tmpfs covers it.
 */
static int shadow_dir(const char *dir, const char *const *skip, char *why, size_t whylen)
{
	struct dirent *de;
	struct stat st;
	char opts[64], path[512], src[512];
	DIR *d;
	int dfd, ret = -1;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st)) {
		snprintf(why, whylen, "%s: %s", dir, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	snprintf(opts, sizeof(opts), "mode=%o", st.st_mode & 07777);
	if (mount("softrdma", dir, "tmpfs", MS_NOSUID, opts)) {
		snprintf(why, whylen, "tmpfs on %s: %s", dir, strerror(errno));
		close(dfd);
		return -1;
	}
	d = fdopendir(dup(dfd));
	if (!d) {
		snprintf(why, whylen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		bool skipped = false;

		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		for (int i = 0; skip && skip[i]; i++)
			skipped |= !strcmp(n, skip[i]);
		if (skipped || fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, n);
		snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", dfd, n);
		if (S_ISLNK(st.st_mode)) {
			char target[512];
			ssize_t len = readlinkat(dfd, n, target, sizeof(target) - 1);

			if (len < 0)
				continue;
			target[len] = 0;
			if (symlink(target, path)) {
				snprintf(why, whylen, "symlink %s: %s", path, strerror(errno));
				goto out_dir;
			}
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (mkdir(path, st.st_mode & 07777)) {
				snprintf(why, whylen, "mkdir %s: %s", path, strerror(errno));
				goto out_dir;
			}
		} else {
			int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

			if (fd < 0) {
				snprintf(why, whylen, "%s: %s", path, strerror(errno));
				goto out_dir;
			}
			close(fd);
		}
		if (mount(src, path, NULL, MS_BIND | MS_REC, NULL)) {
			snprintf(why, whylen, "bind %s/%s: %s", dir, n, strerror(errno));
			goto out_dir;
		}
	}
	ret = 0;
out_dir:
	closedir(d);
out:
	close(dfd);
	if (ret)
		umount2(dir, MNT_DETACH); /* the original view again */
	return ret;
}

/* The tree is already there (a `softrdma run` inside another): its
 * node_guid names our device. */
static bool already_there(const struct dev_view *v)
{
	char path[512], want[32], got[64] = "";
	struct stat st;
	FILE *f;

	snprintf(path, sizeof(path), "/dev/infiniband/%s", v->dev_name);
	if (stat(path, &st) || !S_ISCHR(st.st_mode))
		return false;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/node_guid", v->name);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(got, sizeof(got), f))
		got[0] = 0;
	fclose(f);
	guid_str(want, sizeof(want), v->dattr.node_guid);
	return !strncmp(got, want, strlen(want));
}

int sr_devns_setup(bool quiet)
{
	static const char *const dev_skip[] = {"infiniband", NULL};
	static const char *const class_skip[] = {"infiniband", "infiniband_verbs", NULL};
	struct dev_view *v = calloc(1, sizeof(*v));
	char why[600] = "", node[512];
	const char *what;
	struct stat null_st;
	int fd;

	if (!v)
		return -1;
	if (query_view(v, why, sizeof(why)))
		goto fail;
	if (already_there(v)) {
		free(v);
		return 0;
	}
	if (stat("/dev/null", &null_st) || !S_ISCHR(null_st.st_mode)) {
		snprintf(why, sizeof(why), "/dev/null is not a character device");
		goto fail;
	}
	what = enter_namespaces(why, sizeof(why));
	if (!what)
		goto fail;
	/* nothing we mount may propagate back to the rest of the system */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		snprintf(why, sizeof(why), "making / private: %s", strerror(errno));
		goto fail;
	}
	if (shadow_dir("/dev", dev_skip, why, sizeof(why)))
		goto fail;
	snprintf(node, sizeof(node), "/dev/infiniband/%s", v->dev_name);
	if (mkdir("/dev/infiniband", 0755) ||
	    (fd = open(node, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		snprintf(why, sizeof(why), "%s: %s", node, strerror(errno));
		goto fail_dev;
	}
	close(fd);
	if (mount("/dev/null", node, NULL, MS_BIND, NULL)) {
		snprintf(why, sizeof(why), "bind /dev/null on %s: %s", node, strerror(errno));
		goto fail_dev;
	}
	if (shadow_dir("/sys/class", class_skip, why, sizeof(why)))
		goto fail_dev;
	if (write_class_tree("/sys/class", v, null_st.st_rdev)) {
		snprintf(why, sizeof(why), "writing /sys/class/infiniband/%s: %s", v->name,
			 strerror(errno));
		goto fail_class;
	}
	/* read-only, as sysfs is to its readers */
	if (mount(NULL, "/sys/class", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID, NULL)) {
		snprintf(why, sizeof(why), "read-only /sys/class: %s", strerror(errno));
		goto fail_class;
	}
	if (!quiet)
		fprintf(stderr,
			"softrdma: %s is /dev/infiniband/%s (bound to /dev/null) and "
			"/sys/class/infiniband/%s for this program only (%s)\n",
			v->name, v->dev_name, v->name, what);
	free(v);
	return 0;
fail_class:
	umount2("/sys/class", MNT_DETACH);
fail_dev:
	umount2("/dev", MNT_DETACH);
fail:
	fprintf(stderr,
		"softrdma: no /dev/infiniband or /sys/class/infiniband for this program: %s\n",
		why);
	free(v);
	return -1;
}
