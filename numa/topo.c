// SPDX-License-Identifier: MIT
/*
 * Topology handles and NIC locality (rules pci, netdev, machine).
 */
#include <pollcore/common.h>
#include <pollcore/numa.h>

#include "numa_pvt.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "log_pvt.h"

static struct pc_topo *topo_open(const char *xml)
{
	struct pc_topo *t;
	int err;

	t = calloc(1, sizeof(*t));
	if (!t) {
		err = -ENOMEM;
		goto err_out;
	}
	if (xml) {
		FILE *f = fopen(xml, "r");

		if (!f) {
			err = set_error(-errno, "cannot read topology XML file %s: %s", xml,
					   strerror(errno));
			goto err_free;
		}
		fclose(f);
		t->xml_path = strdup(xml);
		if (!t->xml_path) {
			err = -ENOMEM;
			goto err_free;
		}
	} else {
		t->sysfs_root = strdup("/sys");
		if (!t->sysfs_root) {
			err = -ENOMEM;
			goto err_free;
		}
	}
	if (hwloc_topology_init(&t->h) < 0) {
		err = set_error(-ENOMEM, "hwloc_topology_init failed");
		goto err_free;
	}
	if (xml && hwloc_topology_set_xml(t->h, xml) < 0) {
		err =
		    set_error(-EINVAL, "%s is not an hwloc XML topology this hwloc (%s) accepts",
				 xml, HWLOC_VERSION);
		goto err_destroy;
	}
	/* Without this filter hwloc drops PCI and OpenFabrics objects. */
	hwloc_topology_set_io_types_filter(t->h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (hwloc_topology_load(t->h) < 0) {
		if (xml)
			err = set_error(-EINVAL, "cannot load topology XML file %s: %s", xml,
					   strerror(errno));
		else
			err = set_error(pc_neg_errno(-1),
					   "cannot discover this machine's topology: %s",
					   strerror(errno));
		goto err_destroy;
	}
	t->thissystem = hwloc_topology_is_thissystem(t->h);
	return t;

err_destroy:
	hwloc_topology_destroy(t->h);
err_free:
	free(t->xml_path);
	free(t->sysfs_root);
	free(t);
err_out:
	errno = -err;
	return NULL;
}

struct pc_topo *pc_topo_open(void)
{
	return topo_open(NULL);
}

struct pc_topo *pc_topo_open_xml(const char *path)
{
	if (!path) {
		errno = EINVAL;
		return NULL;
	}
	return topo_open(path);
}

void pc_topo_close(struct pc_topo *t)
{
	if (!t)
		return;
	hwloc_topology_destroy(t->h);
	free(t->sysfs_root);
	free(t->xml_path);
	free(t);
}

hwloc_topology_t pc_topo_hwloc(const struct pc_topo *t)
{
	return t->h;
}

bool pc_topo_is_thissystem(const struct pc_topo *t)
{
	return t->thissystem;
}

const char *topo_origin(const struct pc_topo *t)
{
	static __thread char buf[256];

	if (!t->xml_path)
		return "this machine";
	snprintf(buf, sizeof(buf), "topology file %s", t->xml_path);
	return buf;
}

int pc_topo_set_sysfs_root(struct pc_topo *t, const char *root)
{
	char *copy = NULL;

	if (root || !t->xml_path) {
		copy = strdup(root ? root : "/sys");
		if (!copy)
			return -ENOMEM;
	}
	free(t->sysfs_root);
	t->sysfs_root = copy;
	return 0;
}

static hwloc_obj_t find_osdev(hwloc_topology_t h, const char *name)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_osdev(h, o)))
		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name &&
		    strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

static bool sysfs_has_device(const struct pc_topo *t, const char *name)
{
	char path[512];
	struct stat st;

	if (!t->sysfs_root)
		return false;
	snprintf(path, sizeof(path), "%s/class/infiniband/%s", t->sysfs_root, name);
	return stat(path, &st) == 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strverscmp((const char *)a, (const char *)b);
}

static int add_name(char (*names)[PC_NIC_NAME_MAX], int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return n;
	snprintf(names[n], PC_NIC_NAME_MAX, "%s", name);
	return n + 1;
}

int pc_topo_devices(const struct pc_topo *t, char (*names)[PC_NIC_NAME_MAX], int max)
{
	char(*all)[PC_NIC_NAME_MAX] = NULL;
	hwloc_obj_t o = NULL;
	int n = 0, cap = 0;
	DIR *dir = NULL;
	struct dirent *de;
	char path[512];

	if (t->sysfs_root) {
		snprintf(path, sizeof(path), "%s/class/infiniband", t->sysfs_root);
		dir = opendir(path);
	}
	/* Two passes over the sources: count, then collect. */
	while ((o = hwloc_get_next_osdev(t->h, o)))
		cap++;
	if (dir) {
		while ((de = readdir(dir)))
			cap++;
		rewinddir(dir);
	}
	all = calloc(cap ? cap : 1, sizeof(*all));
	if (!all) {
		if (dir)
			closedir(dir);
		return -ENOMEM;
	}
	while ((o = hwloc_get_next_osdev(t->h, o)))
		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name &&
		    strlen(o->name) < PC_NIC_NAME_MAX)
			n = add_name(all, n, o->name);
	if (dir) {
		while ((de = readdir(dir)))
			if (de->d_name[0] != '.' && strlen(de->d_name) < PC_NIC_NAME_MAX)
				n = add_name(all, n, de->d_name);
		closedir(dir);
	}
	qsort(all, n, sizeof(*all), cmp_names);
	if (names)
		memcpy(names, all, sizeof(*all) * PC_MIN(n, max));
	free(all);
	return n;
}

const char *pc_locality_rule_str(enum pc_locality_rule rule)
{
	switch (rule) {
	case PC_LOCALITY_PCI:
		return "pci";
	case PC_LOCALITY_NETDEV:
		return "netdev";
	case PC_LOCALITY_MACHINE:
		return "machine";
	}
	return "?";
}

void pc_nic_locality_free(struct pc_nic_locality *loc)
{
	hwloc_bitmap_free(loc->nodeset);
	hwloc_bitmap_free(loc->cpuset);
	loc->nodeset = NULL;
	loc->cpuset = NULL;
}

/* Rule pci: nearest non-I/O ancestor of a PCI-attached OS device. */
static bool locate_pci(hwloc_topology_t h, hwloc_obj_t osdev, struct pc_nic_locality *loc)
{
	hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h);
	hwloc_const_nodeset_t allowed_nodes = hwloc_topology_get_allowed_nodeset(h);
	struct hwloc_location where;
	hwloc_obj_t anc, *nodes;
	unsigned int nr;
	bool pci = false;

	for (hwloc_obj_t p = osdev->parent; p; p = p->parent)
		pci |= p->type == HWLOC_OBJ_PCI_DEVICE;
	anc = hwloc_get_non_io_ancestor_obj(h, osdev);
	if (!pci || !anc)
		return false;

	nr = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
	nodes = calloc(nr ? nr : 1, sizeof(*nodes));
	if (!nodes)
		return false;
	where.type = HWLOC_LOCATION_TYPE_OBJECT;
	where.location.object = anc;
	/* Nodes inside the ancestor (a Package with sub-NUMA nodes), else around it. */
	if (hwloc_get_local_numanode_objs(h, &where, &nr, nodes,
					  HWLOC_LOCAL_NUMANODE_FLAG_SMALLER_LOCALITY) < 0 ||
	    nr == 0) {
		nr = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
		if (hwloc_get_local_numanode_objs(h, &where, &nr, nodes,
						  HWLOC_LOCAL_NUMANODE_FLAG_LARGER_LOCALITY) < 0)
			nr = 0;
	}
	for (unsigned int i = 0; i < nr; i++)
		hwloc_bitmap_set(loc->nodeset, nodes[i]->os_index);
	free(nodes);
	hwloc_bitmap_and(loc->nodeset, loc->nodeset, allowed_nodes);
	hwloc_bitmap_and(loc->cpuset, anc->cpuset, allowed);
	return !hwloc_bitmap_iszero(loc->cpuset) && !hwloc_bitmap_iszero(loc->nodeset);
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	char *nl;

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f)) {
		int err = ferror(f) ? -EIO : -ENODATA;

		fclose(f);
		return err;
	}
	fclose(f);
	nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	return buf[0] ? 0 : -ENODATA;
}

/* Rule netdev: NUMA node of the device's network interface, from sysfs. */
static bool locate_netdev(const struct pc_topo *t, const char *name, struct pc_nic_locality *loc)
{
	char path[768], ifname[128], num[32], *end;
	hwloc_obj_t node;
	long os;

	if (!t->sysfs_root)
		return false;
	snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/1/gid_attrs/ndevs/0",
		 t->sysfs_root, name);
	if (read_line(path, ifname, sizeof(ifname)) < 0 || strchr(ifname, '/') ||
	    strcmp(ifname, "..") == 0 || strcmp(ifname, ".") == 0)
		return false;
	snprintf(path, sizeof(path), "%s/class/net/%s/device/numa_node", t->sysfs_root, ifname);
	if (read_line(path, num, sizeof(num)) < 0)
		return false;
	errno = 0;
	os = strtol(num, &end, 10);
	if (errno || end == num || os < 0 || os > 1 << 20)
		return false;
	node = hwloc_get_numanode_obj_by_os_index(t->h, (unsigned int)os);
	if (!node || !hwloc_bitmap_isset(hwloc_topology_get_allowed_nodeset(t->h), os)) {
		pc_warn("%s: interface %s reports NUMA node %ld, which %s lacks", name, ifname, os,
			topo_origin(t));
		return false;
	}
	hwloc_bitmap_only(loc->nodeset, os);
	hwloc_bitmap_and(loc->cpuset, node->cpuset, hwloc_topology_get_allowed_cpuset(t->h));
	return !hwloc_bitmap_iszero(loc->cpuset);
}

int pc_topo_nic_locality(const struct pc_topo *t, const char *name, struct pc_nic_locality *loc)
{
	hwloc_obj_t osdev;

	memset(loc, 0, sizeof(*loc));
	if (!name || !name[0] || strlen(name) >= PC_NIC_NAME_MAX)
		return set_error(-EINVAL, "invalid RDMA device name '%s'",
				    name ? name : "(null)");
	osdev = find_osdev(t->h, name);
	if (!osdev && !sysfs_has_device(t, name))
		return set_error(-ENODEV, "RDMA device %s not found in %s", name,
				    topo_origin(t));

	snprintf(loc->name, sizeof(loc->name), "%s", name);
	loc->nodeset = hwloc_bitmap_alloc();
	loc->cpuset = hwloc_bitmap_alloc();
	if (!loc->nodeset || !loc->cpuset) {
		pc_nic_locality_free(loc);
		return -ENOMEM;
	}
	if (osdev && locate_pci(t->h, osdev, loc)) {
		loc->rule = PC_LOCALITY_PCI;
		return 0;
	}
	hwloc_bitmap_zero(loc->nodeset);
	if (locate_netdev(t, name, loc)) {
		loc->rule = PC_LOCALITY_NETDEV;
		return 0;
	}
	loc->rule = PC_LOCALITY_MACHINE;
	hwloc_bitmap_copy(loc->nodeset, hwloc_topology_get_allowed_nodeset(t->h));
	hwloc_bitmap_copy(loc->cpuset, hwloc_topology_get_allowed_cpuset(t->h));
	return 0;
}

hwloc_obj_t numa_node_of_pu(hwloc_topology_t h, int pu, hwloc_const_nodeset_t prefer)
{
	hwloc_obj_t node = NULL, first = NULL;

	while ((node = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_NUMANODE, node))) {
		if (!hwloc_bitmap_isset(node->cpuset, pu))
			continue;
		if (!prefer || hwloc_bitmap_isset(prefer, node->os_index))
			return node;
		if (!first)
			first = node;
	}
	return first;
}
