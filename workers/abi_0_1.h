/* SPDX-License-Identifier: MIT */
/*
 * The parameter structures of version 0.1 of the library, frozen as 0.1
 * programs were compiled with them: what workers/compat.c converts, and
 * what tests/test_abi_0_1.c, a program of 0.1, is built with. Never change
 * them.
 */
#ifndef PC_ABI_0_1_H
#define PC_ABI_0_1_H

#include <stdbool.h>
#include <stdint.h>

#include <hwloc.h>

#include <pollcore/engine.h>
#include <pollcore/pool.h>

struct pc_device_params_0_1 {
	uint8_t port;
	const char *cpus;
};

struct pc_engine_params_0_1 {
	const char *const *devices;
	const struct pc_device_params_0_1 *device_params;
	unsigned int workers_per_device;
	enum pc_handoff handoff;
	unsigned int app_threads;
	uint32_t msg_size;
	uint32_t rx_bufs;
	uint32_t tx_bufs;
	uint32_t srq_depth;
	uint32_t srq_watermark;
	uint32_t sq_depth;
	uint32_t max_inline;
	uint32_t signal_every;
	uint32_t poll_batch;
	uint32_t window;
	uint32_t min_window;
	uint32_t raw_bufs;
	uint32_t ring_size;
	uint32_t max_conns_per_worker;
	uint32_t max_unanswered;
	uint32_t max_msg_size;
	uint64_t large_pool_size;
	enum pc_idle idle;
	uint32_t idle_spins;
	uint32_t grant_delay_us;
	uint32_t keepalive_ms;
	bool no_numa;
	const char *housekeeping_pus;
	int (*choose_worker)(const char *device, unsigned int nworkers, void *arg);
	void (*on_conn)(struct pc_conn *conn, enum pc_conn_event ev, void *arg);
	int (*on_request)(struct pc_conn_request *req, void *arg);
	void (*on_msg)(struct pc_msg *msg, void *arg);
	bool (*on_large)(struct pc_conn *conn, uint32_t len, uint8_t type, uint64_t req_id,
			 struct pc_large_buf *buf, void *arg);
	void *arg;
};

struct pc_pool_params_0_1 {
	const char *name;
	uint32_t nbufs;
	uint32_t buf_size;
	struct ibv_pd *pd;
	int access;
	const struct pc_pool_allocator *allocator;
};

struct pc_plan_policy_0_1 {
	unsigned int flags;
	hwloc_const_cpuset_t housekeeping;
	const hwloc_const_cpuset_t *device_cpus;
};

#endif /* PC_ABI_0_1_H */
