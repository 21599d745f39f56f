// SPDX-License-Identifier: MIT
/*
 * Programs linked against version 0.1 of the library (POLLCORE_0.1 in
 * workers/libpollcore.map) keep running against this one: the functions
 * whose arguments or structures changed in 0.2 keep their 0.1 entry points
 * here, under the 0.1 version of their names (core/abi_pvt.h's PC_SYMVER),
 * and convert to what the library takes now.
 *
 *   0.1 function     | what changed in 0.2
 *   -----------------+---------------------------------------------------
 *   pc_engine_create | struct pc_engine_params and pc_device_params
 *                    | carry their size first; max_calls added at the end
 *   pc_call          | the deadline in microseconds (0.1: milliseconds)
 *   pc_pool_create   | struct pc_pool_params carries its size first
 *   pc_plan_build    | struct pc_plan_policy carries its size first
 *
 * What 0.1 programs see differently (docs/api.md, "Versions"): nothing is
 * refused for lack of ring room any more (-ENOBUFS from pc_send() and the
 * like never comes), pc_call() queues beyond the window instead of
 * -EAGAIN, and request ids are no longer consecutive.
 *
 * Any thread, as the functions they stand for.
 */
#include "engine_pvt.h"
#include "abi_0_1.h"
#include "abi_pvt.h"

#include <stdlib.h>
#include <string.h>

/* 0.2's layout is 0.1's with the size in front and new fields behind: one copy moves it */
static_assert(offsetof(struct pc_engine_params, max_calls) ==
		      offsetof(struct pc_engine_params, devices) +
			      sizeof(struct pc_engine_params_0_1),
	      "pc_engine_params 0.2 = size, the 0.1 fields in their order, then what is new");
static_assert(offsetof(struct pc_engine_params, arg) - offsetof(struct pc_engine_params, devices) ==
		      offsetof(struct pc_engine_params_0_1, arg),
	      "the 0.1 fields keep their relative offsets");

/* --- the 0.1 entry points ------------------------------------------------------------------ */

PC_API struct pc_engine *pc_engine_create_0_1(const struct pc_engine_params_0_1 *old);
PC_SYMVER(pc_engine_create_0_1, pc_engine_create, "POLLCORE_0.1");

struct pc_engine *pc_engine_create_0_1(const struct pc_engine_params_0_1 *old)
{
	struct pc_device_params *dp = NULL;
	struct pc_engine_params p;
	struct pc_engine *e;
	unsigned int n = 1, k;

	if (!old) {
		errno = EINVAL;
		return NULL;
	}
	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	memcpy(&p.devices, old, sizeof(*old));
	/* one entry per device named (one when none is) */
	if (old->device_params) {
		for (n = 0; old->devices && old->devices[n]; n++)
			;
		n = n ? n : 1;
		dp = calloc(n, sizeof(*dp));
		if (!dp)
			return NULL;
		for (k = 0; k < n; k++)
			dp[k] = (struct pc_device_params){ .size = sizeof(*dp),
							   .port = old->device_params[k].port,
							   .cpus = old->device_params[k].cpus };
		p.device_params = dp;
	}
	e = pc_engine_create(&p);
	/* read during the call only */
	free(dp);
	return e;
}

PC_API int pc_call_0_1(struct pc_msg *msg, pc_call_fn done, void *arg, uint32_t timeout_ms,
		       uint64_t *req_id);
PC_SYMVER(pc_call_0_1, pc_call, "POLLCORE_0.1");

int pc_call_0_1(struct pc_msg *msg, pc_call_fn done, void *arg, uint32_t timeout_ms,
		uint64_t *req_id)
{
	return pc_call(msg, done, arg, (uint64_t)timeout_ms * 1000, req_id);
}

PC_API struct pc_pool *pc_pool_create_0_1(const struct pc_pool_params_0_1 *old);
PC_SYMVER(pc_pool_create_0_1, pc_pool_create, "POLLCORE_0.1");

struct pc_pool *pc_pool_create_0_1(const struct pc_pool_params_0_1 *old)
{
	struct pc_pool_params p;

	if (!old) {
		errno = EINVAL;
		return NULL;
	}
	p = (struct pc_pool_params){ .size = sizeof(p), .name = old->name, .nbufs = old->nbufs,
				     .buf_size = old->buf_size, .pd = old->pd,
				     .access = old->access, .allocator = old->allocator };
	return pc_pool_create(&p);
}

PC_API int pc_plan_build_0_1(const struct pc_topo *t, const char *const *devices,
			     unsigned int nr_devices, unsigned int workers_per_device,
			     const struct pc_plan_policy_0_1 *old, struct pc_plan **out);
PC_SYMVER(pc_plan_build_0_1, pc_plan_build, "POLLCORE_0.1");

int pc_plan_build_0_1(const struct pc_topo *t, const char *const *devices,
		      unsigned int nr_devices, unsigned int workers_per_device,
		      const struct pc_plan_policy_0_1 *old, struct pc_plan **out)
{
	struct pc_plan_policy p = { .size = sizeof(p) };

	if (old) {
		p.flags = old->flags;
		p.housekeeping = old->housekeeping;
		p.device_cpus = old->device_cpus;
	}
	return pc_plan_build(t, devices, nr_devices, workers_per_device, &p, out);
}
