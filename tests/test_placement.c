// SPDX-License-Identifier: MIT
/*
 * rdma suite: the engine's placement overrides and per-device port
 * (pc_engine_params.housekeeping_pus, pc_device_params.cpus and .port).
 * A worker's PU is read back from pc_engine_stats(), which reports it only
 * once the worker thread was bound there and found itself running there
 * (pc_numa_bind_thread()). Expected PUs come from the machine's own
 * topology, so the tests hold on any test bed with two cores.
 */
#include <pollcore/engine.h>
#include <pollcore/numa.h>

#include <stdio.h>

#include "pc_test.h"

static const char *devs[2];
static struct pc_topo *topo;
static int pu_first, pu_second;	/* the first two allowed PUs, on different cores */

static void setup(void)
{
	hwloc_topology_t h;
	hwloc_const_cpuset_t allowed;
	hwloc_obj_t pu, core;

	devs[0] = pc_test_device();
	topo = pc_topo_open();
	ck_assert_msg(topo, "pc_topo_open: %s", pc_last_error());
	h = pc_topo_hwloc(topo);
	allowed = hwloc_topology_get_allowed_cpuset(h);
	pu_first = hwloc_bitmap_first(allowed);
	ck_assert_int_ge(pu_first, 0);
	/* the next allowed PU outside the first one's core */
	pu = hwloc_get_pu_obj_by_os_index(h, (unsigned int)pu_first);
	core = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_CORE, pu);
	pu_second = pu_first;
	do
		pu_second = hwloc_bitmap_next(allowed, pu_second);
	while (pu_second >= 0 && core && hwloc_bitmap_isset(core->cpuset, pu_second));
	ck_assert_msg(pu_second >= 0, "these tests need two cores");
}

static void teardown(void)
{
	pc_topo_close(topo);
}

static void on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	pc_msg_release(m);
}

/* @port 0 means the test bed's port (PC_TEST_PORT). */
static struct pc_engine *create(unsigned int workers, const char *cpus, const char *hk,
				uint8_t port)
{
	struct pc_device_params dp = {
	    .size = sizeof(dp), .port = port ? port : pc_test_port(), .cpus = cpus};
	struct pc_engine_params p = {
	    .size = sizeof(p),
	    .devices = devs,
	    .device_params = &dp,
	    .workers_per_device = workers,
	    .housekeeping_pus = hk,
	    .on_msg = on_msg,
	};

	return pc_engine_create(&p);
}

static int worker_pu(struct pc_engine *e, unsigned int w)
{
	struct pc_worker_stats st;

	ck_assert_int_eq(pc_engine_stats(e, w, &st), 0);
	return st.pu;
}

/* The PU the planner gives one worker of the test device under @pol. */
static int planned_pu(const struct pc_plan_policy *pol)
{
	struct pc_plan *plan;
	int pu;

	ck_assert_msg(pc_plan_build(topo, devs, 1, 1, pol, &plan) == 0, "%s", pc_last_error());
	pu = plan->entries[0].pu;
	pc_plan_destroy(plan);
	return pu;
}

START_TEST(test_explicit_cpus)
{
	char list[32];
	struct pc_engine *e;

	/* the second core: where the planner might have gone anyway */
	snprintf(list, sizeof(list), "%d", pu_second);
	e = create(1, list, NULL, 0);
	ck_assert_msg(e, "%s", pc_last_error());
	ck_assert_int_eq(worker_pu(e, 0), pu_second);
	pc_engine_destroy(e);

	/* the first core: housekeeping by default, yet taken when asked for */
	snprintf(list, sizeof(list), "%d", pu_first);
	e = create(1, list, NULL, 0);
	ck_assert_msg(e, "%s", pc_last_error());
	ck_assert_int_eq(worker_pu(e, 0), pu_first);
	pc_engine_destroy(e);

	/* two workers in list order, lowest first, whatever order they are written in */
	snprintf(list, sizeof(list), "%d,%d", pu_second, pu_first);
	e = create(2, list, NULL, 0);
	ck_assert_msg(e, "%s", pc_last_error());
	ck_assert_int_eq(worker_pu(e, 0), pu_first);
	ck_assert_int_eq(worker_pu(e, 1), pu_second);
	pc_engine_destroy(e);
}
END_TEST

START_TEST(test_housekeeping)
{
	struct pc_plan_policy none = { .size = sizeof(none) }, hk = { .size = sizeof(hk) };
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	int dflt, moved;
	char list[32];
	struct pc_engine *e;

	/* keep the default choice's PU for housekeeping: the worker must move */
	dflt = planned_pu(NULL);
	hwloc_bitmap_only(set, (unsigned int)dflt);
	hk.housekeeping = set;
	moved = planned_pu(&hk);
	ck_assert_int_ne(moved, dflt);
	snprintf(list, sizeof(list), "%d", dflt);
	e = create(1, NULL, list, 0);
	ck_assert_msg(e, "%s", pc_last_error());
	ck_assert_int_eq(worker_pu(e, 0), moved);
	pc_engine_destroy(e);

	/* "" keeps nothing back: the same plan as an empty housekeeping set */
	hwloc_bitmap_zero(set);
	none.housekeeping = set;
	e = create(1, NULL, "", 0);
	ck_assert_msg(e, "%s", pc_last_error());
	ck_assert_int_eq(worker_pu(e, 0), planned_pu(&none));
	pc_engine_destroy(e);
	hwloc_bitmap_free(set);
}
END_TEST

START_TEST(test_bad_overrides)
{
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = devs,
		.housekeeping_pus = "0",
		.no_numa = true,
		.on_msg = on_msg,
	};
	char list[32];

	errno = 0;
	ck_assert_ptr_null(create(1, "one", NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "'one' is not a list of PUs"));
	ck_assert_ptr_null(create(1, NULL, "0-", 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "housekeeping_pus"));
	/* more workers than PUs given */
	snprintf(list, sizeof(list), "%d", pu_first);
	ck_assert_ptr_null(create(2, list, NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "1 PUs given for 2 workers"));
	/* a PU this machine does not have */
	ck_assert_ptr_null(create(1, "100000", NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "PU 100000 is not an allowed PU"));
	/* placement asked for, and no_numa */
	ck_assert_ptr_null(pc_engine_create(&p));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "no_numa"));
}
END_TEST

START_TEST(test_port)
{
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = devs,
		.on_msg = on_msg,
		.no_numa = true,
	};
	struct pc_engine *e;

	/* no device params: port 1 (the test bed's port must be 1 for this one) */
	if (pc_test_port() == 1) {
		e = pc_engine_create(&p);
		ck_assert_msg(e, "%s", pc_last_error());
		pc_engine_destroy(e);
	}
	/* a port the device does not have is refused, by number */
	errno = 0;
	ck_assert_ptr_null(create(1, NULL, NULL, 9));
	ck_assert_int_eq(errno, ENODEV);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "port 9"));
}
END_TEST

int main(void)
{
	Suite *s;

	pc_test_require_rdma();
	s = suite_create("placement");
	TCase *tc = tcase_create("engine");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_explicit_cpus);
	tcase_add_test(tc, test_housekeeping);
	tcase_add_test(tc, test_bad_overrides);
	tcase_add_test(tc, test_port);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
