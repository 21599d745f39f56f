/* SPDX-License-Identifier: MIT */
/* Internals shared by the numa/ sources; not installed. */
#ifndef NUMA_PVT_H
#define NUMA_PVT_H

#include <stdbool.h>

#include <hwloc.h>

/* Read-only after pc_topo_open*() (and pc_topo_set_sysfs_root()). */
struct pc_topo {
	hwloc_topology_t h;
	bool thissystem;
	char *sysfs_root; /* NULL: sysfs is not consulted */
	char *xml_path;	  /* NULL for the live machine */
};

/* First NUMA node (logical order) covering PU @pu, preferring one in @prefer. */
hwloc_obj_t numa_node_of_pu(hwloc_topology_t h, int pu, hwloc_const_nodeset_t prefer);

/* "the live machine" or "XML file <path>", for messages. */
const char *topo_origin(const struct pc_topo *t);

#endif /* NUMA_PVT_H */
