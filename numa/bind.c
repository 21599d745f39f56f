// SPDX-License-Identifier: MIT
/*
 * Applying a plan: thread binding and NUMA-local memory, each checked.
 */
#include <pollcore/common.h>
#include <pollcore/numa.h>

#include "numa_pvt.h"

#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"

static int require_thissystem(const struct pc_topo *t, const char *what)
{
	if (!t->thissystem)
		return set_error(-EOPNOTSUPP, "%s: %s is not this machine; refusing", what,
				    topo_origin(t));
	return 0;
}

int pc_numa_where(const struct pc_topo *t, struct pc_numa_where *out)
{
	hwloc_bitmap_t set;
	hwloc_obj_t node;
	int err;

	err = require_thissystem(t, "pc_numa_where");
	if (err)
		return err;
	set = hwloc_bitmap_alloc();
	if (!set)
		return -ENOMEM;
	if (hwloc_get_last_cpu_location(t->h, set, HWLOC_CPUBIND_THREAD) < 0) {
		err = set_error(pc_neg_errno(-1), "cannot read the thread's CPU location: %s",
				   strerror(errno));
		goto out;
	}
	out->pu = hwloc_bitmap_first(set);
	node = out->pu >= 0 ? numa_node_of_pu(t->h, out->pu, NULL) : NULL;
	out->numa_node = node ? (int)node->os_index : -1;
out:
	hwloc_bitmap_free(set);
	return err;
}

int pc_numa_bind_thread(const struct pc_topo *t, const struct pc_plan_entry *e)
{
	struct pc_numa_where where;
	hwloc_obj_t pu;
	int err;

	err = require_thissystem(t, "pc_numa_bind_thread");
	if (err)
		return err;
	pu = e->pu >= 0 ? hwloc_get_pu_obj_by_os_index(t->h, (unsigned int)e->pu) : NULL;
	if (!pu)
		return set_error(-EINVAL, "cannot bind worker %u: PU %d is not on this machine",
				    e->worker, e->pu);
	if (hwloc_set_cpubind(t->h, pu->cpuset, HWLOC_CPUBIND_THREAD) < 0)
		return set_error(pc_neg_errno(-1), "cannot bind worker %u (%s) to PU %d: %s",
				    e->worker, e->device_name, e->pu, strerror(errno));
	/* The kernel migrates the thread before sched_setaffinity() returns. */
	err = pc_numa_where(t, &where);
	if (err)
		return err;
	if (where.pu != e->pu)
		return set_error(-EIO, "worker %u (%s) bound to PU %d but runs on PU %d",
				    e->worker, e->device_name, e->pu, where.pu);
	pc_debug("worker %u (%s) on PU %d, NUMA node %d", e->worker, e->device_name, where.pu,
		 where.numa_node);
	return 0;
}

int pc_numa_unbind_thread(const struct pc_topo *t)
{
	hwloc_const_cpuset_t all;
	int err;

	err = require_thissystem(t, "pc_numa_unbind_thread");
	if (err)
		return err;
	/* every PU the process may run on (its cpuset), as before a binding */
	all = hwloc_topology_get_allowed_cpuset(t->h);
	if (hwloc_set_cpubind(t->h, all, HWLOC_CPUBIND_THREAD) < 0)
		return set_error(pc_neg_errno(-1), "cannot let the thread run on every allowed PU: %s",
				 strerror(errno));
	return 0;
}

void *pc_numa_alloc(const struct pc_topo *t, size_t size, int numa_node)
{
	static bool warned;
	hwloc_bitmap_t ns = NULL;
	void *p = NULL;

	if (size == 0) {
		set_error(-EINVAL, "pc_numa_alloc: size 0");
		errno = EINVAL;
		return NULL;
	}
	if (numa_node >= 0) {
		if (!hwloc_get_numanode_obj_by_os_index(t->h, (unsigned int)numa_node)) {
			set_error(-EINVAL, "pc_numa_alloc: NUMA node %d is not in %s", numa_node,
				     topo_origin(t));
			errno = EINVAL;
			return NULL;
		}
		ns = hwloc_bitmap_alloc();
		if (!ns) {
			errno = ENOMEM;
			return NULL;
		}
		hwloc_bitmap_only(ns, (unsigned int)numa_node);
		p = hwloc_alloc_membind(t->h, size, ns, HWLOC_MEMBIND_BIND,
					HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
		hwloc_bitmap_free(ns);
		if (!p && !__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
			pc_info("NUMA-bound allocation on node %d refused (%s); using plain pages",
				numa_node, strerror(errno));
	}
	if (!p)
		p = hwloc_alloc(t->h, size);
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	/* Touch every page now so that it is placed now, on the bound node. */
	memset(p, 0, size);
	return p;
}

void pc_numa_free(const struct pc_topo *t, void *p, size_t size)
{
	if (p)
		hwloc_free(t->h, p, size);
}

int pc_numa_mem_node(const struct pc_topo *t, const void *p, size_t size)
{
	hwloc_bitmap_t ns;
	int err;

	err = require_thissystem(t, "pc_numa_mem_node");
	if (err)
		return err;
	ns = hwloc_bitmap_alloc();
	if (!ns)
		return -ENOMEM;
	if (hwloc_get_area_memlocation(t->h, p, size, ns, HWLOC_MEMBIND_BYNODESET) < 0)
		err = set_error(pc_neg_errno(-1), "cannot query where %zu bytes at %p are: %s",
				   size, p, strerror(errno));
	else if (hwloc_bitmap_weight(ns) == 1)
		err = hwloc_bitmap_first(ns);
	else if (hwloc_bitmap_iszero(ns))
		err = set_error(-ENODATA, "%zu bytes at %p have no page in memory", size, p);
	else
		err = set_error(-EXDEV, "%zu bytes at %p span several NUMA nodes", size, p);
	hwloc_bitmap_free(ns);
	return err;
}
