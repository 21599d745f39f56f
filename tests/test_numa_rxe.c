// SPDX-License-Identifier: MIT
/*
 * rdma suite (soft-RoCE VM): every soft-RoCE device has no PCI parent, so it
 * is placed by rule netdev or machine, and says which; a one-worker plan is
 * then applied for real (bind + NUMA-local memory). Skips on a host without
 * RDMA devices.
 */
#include <pollcore/common.h>
#include <pollcore/numa.h>

#include "pc_test.h"

#include <limits.h>
#include <sys/stat.h>

/* The NUMA node sysfs gives @dev's network interface, or -1 (read here, not by numa/). */
static int sysfs_netdev_node(const char *dev)
{
	char path[512], ifname[64] = "", num[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%.63s/ports/1/gid_attrs/ndevs/0", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fscanf(f, "%63s", ifname))
		ifname[0] = '\0';
	fclose(f);
	snprintf(path, sizeof(path), "/sys/class/net/%s/device/numa_node", ifname);
	f = ifname[0] ? fopen(path, "r") : NULL;
	if (!f)
		return -1;
	if (!fgets(num, sizeof(num), f))
		num[0] = '\0';
	fclose(f);
	return num[0] ? atoi(num) : -1;
}

static bool has_pci_parent(const char *dev)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%.63s/device", dev);
	return stat(path, &st) == 0;
}

static void check_tool_says(const char *dev, const char *rule)
{
	const char *root = getenv("PC_BUILD_ROOT");
	char cmd[PATH_MAX + 128], out[8192] = "", want[64];
	size_t len;
	FILE *p;

	if (!root)
		return;
	snprintf(cmd, sizeof(cmd), "%s/tools/pollcore-topo --device %s --json", root, dev);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	ck_assert_int_eq(pclose(p), 0);
	snprintf(want, sizeof(want), "\"locality\": \"%s\"", rule);
	ck_assert_msg(strstr(out, want), "pollcore-topo says %s, want %s", out, want);
}

START_TEST(test_soft_roce_placed_by_netdev_or_machine)
{
	struct pc_topo *t = pc_topo_open();
	hwloc_topology_t h;
	char names[32][PC_NIC_NAME_MAX];
	int n, nr_virtual = 0;

	ck_assert_ptr_nonnull(t);
	h = pc_topo_hwloc(t);
	n = pc_topo_devices(t, names, 32);
	ck_assert_int_ge(n, 1);
	for (int i = 0; i < PC_MIN(n, 32); i++) {
		const char *dev[] = {names[i]};
		struct pc_nic_locality loc;
		struct pc_plan *plan;
		int node = sysfs_netdev_node(names[i]), mem;
		size_t size = 1 << 20;
		void *buf;

		ck_assert_int_eq(pc_topo_nic_locality(t, names[i], &loc), 0);
		if (has_pci_parent(names[i])) {
			pc_nic_locality_free(&loc);
			continue;
		}
		nr_virtual++;
		if (node >= 0 && hwloc_get_numanode_obj_by_os_index(h, node)) {
			ck_assert_int_eq(loc.rule, PC_LOCALITY_NETDEV);
			ck_assert_int_eq(hwloc_bitmap_weight(loc.nodeset), 1);
			ck_assert_int_eq(hwloc_bitmap_first(loc.nodeset), node);
		} else {
			ck_assert_int_eq(loc.rule, PC_LOCALITY_MACHINE);
			ck_assert(
			    hwloc_bitmap_isequal(loc.cpuset, hwloc_topology_get_allowed_cpuset(h)));
		}
		printf("%s: placed by rule %s\n", names[i], pc_locality_rule_str(loc.rule));
		check_tool_says(names[i], pc_locality_rule_str(loc.rule));

		/* Apply a one-worker plan for real; a 1-CPU VM has no core to spare. */
		if (pc_plan_build(t, dev, 1, 1, NULL, &plan) == -ENOSPC) {
			struct pc_plan_policy all = {.size = sizeof(all), .flags = PC_PLAN_NO_HOUSEKEEPING};

			ck_assert_int_eq(pc_plan_build(t, dev, 1, 1, &all, &plan), 0);
		}
		ck_assert(plan->entries[0].local);
		ck_assert_int_eq(pc_numa_bind_thread(t, &plan->entries[0]), 0);
		buf = pc_numa_alloc(t, size, plan->entries[0].numa_node);
		ck_assert_ptr_nonnull(buf);
		mem = pc_numa_mem_node(t, buf, size);
		ck_assert_int_eq(mem, plan->entries[0].numa_node);
		pc_numa_free(t, buf, size);
		pc_plan_destroy(plan);
		pc_nic_locality_free(&loc);
	}
	if (pc_test_in_vm())
		ck_assert_msg(nr_virtual > 0, "no soft-RoCE device among %d", n);
	pc_topo_close(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("numa_rxe");
	TCase *tc = tcase_create("rxe");

	pc_test_require_rdma();
	tcase_add_test(tc, test_soft_roce_placed_by_netdev_or_machine);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
