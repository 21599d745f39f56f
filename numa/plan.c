// SPDX-License-Identifier: MIT
/*
 * The placement planner: a pure function of (topology, devices, workers per
 * device, policy). Everything is walked in hwloc logical order, so the same
 * inputs always give the same plan.
 */
#include <pollcore/common.h>
#include <pollcore/numa.h>

#include "numa_pvt.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "abi_pvt.h"
#include "log_pvt.h"

struct core {
	hwloc_obj_t obj; /* Core, or PU on topologies without cores */
	int pus[16];	 /* its allowed PUs (os indexes), ascending */
	int nr_pus;
	int nr_used;	  /* workers on it (PUs taken in order) */
	hwloc_obj_t node; /* NUMA node of its first PU */
};

struct planner {
	const struct pc_topo *t;
	struct core *cores;
	int nr_cores;
	struct pc_nic_locality *locs;
	unsigned int nr_devices;
	struct hwloc_distances_s *dist; /* NUMA latency matrix, or NULL */
};

const char *pc_plan_reason_str(enum pc_plan_reason reason)
{
	switch (reason) {
	case PC_PLAN_LOCAL:
		return "local";
	case PC_PLAN_SPILL_FULL:
		return "local cores all taken: nearest other NUMA node";
	case PC_PLAN_SMT_SIBLING:
		return "all cores taken: SMT sibling";
	case PC_PLAN_EXPLICIT:
		return "given by the caller";
	}
	return "?";
}

void pc_plan_destroy(struct pc_plan *plan)
{
	free(plan);
}

/* The first allowed core of the machine, as a cpuset. */
static hwloc_bitmap_t default_housekeeping(hwloc_topology_t h)
{
	int first = hwloc_bitmap_first(hwloc_topology_get_allowed_cpuset(h));
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	hwloc_obj_t pu, core;

	if (!set || first < 0)
		return set;
	pu = hwloc_get_pu_obj_by_os_index(h, first);
	core = pu ? hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_CORE, pu) : NULL;
	if (core)
		hwloc_bitmap_copy(set, core->cpuset);
	else
		hwloc_bitmap_only(set, first);
	return set;
}

static int collect_cores(struct planner *p, const struct pc_plan_policy *pol)
{
	hwloc_topology_t h = p->t->h;
	hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h);
	hwloc_obj_type_t type =
	    hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE) ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
	hwloc_bitmap_t hk = NULL;
	hwloc_obj_t o = NULL;
	int n = hwloc_get_nbobjs_by_type(h, type);

	if (!(pol->flags & PC_PLAN_NO_HOUSEKEEPING)) {
		hk = pol->housekeeping ? hwloc_bitmap_dup(pol->housekeeping)
				       : default_housekeeping(h);
		if (!hk)
			return -ENOMEM;
	}
	p->cores = calloc(n ? n : 1, sizeof(*p->cores));
	if (!p->cores) {
		hwloc_bitmap_free(hk);
		return -ENOMEM;
	}
	while ((o = hwloc_get_next_obj_by_type(h, type, o))) {
		struct core *c = &p->cores[p->nr_cores];
		int pu;

		if (hk && hwloc_bitmap_intersects(hk, o->cpuset))
			continue;
		hwloc_bitmap_foreach_begin(pu, o->cpuset)
		{
			if (hwloc_bitmap_isset(allowed, pu) &&
			    c->nr_pus < (int)PC_ARRAY_SIZE(c->pus))
				c->pus[c->nr_pus++] = pu;
		}
		hwloc_bitmap_foreach_end();
		if (!c->nr_pus)
			continue;
		c->obj = o;
		c->node = numa_node_of_pu(h, c->pus[0], NULL);
		p->nr_cores++;
	}
	hwloc_bitmap_free(hk);
	return 0;
}

/* Distance from device @d to NUMA node @node: smaller is nearer. */
static uint64_t distance(const struct planner *p, unsigned int d, hwloc_obj_t node)
{
	hwloc_const_nodeset_t ns = p->locs[d].nodeset;
	uint64_t best = UINT64_MAX;
	unsigned int os;

	if (!node)
		return UINT64_MAX;
	hwloc_bitmap_foreach_begin(os, ns)
	{
		hwloc_obj_t from = hwloc_get_numanode_obj_by_os_index(p->t->h, os);
		hwloc_uint64_t to_node, back;
		uint64_t v;

		if (!from)
			continue;
		if (p->dist &&
		    hwloc_distances_obj_pair_values(p->dist, from, node, &to_node, &back) == 0) {
			v = to_node;
		} else {
			/* No matrix: the deeper the common ancestor, the nearer. */
			hwloc_obj_t anc = hwloc_get_common_ancestor_obj(p->t->h, from, node);

			v = (uint64_t)INT_MAX - (uint64_t)(anc ? anc->depth : 0);
		}
		best = PC_MIN(best, v);
	}
	hwloc_bitmap_foreach_end();
	return best;
}

static bool is_local(const struct planner *p, unsigned int d, const struct core *c, int pu_idx)
{
	return hwloc_bitmap_isset(p->locs[d].cpuset, c->pus[pu_idx]);
}

/*
 * Next core for device @d: a core with fewer than @per_core workers, local
 * to @d when @local, else the nearest to @d. Ties go to the lowest logical
 * index. Returns its index, or -1.
 */
static int pick(const struct planner *p, unsigned int d, int per_core, bool local)
{
	uint64_t best_dist = UINT64_MAX;
	int best = -1;

	for (int i = 0; i < p->nr_cores; i++) {
		const struct core *c = &p->cores[i];
		uint64_t dist;

		if (c->nr_used >= per_core || c->nr_used >= c->nr_pus)
			continue;
		if (local) {
			if (is_local(p, d, c, c->nr_used))
				return i;
			continue;
		}
		dist = distance(p, d, c->node);
		if (best < 0 || dist < best_dist) {
			best = i;
			best_dist = dist;
		}
	}
	return best;
}

/* Fills @e: worker of device @d on @pu, whose core (or PU, without cores) is @obj. */
static void entry_fill(const struct planner *p, struct pc_plan_entry *e, unsigned int d, int pu,
		       hwloc_obj_t obj, enum pc_plan_reason reason)
{
	hwloc_obj_t node = numa_node_of_pu(p->t->h, pu, p->locs[d].nodeset);

	e->device = d;
	snprintf(e->device_name, sizeof(e->device_name), "%s", p->locs[d].name);
	e->pu = pu;
	e->core = obj->type == HWLOC_OBJ_CORE ? (int)obj->os_index : -1;
	e->core_logical = (int)obj->logical_index;
	e->numa_node = node ? (int)node->os_index : -1;
	e->local = hwloc_bitmap_isset(p->locs[d].cpuset, pu);
	e->reason = e->local && reason == PC_PLAN_SPILL_FULL ? PC_PLAN_LOCAL : reason;
}

static void place(struct planner *p, struct pc_plan_entry *e, unsigned int d, int ci,
		  enum pc_plan_reason reason)
{
	struct core *c = &p->cores[ci];

	entry_fill(p, e, d, c->pus[c->nr_used++], c->obj, reason);
}

/*
 * Places the workers of the devices given explicit PUs, and takes their
 * cores away from the planner. Marks those devices as placed.
 */
static int place_explicit(struct planner *p, struct pc_plan *plan, unsigned int *placed,
			  unsigned int w, const struct pc_plan_policy *pol)
{
	hwloc_topology_t h = p->t->h;
	hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h);
	hwloc_obj_type_t type =
	    hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE) ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;

	for (unsigned int d = 0; pol->device_cpus && d < p->nr_devices; d++) {
		hwloc_const_cpuset_t set = pol->device_cpus[d];
		int weight, pu;

		if (!set)
			continue;
		weight = hwloc_bitmap_weight(set);
		if (weight < (int)w)
			return set_error(-EINVAL, "%s: %d PUs given for %u workers",
					    p->locs[d].name, weight, w);
		pu = hwloc_bitmap_first(set);
		for (unsigned int k = 0; k < w; k++, pu = hwloc_bitmap_next(set, pu)) {
			hwloc_obj_t obj = hwloc_get_pu_obj_by_os_index(h, (unsigned int)pu);

			if (!obj || !hwloc_bitmap_isset(allowed, pu))
				return set_error(-EINVAL, "%s: PU %d is not an allowed PU of %s",
						    p->locs[d].name, pu, topo_origin(p->t));
			for (unsigned int e = 0; e < d; e++)
				if (pol->device_cpus[e] && hwloc_bitmap_isset(pol->device_cpus[e], pu))
					return set_error(-EINVAL, "PU %d given to both %s and %s",
							    pu, p->locs[e].name, p->locs[d].name);
			if (type == HWLOC_OBJ_CORE && hwloc_get_ancestor_obj_by_type(h, type, obj))
				obj = hwloc_get_ancestor_obj_by_type(h, type, obj);
			entry_fill(p, &plan->entries[d * w + k], d, pu, obj, PC_PLAN_EXPLICIT);
			/* its core is no one else's */
			for (int i = 0; i < p->nr_cores; i++)
				if (hwloc_bitmap_isset(p->cores[i].obj->cpuset, pu))
					p->cores[i].nr_used = p->cores[i].nr_pus;
		}
		placed[d] = w;
	}
	return 0;
}

/* Slots left for planned workers: free cores, or their PUs with PC_PLAN_ALLOW_SMT. */
static int free_slots(const struct planner *p, const struct pc_plan_policy *pol)
{
	int n = 0;

	for (int i = 0; i < p->nr_cores; i++)
		if (!p->cores[i].nr_used)
			n += pol->flags & PC_PLAN_ALLOW_SMT ? p->cores[i].nr_pus : 1;
	return n;
}

/*
 * Devices take turns, one worker per turn, so devices on the same side
 * share its cores evenly. Every device exhausts its local cores before any
 * device spills, so no device takes another's local core early.
 */
static void fill(struct planner *p, struct pc_plan *plan, unsigned int *placed, unsigned int w,
		 int per_core, bool local, enum pc_plan_reason reason)
{
	bool progress = true;

	while (progress) {
		progress = false;
		for (unsigned int d = 0; d < p->nr_devices; d++) {
			int ci;

			if (placed[d] == w)
				continue;
			ci = pick(p, d, per_core, local);
			if (ci < 0)
				continue;
			place(p, &plan->entries[d * w + placed[d]], d, ci, reason);
			placed[d]++;
			progress = true;
		}
	}
}

static void load_distances(struct planner *p)
{
	unsigned int nr = 1;

	if (hwloc_distances_get_by_type(p->t->h, HWLOC_OBJ_NUMANODE, &nr, &p->dist,
					HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) < 0 ||
	    nr == 0)
		p->dist = NULL;
}

static int check_args(const struct pc_topo *t, const char *const *devices, unsigned int nr_devices,
		      unsigned int w, struct pc_plan **out)
{
	if (!t || !out)
		return set_error(-EINVAL, "pc_plan_build: NULL topology or result pointer");
	if (!devices || nr_devices == 0)
		return set_error(-EINVAL, "pc_plan_build: no RDMA device given");
	if (w == 0)
		return set_error(-EINVAL,
				    "pc_plan_build: workers per device must be at least 1");
	if (nr_devices > INT_MAX / w)
		return set_error(-ENOSPC, "pc_plan_build: %u devices x %u workers is too many",
				    nr_devices, w);
	for (unsigned int i = 0; i < nr_devices; i++)
		for (unsigned int j = 0; j < i; j++)
			if (devices[i] && devices[j] && strcmp(devices[i], devices[j]) == 0)
				return set_error(-EINVAL, "pc_plan_build: device %s given twice",
						    devices[i]);
	return 0;
}

/* pc_plan_build@@POLLCORE_0.2 (struct pc_plan_policy carries its size); workers/compat.c has 0.1's */
PC_API int pc_plan_build_0_2(const struct pc_topo *t, const char *const *devices,
			     unsigned int nr_devices, unsigned int workers_per_device,
			     const struct pc_plan_policy *policy, struct pc_plan **out);
PC_SYMVER_DEFAULT(pc_plan_build_0_2, pc_plan_build, "POLLCORE_0.2");

int pc_plan_build_0_2(const struct pc_topo *t, const char *const *devices, unsigned int nr_devices,
		      unsigned int workers_per_device, const struct pc_plan_policy *policy,
		      struct pc_plan **out)
{
	struct pc_plan_policy polc = { .size = sizeof(polc) };
	const struct pc_plan_policy *pol = &polc;
	struct planner p = {.t = t, .nr_devices = nr_devices};
	unsigned int w = workers_per_device, total, planned = 0, *placed = NULL;
	struct pc_plan *plan = NULL;
	int err, slots;

	if (policy) {
		err = abi_copy(&polc, sizeof(polc), policy, policy->size, sizeof(polc),
			       "pc_plan_policy");
		if (err)
			return err;
	}
	err = check_args(t, devices, nr_devices, w, out);
	if (err)
		return err;
	*out = NULL;
	total = nr_devices * w;

	p.locs = calloc(nr_devices, sizeof(*p.locs));
	placed = calloc(nr_devices, sizeof(*placed));
	if (!p.locs || !placed) {
		err = -ENOMEM;
		goto out;
	}
	for (unsigned int d = 0; d < nr_devices; d++) {
		err = pc_topo_nic_locality(t, devices[d], &p.locs[d]);
		if (err)
			goto out;
	}
	err = collect_cores(&p, pol);
	if (err)
		goto out;
	plan = calloc(1, sizeof(*plan) + total * sizeof(plan->entries[0]));
	if (!plan) {
		err = -ENOMEM;
		goto out;
	}
	plan->nr_entries = total;
	err = place_explicit(&p, plan, placed, w, pol);
	if (err)
		goto out;
	for (unsigned int d = 0; d < nr_devices; d++)
		if (placed[d] == 0)
			planned++;
	slots = free_slots(&p, pol);
	if ((int)(planned * w) > slots) {
		err = set_error(
		    -ENOSPC,
		    "%u workers (%u per device, %u device(s)) but %s has only %d free %s%s",
		    planned * w, w, planned, topo_origin(t), slots,
		    pol->flags & PC_PLAN_ALLOW_SMT ? "PUs" : "cores",
		    pol->flags & PC_PLAN_NO_HOUSEKEEPING ? "" : " (housekeeping left out)");
		goto out;
	}
	load_distances(&p);

	fill(&p, plan, placed, w, 1, true, PC_PLAN_LOCAL);
	fill(&p, plan, placed, w, 1, false, PC_PLAN_SPILL_FULL);
	if (pol->flags & PC_PLAN_ALLOW_SMT) {
		fill(&p, plan, placed, w, INT_MAX, true, PC_PLAN_SMT_SIBLING);
		fill(&p, plan, placed, w, INT_MAX, false, PC_PLAN_SMT_SIBLING);
	}
	for (unsigned int i = 0; i < total; i++)
		plan->entries[i].worker = i;
	*out = plan;
	plan = NULL;
	if (p.dist)
		hwloc_distances_release(t->h, p.dist);
out:
	free(plan);
	free(p.cores);
	if (p.locs)
		for (unsigned int d = 0; d < nr_devices; d++)
			pc_nic_locality_free(&p.locs[d]);
	free(p.locs);
	free(placed);
	return err;
}
