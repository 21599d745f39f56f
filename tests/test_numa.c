// SPDX-License-Identifier: MIT
/*
 * Unit tests for numa/: NIC locality and the planner on every topology in
 * $PC_TOPOLOGIES (whatever the files are called), rules netdev/machine on
 * a fake sysfs tree, distance-ordered spill on synthetic topologies, and
 * binding/allocation on this host.
 */
#include <pollcore/common.h>
#include <pollcore/numa.h>

#include "pc_test.h"

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_XML 64

static char xml_paths[MAX_XML][PATH_MAX];
static int nr_xml;

static int cmp_str(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static void load_xml_list(void)
{
	const char *dir = getenv("PC_TOPOLOGIES");
	struct dirent *de;
	DIR *d;

	ck_assert_msg(dir, "PC_TOPOLOGIES is not set");
	d = opendir(dir);
	ck_assert_msg(d, "cannot open %s", dir);
	nr_xml = 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len > 4 && strcmp(de->d_name + len - 4, ".xml") == 0 && nr_xml < MAX_XML)
			snprintf(xml_paths[nr_xml++], PATH_MAX, "%s/%s", dir, de->d_name);
	}
	closedir(d);
	qsort(xml_paths, nr_xml, sizeof(xml_paths[0]), cmp_str);
	ck_assert_int_ge(nr_xml, 1);
}

static struct pc_topo *open_xml(int i)
{
	struct pc_topo *t = pc_topo_open_xml(xml_paths[i]);

	ck_assert_msg(t, "cannot load %s: %s", xml_paths[i], pc_last_error());
	ck_assert(!pc_topo_is_thissystem(t));
	return t;
}

/* Device names of @t; returns the count. */
static int devices_of(struct pc_topo *t, char (*names)[PC_NIC_NAME_MAX], int max)
{
	int n = pc_topo_devices(t, names, max);

	ck_assert_int_ge(n, 0);
	ck_assert_int_le(n, max);
	return n;
}

/* The OpenFabrics OS device @name, found independently of numa/. */
static hwloc_obj_t osdev_of(hwloc_topology_t h, const char *name)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_osdev(h, o)))
		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && !strcmp(o->name, name))
			return o;
	return NULL;
}

static hwloc_obj_t core_of_pu(hwloc_topology_t h, int pu)
{
	hwloc_obj_t p = hwloc_get_pu_obj_by_os_index(h, pu);

	ck_assert_ptr_nonnull(p);
	return hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_CORE, p);
}

static int first_and(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b)
{
	hwloc_bitmap_t x = hwloc_bitmap_alloc();
	int first;

	hwloc_bitmap_and(x, a, b);
	first = hwloc_bitmap_first(x);
	hwloc_bitmap_free(x);
	return first;
}

/* Cores that the default policy may use for @cpuset (first core excluded). */
static int free_cores_in(hwloc_topology_t h, hwloc_const_cpuset_t cpuset, bool skip_first)
{
	hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h);
	hwloc_obj_t first = core_of_pu(h, hwloc_bitmap_first(allowed)), c = NULL;
	int n = 0;

	while ((c = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_CORE, c))) {
		int pu = first_and(c->cpuset, allowed);

		if (pu < 0 || (skip_first && c == first))
			continue;
		n += hwloc_bitmap_isset(cpuset, pu);
	}
	return n;
}

/* Checks every plan must pass, whatever the machine. */
static void check_plan_invariants(hwloc_topology_t h, const struct pc_plan *plan,
				  const char *const *devs, unsigned int nr_devs, unsigned int w)
{
	hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h);
	hwloc_bitmap_t cores = hwloc_bitmap_alloc();

	ck_assert_uint_eq(plan->nr_entries, nr_devs * w);
	for (unsigned int i = 0; i < plan->nr_entries; i++) {
		const struct pc_plan_entry *e = &plan->entries[i];
		hwloc_obj_t core = core_of_pu(h, e->pu);
		hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(h, e->numa_node);

		ck_assert_uint_eq(e->worker, i);
		ck_assert_uint_eq(e->device, i / w);
		ck_assert_str_eq(e->device_name, devs[i / w]);
		ck_assert(hwloc_bitmap_isset(allowed, e->pu));
		ck_assert_ptr_nonnull(core);
		ck_assert_int_eq(e->core, (int)core->os_index);
		ck_assert_int_eq(e->core_logical, (int)core->logical_index);
		/* One worker per core, on the core's first allowed PU. */
		ck_assert_msg(!hwloc_bitmap_isset(cores, e->core_logical),
			      "two workers on core L#%d", e->core_logical);
		hwloc_bitmap_set(cores, e->core_logical);
		ck_assert_int_eq(e->pu, first_and(core->cpuset, allowed));
		ck_assert_ptr_nonnull(node);
		ck_assert(hwloc_bitmap_isset(node->cpuset, e->pu));
		ck_assert_int_eq(e->reason == PC_PLAN_LOCAL, e->local);
	}
	hwloc_bitmap_free(cores);
}

START_TEST(test_xml_devices_placed_by_pci)
{
	load_xml_list();
	for (int i = 0; i < nr_xml; i++) {
		struct pc_topo *t = open_xml(i);
		hwloc_topology_t h = pc_topo_hwloc(t);
		char names[16][PC_NIC_NAME_MAX];
		int n = devices_of(t, names, 16), nr_of = 0;
		hwloc_obj_t o = NULL;

		while ((o = hwloc_get_next_osdev(h, o)))
			nr_of += o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
		ck_assert_msg(n == nr_of && n > 0, "%s: %d devices, %d OpenFabrics", xml_paths[i],
			      n, nr_of);
		for (int d = 0; d < n; d++) {
			struct pc_nic_locality loc;
			hwloc_obj_t pkg, osdev = osdev_of(h, names[d]);
			hwloc_bitmap_t want = hwloc_bitmap_alloc();

			ck_assert_ptr_nonnull(osdev);
			if (d)
				ck_assert_int_lt(strverscmp(names[d - 1], names[d]), 0);
			ck_assert_int_eq(pc_topo_nic_locality(t, names[d], &loc), 0);
			ck_assert_str_eq(loc.name, names[d]);
			ck_assert_int_eq(loc.rule, PC_LOCALITY_PCI);
			/* Every machine here attaches its NICs to a package = one node. */
			pkg = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE, osdev);
			ck_assert_ptr_nonnull(pkg);
			ck_assert(hwloc_bitmap_isequal(loc.nodeset, pkg->nodeset));
			hwloc_bitmap_and(want, pkg->cpuset, hwloc_topology_get_allowed_cpuset(h));
			ck_assert(hwloc_bitmap_isequal(loc.cpuset, want));
			hwloc_bitmap_free(want);
			pc_nic_locality_free(&loc);
			pc_nic_locality_free(&loc);
		}
		pc_topo_close(t);
	}
}
END_TEST

/* Opens the one topology holding device @name; asserts there is exactly one. */
static struct pc_topo *open_with_device(const char *name)
{
	struct pc_topo *found = NULL;

	load_xml_list();
	for (int i = 0; i < nr_xml; i++) {
		struct pc_topo *t = open_xml(i);

		if (osdev_of(pc_topo_hwloc(t), name)) {
			ck_assert_msg(!found, "%s in two topologies", name);
			found = t;
		} else {
			pc_topo_close(t);
		}
	}
	ck_assert_msg(found, "no topology in PC_TOPOLOGIES has %s", name);
	return found;
}

START_TEST(test_power9_mlx5_2_second_package_node_8)
{
	struct pc_topo *t = open_with_device("mlx5_2");
	hwloc_topology_t h = pc_topo_hwloc(t);
	hwloc_obj_t pkg0 = hwloc_get_obj_by_type(h, HWLOC_OBJ_PACKAGE, 0);
	hwloc_obj_t pkg1 = hwloc_get_obj_by_type(h, HWLOC_OBJ_PACKAGE, 1);
	const char *dev[] = {"mlx5_2"};
	struct pc_nic_locality loc;
	struct pc_plan *plan;

	ck_assert_int_eq(pc_topo_nic_locality(t, "mlx5_2", &loc), 0);
	ck_assert_int_eq(hwloc_bitmap_weight(loc.nodeset), 1);
	ck_assert_int_eq(hwloc_bitmap_first(loc.nodeset), 8);
	ck_assert_int_eq(hwloc_bitmap_weight(loc.cpuset), 80); /* 20 SMT4 cores */
	ck_assert(hwloc_bitmap_isincluded(loc.cpuset, pkg1->cpuset));
	ck_assert(!hwloc_bitmap_intersects(loc.cpuset, pkg0->cpuset));

	ck_assert_int_eq(pc_plan_build(t, dev, 1, 4, NULL, &plan), 0);
	for (unsigned int i = 0; i < plan->nr_entries; i++) {
		ck_assert_int_eq(plan->entries[i].numa_node, 8);
		ck_assert(hwloc_bitmap_isset(pkg1->cpuset, plan->entries[i].pu));
		ck_assert(plan->entries[i].local);
	}
	/* The first core (PUs 8-11, package 0) is housekeeping: mlx5_2 starts at 96. */
	ck_assert_int_eq(plan->entries[0].pu, 96);
	ck_assert_int_eq(plan->entries[1].pu, 100);
	pc_plan_destroy(plan);
	pc_nic_locality_free(&loc);
	pc_topo_close(t);
}
END_TEST

START_TEST(test_hp_mlx4_0_interleaved_pus)
{
	struct pc_topo *t = open_with_device("mlx4_0");
	const char *dev[] = {"mlx4_0"};
	struct pc_nic_locality loc;
	struct pc_plan *plan;
	hwloc_bitmap_t even = hwloc_bitmap_alloc();

	for (int pu = 0; pu < 24; pu += 2)
		hwloc_bitmap_set(even, pu);
	ck_assert_int_eq(pc_topo_nic_locality(t, "mlx4_0", &loc), 0);
	ck_assert(hwloc_bitmap_isequal(loc.cpuset, even));
	ck_assert_int_eq(hwloc_bitmap_first(loc.nodeset), 0);
	ck_assert_int_eq(hwloc_bitmap_weight(loc.nodeset), 1);

	/* Core with PUs 0 and 12 is housekeeping; the next cores start at PU 2. */
	ck_assert_int_eq(pc_plan_build(t, dev, 1, 4, NULL, &plan), 0);
	for (unsigned int i = 0; i < 4; i++) {
		ck_assert_int_eq(plan->entries[i].pu, 2 + 2 * (int)i);
		ck_assert_int_eq(plan->entries[i].numa_node, 0);
	}
	/* Core os indexes repeat across packages on this machine: 8, 2, 10, 1. */
	ck_assert_int_eq(plan->entries[0].core, 8);
	ck_assert_int_eq(plan->entries[3].core, 1);
	pc_plan_destroy(plan);

	/* 6 cores on package 0, one for housekeeping: the 6th worker spills to node 1. */
	ck_assert_int_eq(pc_plan_build(t, dev, 1, 6, NULL, &plan), 0);
	ck_assert(plan->entries[4].local);
	ck_assert(!plan->entries[5].local);
	ck_assert_int_eq(plan->entries[5].reason, PC_PLAN_SPILL_FULL);
	ck_assert_int_eq(plan->entries[5].numa_node, 1);
	ck_assert_int_eq(plan->entries[5].pu, 1);
	pc_plan_destroy(plan);

	hwloc_bitmap_free(even);
	pc_nic_locality_free(&loc);
	pc_topo_close(t);
}
END_TEST

START_TEST(test_four_workers_four_local_cores)
{
	load_xml_list();
	for (int i = 0; i < nr_xml; i++) {
		struct pc_topo *t = open_xml(i);
		hwloc_topology_t h = pc_topo_hwloc(t);
		hwloc_obj_t first =
		    core_of_pu(h, hwloc_bitmap_first(hwloc_topology_get_allowed_cpuset(h)));
		char names[16][PC_NIC_NAME_MAX];
		int n = devices_of(t, names, 16);

		for (int d = 0; d < n; d++) {
			const char *dev[] = {names[d]};
			struct pc_nic_locality loc;
			struct pc_plan *plan, *again;

			ck_assert_int_eq(pc_topo_nic_locality(t, names[d], &loc), 0);
			ck_assert_int_eq(pc_plan_build(t, dev, 1, 4, NULL, &plan), 0);
			check_plan_invariants(h, plan, dev, 1, 4);
			for (int k = 0; k < 4; k++) {
				const struct pc_plan_entry *e = &plan->entries[k];

				ck_assert(e->local);
				ck_assert(hwloc_bitmap_isset(loc.cpuset, e->pu));
				ck_assert(hwloc_bitmap_isset(loc.nodeset, e->numa_node));
				ck_assert(!hwloc_bitmap_isset(first->cpuset, e->pu));
			}
			/* Pure function: same inputs, same plan. */
			ck_assert_int_eq(pc_plan_build(t, dev, 1, 4, NULL, &again), 0);
			ck_assert_int_eq(
			    memcmp(plan, again, sizeof(*plan) + 4 * sizeof(plan->entries[0])), 0);
			pc_plan_destroy(again);
			pc_plan_destroy(plan);
			pc_nic_locality_free(&loc);
		}
		pc_topo_close(t);
	}
}
END_TEST

START_TEST(test_more_than_local_cores_spills_marked)
{
	load_xml_list();
	for (int i = 0; i < nr_xml; i++) {
		struct pc_topo *t = open_xml(i);
		hwloc_topology_t h = pc_topo_hwloc(t);
		char names[16][PC_NIC_NAME_MAX];
		int n = devices_of(t, names, 16);

		for (int d = 0; d < n; d++) {
			const char *dev[] = {names[d]};
			struct pc_nic_locality loc;
			struct pc_plan *plan;
			int nl;

			ck_assert_int_eq(pc_topo_nic_locality(t, names[d], &loc), 0);
			nl = free_cores_in(h, loc.cpuset, true);
			ck_assert_int_gt(nl, 0);
			ck_assert_int_eq(pc_plan_build(t, dev, 1, nl + 2, NULL, &plan), 0);
			check_plan_invariants(h, plan, dev, 1, nl + 2);
			for (int k = 0; k < nl + 2; k++) {
				const struct pc_plan_entry *e = &plan->entries[k];

				ck_assert_int_eq(e->local, k < nl);
				ck_assert_int_eq(e->reason,
						 k < nl ? PC_PLAN_LOCAL : PC_PLAN_SPILL_FULL);
				ck_assert_int_eq(hwloc_bitmap_isset(loc.nodeset, e->numa_node),
						 k < nl);
			}
			ck_assert_str_eq(pc_plan_reason_str(plan->entries[nl].reason),
					 "local cores all taken: nearest other NUMA node");
			pc_plan_destroy(plan);
			pc_nic_locality_free(&loc);
		}
		pc_topo_close(t);
	}
}
END_TEST

START_TEST(test_too_many_workers_enospc)
{
	load_xml_list();
	for (int i = 0; i < nr_xml; i++) {
		struct pc_topo *t = open_xml(i);
		hwloc_topology_t h = pc_topo_hwloc(t);
		hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h);
		struct pc_plan_policy all = {.size = sizeof(all), .flags = PC_PLAN_NO_HOUSEKEEPING};
		struct pc_plan_policy smt = {.size = sizeof(smt), .flags = PC_PLAN_ALLOW_SMT};
		char names[16][PC_NIC_NAME_MAX];
		int n = devices_of(t, names, 16);
		int cores = free_cores_in(h, allowed, false);
		int pus = hwloc_bitmap_weight(allowed);
		int first_core_pus =
		    hwloc_bitmap_weight(core_of_pu(h, hwloc_bitmap_first(allowed))->cpuset);
		const char *dev[] = {names[0]};
		struct pc_plan *plan = (void *)1;

		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(pc_plan_build(t, dev, 1, cores, NULL, &plan), -ENOSPC);
		ck_assert_ptr_null(plan);
		ck_assert_ptr_nonnull(strstr(pc_last_error(), "only"));
		ck_assert_int_eq(pc_plan_build(t, dev, 1, cores - 1, NULL, &plan), 0);
		check_plan_invariants(h, plan, dev, 1, cores - 1);
		pc_plan_destroy(plan);

		ck_assert_int_eq(pc_plan_build(t, dev, 1, cores + 1, &all, &plan), -ENOSPC);
		ck_assert_int_eq(pc_plan_build(t, dev, 1, cores, &all, &plan), 0);
		check_plan_invariants(h, plan, dev, 1, cores);
		pc_plan_destroy(plan);

		/* SMT siblings only once every core has a worker. */
		ck_assert_int_eq(pc_plan_build(t, dev, 1, pus - first_core_pus + 1, &smt, &plan),
				 -ENOSPC);
		ck_assert_int_eq(pc_plan_build(t, dev, 1, pus - first_core_pus, &smt, &plan), 0);
		for (unsigned int k = 0; k < plan->nr_entries; k++) {
			const struct pc_plan_entry *e = &plan->entries[k];

			ck_assert_int_eq(e->reason == PC_PLAN_SMT_SIBLING, (int)k >= cores - 1);
			for (unsigned int j = 0; j < k; j++)
				ck_assert_int_ne(plan->entries[j].pu, e->pu);
		}
		pc_plan_destroy(plan);
		pc_topo_close(t);
	}
}
END_TEST

/*
 * Devices with the same locality, planned alone with more workers than their
 * side has cores: the side's cores split evenly (within one), none left idle.
 */
static void check_side_split(struct pc_topo *t, const char *const *side, int k, int nr_local)
{
	hwloc_topology_t h = pc_topo_hwloc(t);
	int w = nr_local / k + 2, min = INT_MAX, max = 0, sum = 0;
	struct pc_plan *plan;

	if (k * w > free_cores_in(h, hwloc_topology_get_allowed_cpuset(h), true))
		return;
	ck_assert_int_eq(pc_plan_build(t, side, k, w, NULL, &plan), 0);
	check_plan_invariants(h, plan, side, k, w);
	for (int d = 0; d < k; d++) {
		int nl = 0;

		for (int j = 0; j < w; j++)
			nl += plan->entries[d * w + j].local;
		min = PC_MIN(min, nl);
		max = PC_MAX(max, nl);
		sum += nl;
	}
	ck_assert_int_le(max - min, 1);
	ck_assert_int_eq(sum, nr_local);
	pc_plan_destroy(plan);
}

/* All devices of a machine together: each side shared evenly, nobody overlaps. */
START_TEST(test_devices_share_fairly_each_on_its_side)
{
	load_xml_list();
	for (int i = 0; i < nr_xml; i++) {
		struct pc_topo *t = open_xml(i);
		hwloc_topology_t h = pc_topo_hwloc(t);
		char names[16][PC_NIC_NAME_MAX];
		const char *devs[16];
		struct pc_nic_locality loc[16];
		int n = devices_of(t, names, 16), w = INT_MAX;
		struct pc_plan *plan;

		for (int d = 0; d < n; d++) {
			devs[d] = names[d];
			ck_assert_int_eq(pc_topo_nic_locality(t, names[d], &loc[d]), 0);
		}
		for (int d = 0; d < n; d++) {
			int same = 0;

			for (int e = 0; e < n; e++)
				same += hwloc_bitmap_isequal(loc[d].cpuset, loc[e].cpuset);
			w = PC_MIN(w, free_cores_in(h, loc[d].cpuset, true) / same);
		}
		ck_assert_int_gt(w, 0);
		for (int d = 0; d < n; d++) {
			const char *side[16];
			int k = 0;

			for (int e = 0; e < n; e++)
				if (hwloc_bitmap_isequal(loc[d].cpuset, loc[e].cpuset))
					side[k++] = names[e];
			if (k > 1)
				check_side_split(t, side, k, free_cores_in(h, loc[d].cpuset, true));
		}
		/* As many as fit locally for everyone: all local. */
		ck_assert_int_eq(pc_plan_build(t, devs, n, w, NULL, &plan), 0);
		check_plan_invariants(h, plan, devs, n, w);
		for (unsigned int k = 0; k < plan->nr_entries; k++)
			ck_assert(plan->entries[k].local);
		pc_plan_destroy(plan);

		/* One more each: devices on one side differ by at most one local core. */
		if (n * (w + 1) > free_cores_in(h, hwloc_topology_get_allowed_cpuset(h), true)) {
			ck_assert_int_eq(pc_plan_build(t, devs, n, w + 1, NULL, &plan), -ENOSPC);
			goto out;
		}
		ck_assert_int_eq(pc_plan_build(t, devs, n, w + 1, NULL, &plan), 0);
		check_plan_invariants(h, plan, devs, n, w + 1);
		for (int d = 0; d < n; d++) {
			for (int e = 0; e < n; e++) {
				int ld = 0, le = 0;

				if (!hwloc_bitmap_isequal(loc[d].cpuset, loc[e].cpuset))
					continue;
				for (int k = 0; k <= w; k++) {
					ld += plan->entries[d * (w + 1) + k].local;
					le += plan->entries[e * (w + 1) + k].local;
				}
				ck_assert_int_le(abs(ld - le), 1);
				ck_assert_int_ge(ld, w);
			}
		}
		pc_plan_destroy(plan);
	out:
		for (int d = 0; d < n; d++)
			pc_nic_locality_free(&loc[d]);
		pc_topo_close(t);
	}
}
END_TEST

START_TEST(test_housekeeping_override)
{
	struct pc_topo *t = open_with_device("mlx4_0");
	const char *dev[] = {"mlx4_0"};
	struct pc_plan_policy all = {.size = sizeof(all), .flags = PC_PLAN_NO_HOUSEKEEPING};
	struct pc_plan_policy hk = {.size = sizeof(hk)};
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	struct pc_plan *plan;

	ck_assert_int_eq(pc_plan_build(t, dev, 1, 2, &all, &plan), 0);
	ck_assert_int_eq(plan->entries[0].pu, 0);
	ck_assert_int_eq(plan->entries[1].pu, 2);
	pc_plan_destroy(plan);

	/* PU 14 is PU 2's sibling: its whole core is left out, PU 0's is used. */
	hwloc_bitmap_only(set, 14);
	hk.housekeeping = set;
	ck_assert_int_eq(pc_plan_build(t, dev, 1, 2, &hk, &plan), 0);
	ck_assert_int_eq(plan->entries[0].pu, 0);
	ck_assert_int_eq(plan->entries[1].pu, 4);
	pc_plan_destroy(plan);
	hwloc_bitmap_free(set);
	pc_topo_close(t);
}
END_TEST

START_TEST(test_explicit_device_cpus)
{
	struct pc_topo *t = open_with_device("mlx5_2");
	const char *dev[] = {"mlx5_0", "mlx5_2"};
	hwloc_bitmap_t a = hwloc_bitmap_alloc(), b = hwloc_bitmap_alloc();
	hwloc_const_cpuset_t cpus[2] = {NULL, b};
	struct pc_plan_policy pol = {.size = sizeof(pol), .device_cpus = cpus};
	struct pc_plan *plan = NULL;

	/* mlx5_2 where it is told, in PU order, even on mlx5_0's side */
	hwloc_bitmap_set(b, 96);
	hwloc_bitmap_set(b, 12);
	ck_assert_int_eq(pc_plan_build(t, dev, 2, 2, &pol, &plan), 0);
	ck_assert_int_eq(plan->entries[2].pu, 12);
	ck_assert_int_eq(plan->entries[2].reason, PC_PLAN_EXPLICIT);
	ck_assert(!plan->entries[2].local);
	ck_assert_int_eq(plan->entries[2].numa_node, 0);
	ck_assert_int_eq(plan->entries[3].pu, 96);
	ck_assert_int_eq(plan->entries[3].reason, PC_PLAN_EXPLICIT);
	ck_assert(plan->entries[3].local);
	ck_assert_int_eq(plan->entries[3].numa_node, 8);
	ck_assert_str_eq(plan->entries[3].device_name, "mlx5_2");
	/* mlx5_0 is planned around it: the core of PU 12 (PUs 12-15) is taken */
	ck_assert_int_eq(plan->entries[0].pu, 16);
	ck_assert_int_eq(plan->entries[1].pu, 20);
	ck_assert_int_eq(plan->entries[0].reason, PC_PLAN_LOCAL);
	pc_plan_destroy(plan);
	plan = NULL;

	/* an explicit PU may sit in the housekeeping core (PUs 8-11) */
	hwloc_bitmap_zero(b);
	hwloc_bitmap_set_range(b, 8, 9);
	ck_assert_int_eq(pc_plan_build(t, dev, 2, 2, &pol, &plan), 0);
	ck_assert_int_eq(plan->entries[2].pu, 8);
	ck_assert_int_eq(plan->entries[3].pu, 9);
	ck_assert_int_eq(plan->entries[0].pu, 12);
	pc_plan_destroy(plan);
	plan = NULL;

	/* fewer PUs than workers */
	hwloc_bitmap_only(b, 96);
	ck_assert_int_eq(pc_plan_build(t, dev, 2, 2, &pol, &plan), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "mlx5_2: 1 PUs given for 2 workers"));
	/* a PU the machine does not have */
	hwloc_bitmap_set(b, 5000);
	ck_assert_int_eq(pc_plan_build(t, dev, 2, 2, &pol, &plan), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "PU 5000 is not an allowed PU"));
	/* one PU for two devices */
	hwloc_bitmap_zero(a);
	hwloc_bitmap_set(a, 96);
	hwloc_bitmap_set(a, 100);
	hwloc_bitmap_zero(b);
	hwloc_bitmap_set(b, 96);
	hwloc_bitmap_set(b, 104);
	cpus[0] = a;
	ck_assert_int_eq(pc_plan_build(t, dev, 2, 2, &pol, &plan), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "PU 96 given to both mlx5_0 and mlx5_2"));
	ck_assert_ptr_null(plan);

	/* explicit workers do not count against the free cores: 40 cores, 1 kept */
	hwloc_bitmap_zero(b);
	hwloc_bitmap_set_range(b, 96, 175);
	cpus[0] = NULL;
	ck_assert_int_eq(pc_plan_build(t, dev, 2, 20, &pol, &plan), 0);
	ck_assert_int_eq(plan->entries[20].pu, 96);
	ck_assert_int_eq(plan->entries[39].pu, 115);
	pc_plan_destroy(plan);
	plan = NULL;
	/* but their cores do: 20 of mlx5_2's, each with 4 PUs, leave 19 for mlx5_0 */
	hwloc_bitmap_zero(b);
	for (int pu = 96; pu < 176; pu += 4)
		hwloc_bitmap_set(b, pu);
	ck_assert_int_eq(pc_plan_build(t, dev, 2, 20, &pol, &plan), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "20 workers (20 per device, 1 device(s))"));

	hwloc_bitmap_free(a);
	hwloc_bitmap_free(b);
	pc_topo_close(t);
}
END_TEST

START_TEST(test_bad_arguments)
{
	struct pc_topo *t;
	const char *unknown[] = {"mlx9_9"};
	const char *twice[2];
	char names[16][PC_NIC_NAME_MAX];
	struct pc_nic_locality loc;
	struct pc_plan *plan = NULL;

	load_xml_list();
	t = open_xml(0);
	ck_assert_int_gt(devices_of(t, names, 16), 0);
	twice[0] = twice[1] = names[0];
	ck_assert_int_eq(pc_plan_build(t, unknown, 1, 1, NULL, &plan), -ENODEV);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "mlx9_9"));
	ck_assert_int_eq(pc_topo_nic_locality(t, "mlx9_9", &loc), -ENODEV);
	ck_assert_int_eq(pc_topo_nic_locality(t, "", &loc), -EINVAL);
	ck_assert_int_eq(pc_plan_build(t, twice, 1, 0, NULL, &plan), -EINVAL);
	ck_assert_int_eq(pc_plan_build(t, twice, 0, 1, NULL, &plan), -EINVAL);
	ck_assert_int_eq(pc_plan_build(t, twice, 2, 1, NULL, &plan), -EINVAL);
	ck_assert_int_eq(pc_plan_build(t, twice, 1, UINT_MAX, NULL, &plan), -ENOSPC);
	ck_assert_ptr_null(plan);
	pc_topo_close(t);
}
END_TEST

START_TEST(test_unreadable_xml)
{
	char path[] = "/tmp/pc-numa-XXXXXX";
	int fd;

	errno = 0;
	ck_assert_ptr_null(pc_topo_open_xml("/nonexistent/topology.xml"));
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "/nonexistent/topology.xml"));

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "not xml\n", 8), 8);
	close(fd);
	errno = 0;
	ck_assert_ptr_null(pc_topo_open_xml(path));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), path));
	unlink(path);
}
END_TEST

/* ---- fake sysfs: rules netdev and machine ---- */

static char sysroot[64];

static void put_file(const char *rel, const char *content)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", sysroot, rel);
	for (slash = strchr(path + strlen(sysroot) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(content, f);
	fclose(f);
}

static void make_sysfs(const char *ifname, const char *numa_node)
{
	char rel[256];

	snprintf(sysroot, sizeof(sysroot), "/tmp/pc-sysfs-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sysroot));
	if (ifname) {
		snprintf(rel, sizeof(rel), "%s\n", ifname);
		put_file("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", rel);
	} else {
		put_file("class/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
	}
	if (ifname && numa_node) {
		snprintf(rel, sizeof(rel), "class/net/%s/device/numa_node", ifname);
		put_file(rel, numa_node);
	}
}

static void rm_sysfs(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sysroot);
	ck_assert_int_eq(system(cmd), 0);
}

static int has_name(char (*names)[PC_NIC_NAME_MAX], int n, const char *name)
{
	int found = 0;

	for (int i = 0; i < n; i++)
		found += !strcmp(names[i], name);
	return found;
}

/* The topology's last NUMA node (not node 0, so a wrong default shows). */
static hwloc_obj_t last_node(hwloc_topology_t h)
{
	return hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE,
				     hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE) - 1);
}

START_TEST(test_netdev_rule_from_sysfs)
{
	load_xml_list();
	for (int i = 0; i < nr_xml; i++) {
		struct pc_topo *t = open_xml(i);
		hwloc_topology_t h = pc_topo_hwloc(t);
		hwloc_obj_t node = last_node(h);
		hwloc_bitmap_t want = hwloc_bitmap_alloc();
		char num[16], names[16][PC_NIC_NAME_MAX];
		struct pc_nic_locality loc;
		const char *dev[] = {"rxe0"};
		struct pc_plan *plan;
		int n;

		/* XML: this host's sysfs is never consulted unless asked. */
		ck_assert_int_eq(pc_topo_nic_locality(t, "rxe0", &loc), -ENODEV);

		snprintf(num, sizeof(num), "%u\n", node->os_index);
		make_sysfs("eth7", num);
		ck_assert_int_eq(pc_topo_set_sysfs_root(t, sysroot), 0);
		ck_assert_int_eq(pc_topo_nic_locality(t, "rxe0", &loc), 0);
		ck_assert_int_eq(loc.rule, PC_LOCALITY_NETDEV);
		ck_assert_str_eq(pc_locality_rule_str(loc.rule), "netdev");
		ck_assert_int_eq(hwloc_bitmap_weight(loc.nodeset), 1);
		ck_assert_int_eq(hwloc_bitmap_first(loc.nodeset), (int)node->os_index);
		hwloc_bitmap_and(want, node->cpuset, hwloc_topology_get_allowed_cpuset(h));
		ck_assert(hwloc_bitmap_isequal(loc.cpuset, want));
		pc_nic_locality_free(&loc);

		/* Listed with the topology's own devices, in order. */
		n = devices_of(t, names, 16);
		ck_assert_int_ge(n, 2);
		for (int d = 1; d < n; d++)
			ck_assert_int_lt(strverscmp(names[d - 1], names[d]), 0);
		ck_assert_int_eq(has_name(names, n, "rxe0"), 1);

		ck_assert_int_eq(pc_plan_build(t, dev, 1, 2, NULL, &plan), 0);
		for (int k = 0; k < 2; k++) {
			ck_assert(plan->entries[k].local);
			ck_assert_int_eq(plan->entries[k].numa_node, (int)node->os_index);
		}
		pc_plan_destroy(plan);
		rm_sysfs();
		hwloc_bitmap_free(want);
		pc_topo_close(t);
	}
}
END_TEST

static void expect_machine_rule(struct pc_topo *t)
{
	hwloc_topology_t h = pc_topo_hwloc(t);
	struct pc_nic_locality loc;

	ck_assert_int_eq(pc_topo_set_sysfs_root(t, sysroot), 0);
	ck_assert_int_eq(pc_topo_nic_locality(t, "rxe0", &loc), 0);
	ck_assert_int_eq(loc.rule, PC_LOCALITY_MACHINE);
	ck_assert_str_eq(pc_locality_rule_str(loc.rule), "machine");
	ck_assert(hwloc_bitmap_isequal(loc.cpuset, hwloc_topology_get_allowed_cpuset(h)));
	ck_assert(hwloc_bitmap_isequal(loc.nodeset, hwloc_topology_get_allowed_nodeset(h)));
	pc_nic_locality_free(&loc);
	rm_sysfs();
}

START_TEST(test_machine_rule_fallbacks)
{
	struct pc_topo *t;

	load_xml_list();
	t = open_xml(0);
	make_sysfs("eth7", "-1\n"); /* interface without NUMA information */
	expect_machine_rule(t);
	make_sysfs("eth7", "4097\n"); /* node the topology lacks */
	expect_machine_rule(t);
	make_sysfs("eth7", NULL); /* interface without a device directory */
	expect_machine_rule(t);
	make_sysfs(NULL, NULL); /* no GID 0 netdev */
	expect_machine_rule(t);
	make_sysfs("../x", "0\n"); /* never follow odd names out of the tree */
	expect_machine_rule(t);
	pc_topo_close(t);
}
END_TEST

/* ---- spill order on synthetic topologies ---- */

/*
 * Writes an XML of 4 packages x 2 cores, one node each, optionally with a
 * latency matrix in which node 0's nearest other node is 3, then 2.
 */
static void synthetic_xml(char *path, const char *desc, bool matrix)
{
	hwloc_topology_t h;
	int fd;

	ck_assert_int_eq(hwloc_topology_init(&h), 0);
	ck_assert_int_eq(hwloc_topology_set_synthetic(h, desc), 0);
	ck_assert_int_eq(hwloc_topology_load(h), 0);
	if (matrix) {
		hwloc_obj_t nodes[4];
		hwloc_uint64_t lat[16] = {
		    10, 40, 30, 20, 40, 10, 20, 30, 30, 20, 10, 40, 20, 30, 40, 10,
		};
		hwloc_distances_add_handle_t dh;

		for (int i = 0; i < 4; i++)
			nodes[i] = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, i);
		dh = hwloc_distances_add_create(
		    h, "test", HWLOC_DISTANCES_KIND_FROM_USER | HWLOC_DISTANCES_KIND_MEANS_LATENCY,
		    0);
		ck_assert_ptr_nonnull(dh);
		ck_assert_int_eq(hwloc_distances_add_values(h, dh, 4, nodes, lat, 0), 0);
		ck_assert_int_eq(hwloc_distances_add_commit(h, dh, 0), 0);
	}
	strcpy(path, "/tmp/pc-synth-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(hwloc_topology_export_xml(h, path, 0), 0);
	hwloc_topology_destroy(h);
}

static void expect_spill_nodes(const char *desc, bool matrix, const char *node, const int *want,
			       int nr)
{
	struct pc_plan_policy all = {.size = sizeof(all), .flags = PC_PLAN_NO_HOUSEKEEPING};
	const char *dev[] = {"rxe0"};
	char path[64];
	struct pc_topo *t;
	struct pc_plan *plan;

	synthetic_xml(path, desc, matrix);
	t = pc_topo_open_xml(path);
	ck_assert_ptr_nonnull(t);
	make_sysfs("eth0", node);
	ck_assert_int_eq(pc_topo_set_sysfs_root(t, sysroot), 0);
	ck_assert_int_eq(pc_plan_build(t, dev, 1, nr, &all, &plan), 0);
	for (int k = 0; k < nr; k++) {
		ck_assert_msg(plan->entries[k].numa_node == want[k],
			      "%s: worker %d on node %d, want %d", desc, k,
			      plan->entries[k].numa_node, want[k]);
		ck_assert_int_eq(plan->entries[k].local, k < 2);
	}
	pc_plan_destroy(plan);
	rm_sysfs();
	pc_topo_close(t);
	unlink(path);
}

START_TEST(test_spill_follows_distance_matrix)
{
	static const int by_matrix[] = {0, 0, 3, 3, 2, 2, 1, 1};
	static const int by_index[] = {0, 0, 1, 1, 2, 2, 3, 3};

	expect_spill_nodes("pack:4 [numa] core:2 pu:2", true, "0\n", by_matrix, 8);
	expect_spill_nodes("pack:4 [numa] core:2 pu:2", false, "0\n", by_index, 8);
}
END_TEST

START_TEST(test_spill_follows_tree_without_matrix)
{
	/* Node 2's group sibling is node 3; then the other group, lowest first. */
	static const int want[] = {2, 2, 3, 3, 0, 0, 1, 1};

	expect_spill_nodes("group:2 pack:2 [numa] core:2 pu:1", false, "2\n", want, 8);
}
END_TEST

/* ---- applying a plan on this host ---- */

START_TEST(test_bind_and_alloc_live)
{
	struct pc_topo *t = pc_topo_open(), *x;
	hwloc_bitmap_t mine = hwloc_bitmap_alloc();
	struct pc_plan_entry e = {.worker = 0, .device_name = "none"};
	struct pc_numa_where where;
	size_t size = 1 << 20;
	char *p;

	ck_assert_ptr_nonnull(t);
	ck_assert(pc_topo_is_thissystem(t));
	ck_assert_int_eq(hwloc_get_cpubind(pc_topo_hwloc(t), mine, HWLOC_CPUBIND_THREAD), 0);
	e.pu = hwloc_bitmap_last(mine); /* any PU this process may use */
	ck_assert_int_eq(pc_numa_bind_thread(t, &e), 0);
	ck_assert_int_eq(pc_numa_where(t, &where), 0);
	ck_assert_int_eq(where.pu, e.pu);
	ck_assert_int_ge(where.numa_node, 0);

	p = pc_numa_alloc(t, size, where.numa_node);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq((uintptr_t)p % 4096, 0);
	ck_assert_int_eq(p[0] | p[size - 1], 0);
	ck_assert_int_eq(pc_numa_mem_node(t, p, size), where.numa_node);
	pc_numa_free(t, p, size);

	/* unbound again: the thread may run on every PU it could before */
	ck_assert_int_eq(pc_numa_unbind_thread(t), 0);
	{
		hwloc_bitmap_t now = hwloc_bitmap_alloc();

		ck_assert_int_eq(hwloc_get_cpubind(pc_topo_hwloc(t), now, HWLOC_CPUBIND_THREAD), 0);
		ck_assert(hwloc_bitmap_isincluded(mine, now));
		hwloc_bitmap_free(now);
	}

	e.pu = 1 << 20;
	ck_assert_int_eq(pc_numa_bind_thread(t, &e), -EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_numa_alloc(t, 0, 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(pc_numa_alloc(t, 4096, 4097));
	ck_assert_int_eq(errno, EINVAL);

	/* An XML topology is another machine: no binding, but memory still works. */
	load_xml_list();
	x = open_xml(0);
	e.pu = 0;
	ck_assert_int_eq(pc_numa_bind_thread(x, &e), -EOPNOTSUPP);
	ck_assert_int_eq(pc_numa_unbind_thread(x), -EOPNOTSUPP);
	ck_assert_int_eq(pc_numa_where(x, &where), -EOPNOTSUPP);
	p = pc_numa_alloc(x, size, -1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p[size / 2], 0);
	ck_assert_int_eq(pc_numa_mem_node(x, p, size), -EOPNOTSUPP);
	pc_numa_free(x, p, size);
	p = pc_numa_alloc(x, size, 0);
	ck_assert_ptr_nonnull(p);
	pc_numa_free(x, p, size);
	pc_topo_close(x);

	hwloc_bitmap_free(mine);
	pc_topo_close(t);
}
END_TEST

START_TEST(test_live_devices_from_sysfs)
{
	struct pc_topo *t = pc_topo_open();
	char names[16][PC_NIC_NAME_MAX];
	struct pc_nic_locality loc;
	hwloc_obj_t node;
	char num[16];
	int n;

	ck_assert_ptr_nonnull(t);
	node = last_node(pc_topo_hwloc(t));
	snprintf(num, sizeof(num), "%u\n", node->os_index);
	make_sysfs("eth3", num);
	ck_assert_int_eq(pc_topo_set_sysfs_root(t, sysroot), 0);
	n = devices_of(t, names, 16);
	ck_assert_int_ge(n, 1);
	ck_assert_int_eq(pc_topo_nic_locality(t, "rxe0", &loc), 0);
	ck_assert_int_eq(loc.rule, PC_LOCALITY_NETDEV);
	ck_assert_int_eq(hwloc_bitmap_first(loc.nodeset), (int)node->os_index);
	pc_nic_locality_free(&loc);
	rm_sysfs();
	pc_topo_close(t);
}
END_TEST

static Suite *numa_suite(void)
{
	Suite *s = suite_create("numa");
	TCase *tc = tcase_create("planner");

	tcase_add_test(tc, test_xml_devices_placed_by_pci);
	tcase_add_test(tc, test_power9_mlx5_2_second_package_node_8);
	tcase_add_test(tc, test_hp_mlx4_0_interleaved_pus);
	tcase_add_test(tc, test_four_workers_four_local_cores);
	tcase_add_test(tc, test_more_than_local_cores_spills_marked);
	tcase_add_test(tc, test_too_many_workers_enospc);
	tcase_add_test(tc, test_devices_share_fairly_each_on_its_side);
	tcase_add_test(tc, test_housekeeping_override);
	tcase_add_test(tc, test_explicit_device_cpus);
	tcase_add_test(tc, test_bad_arguments);
	tcase_add_test(tc, test_unreadable_xml);
	tcase_add_test(tc, test_netdev_rule_from_sysfs);
	tcase_add_test(tc, test_machine_rule_fallbacks);
	tcase_add_test(tc, test_spill_follows_distance_matrix);
	tcase_add_test(tc, test_spill_follows_tree_without_matrix);
	tcase_add_test(tc, test_bind_and_alloc_live);
	tcase_add_test(tc, test_live_devices_from_sysfs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	pc_log_set_level(PC_LOG_WARN);
	return pc_test_run(numa_suite());
}
