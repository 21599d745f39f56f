/* SPDX-License-Identifier: MIT */
/*
 * pollcore/numa.h - NIC-local placement of workers and memory (hwloc).
 *
 * Three steps, all at setup time (nothing here is for the hot path):
 *  1. pc_topo_open() / pc_topo_open_xml(): a topology handle;
 *  2. pc_topo_nic_locality() and pc_plan_build(): where each RDMA device
 *     lives and which PU every worker should run on (a pure function of
 *     the topology, the device list, the worker count and the policy);
 *  3. pc_numa_bind_thread() and pc_numa_alloc(): each worker binds itself
 *     to its plan entry and allocates its buffers on its NUMA node.
 *
 * Indexes: every PU, core and NUMA node number in this API is the
 * operating system's index (hwloc os_index), never hwloc's logical index.
 * NUMA os indexes need not be contiguous (POWER9: 0 and 8), and on some
 * machines core os indexes are unique only within a package.
 *
 * Concurrency (one struct pc_topo shared by several threads):
 *
 *   call                          | who may call it
 *   ------------------------------+-------------------------------------------
 *   pc_topo_open*, pc_topo_close  | one thread, with no other call in flight
 *   pc_topo_set_sysfs_root        | before the handle is shared
 *   pc_topo_devices, _nic_locality| any thread, concurrently (read-only)
 *   pc_plan_build, pc_plan_destroy   | any thread, concurrently (read-only)
 *   pc_numa_bind_thread, _where   | any thread, for itself, concurrently
 *   pc_numa_alloc/_free/_mem_node | any thread, concurrently
 */
#ifndef POLLCORE_NUMA_H
#define POLLCORE_NUMA_H

#include <stdbool.h>
#include <stddef.h>

#include <hwloc.h>

#include <pollcore/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest RDMA device name kept (IB_DEVICE_NAME_MAX is 64 with the NUL). */
#define PC_NIC_NAME_MAX 64

struct pc_topo;

/**
 * pc_topo_open - topology of the machine this process runs on.
 *
 * I/O objects (PCI devices, OpenFabrics OS devices) are kept. Device
 * locality may fall back to sysfs (see pc_topo_nic_locality()).
 *
 * Any thread; hwloc reads /sys and /proc.
 *
 * Return: a handle to free with pc_topo_close(), or NULL with errno set:
 * ENOMEM, or hwloc's errno when discovery fails (EIO when it sets none).
 */
PC_API struct pc_topo *pc_topo_open(void);

/**
 * pc_topo_open_xml - topology read from an hwloc XML export.
 * @path: the XML file.
 *
 * Such a topology describes another machine: pc_numa_bind_thread() refuses
 * it, and sysfs is consulted only after pc_topo_set_sysfs_root().
 *
 * Any thread.
 *
 * Return: a handle to free with pc_topo_close(), or NULL with errno set
 * (ENOENT/EACCES when the file cannot be read, or another errno of
 * fopen(); EINVAL for a NULL @path or a file that is not a topology hwloc
 * accepts; ENOMEM); pc_last_error() names the file.
 */
PC_API struct pc_topo *pc_topo_open_xml(const char *path);

/**
 * pc_topo_close - free a topology handle.
 * @t: handle, or NULL.
 *
 * Plans built from @t must not be used with it afterwards. One thread, with
 * no other call on @t in flight.
 */
PC_API void pc_topo_close(struct pc_topo *t);

/**
 * pc_topo_hwloc - the underlying hwloc topology.
 * @t: handle.
 *
 * For read-only hwloc queries; it stays owned by @t. Any thread.
 *
 * Return: the hwloc topology.
 */
PC_API hwloc_topology_t pc_topo_hwloc(const struct pc_topo *t);

/**
 * pc_topo_is_thissystem - whether @t describes the running machine.
 * @t: handle.
 *
 * Any thread.
 *
 * Return: true for pc_topo_open(), false for an XML topology.
 */
PC_API bool pc_topo_is_thissystem(const struct pc_topo *t);

/**
 * pc_topo_set_sysfs_root - where the sysfs fallback reads from.
 * @t: handle.
 * @root: directory standing for /sys (e.g. a fake tree in tests), or NULL
 *        for the default: "/sys" for a live topology, none for XML.
 *
 * Call before sharing @t.
 *
 * Return: 0, or -ENOMEM.
 */
PC_API int pc_topo_set_sysfs_root(struct pc_topo *t, const char *root);

/**
 * pc_topo_devices - names of the RDMA devices known to @t.
 * @t: handle.
 * @names: array to fill, or NULL to count only.
 * @max: capacity of @names.
 *
 * Devices are the topology's OpenFabrics OS devices plus, when sysfs is
 * consulted, those of <sysfs>/class/infiniband that the topology lacks
 * (soft-RoCE). Sorted by name in natural order (mlx5_2 before mlx5_10).
 * Any thread.
 *
 * Return: the number of devices (may exceed @max; only @max are written),
 * or -ENOMEM.
 */
PC_API int pc_topo_devices(const struct pc_topo *t, char (*names)[PC_NIC_NAME_MAX], int max);

/* Which rule placed a device; see docs/placement.md. */
enum pc_locality_rule {
	PC_LOCALITY_PCI = 0, /* PCI parent in the topology */
	PC_LOCALITY_NETDEV,  /* NUMA node of its network interface (sysfs) */
	PC_LOCALITY_MACHINE, /* nothing known: the whole machine */
};

/**
 * struct pc_nic_locality - where one RDMA device lives.
 * @name: verbs device name.
 * @rule: rule that placed it.
 * @nodeset: its local NUMA nodes (bits are NUMA os indexes), allowed only.
 * @cpuset: its local PUs (bits are PU os indexes), allowed only.
 *
 * Release with pc_nic_locality_free().
 */
struct pc_nic_locality {
	char name[PC_NIC_NAME_MAX];
	enum pc_locality_rule rule;
	hwloc_nodeset_t nodeset;
	hwloc_cpuset_t cpuset;
};

/**
 * pc_topo_nic_locality - find where an RDMA device lives.
 * @t: handle.
 * @name: verbs device name (e.g. "mlx5_0", "rxe0").
 * @loc: filled on success.
 *
 * Rules, in order: pci - the device's OpenFabrics OS device has a PCI
 * parent: its nearest non-I/O ancestor gives the local NUMA nodes
 * (hwloc_get_local_numanode_objs()) and PUs; netdev - otherwise the NUMA
 * node of the interface in <sysfs>/class/infiniband/@name/ports/1/
 * gid_attrs/ndevs/0, read from <sysfs>/class/net/<if>/device/numa_node;
 * machine - otherwise every allowed PU and node. Any thread.
 *
 * Return: 0, -ENODEV when @name is neither in the topology nor in sysfs,
 * -EINVAL for a NULL or too long @name, -ENOMEM.
 */
PC_API int pc_topo_nic_locality(const struct pc_topo *t, const char *name,
				 struct pc_nic_locality *loc);

/**
 * pc_nic_locality_free - free what pc_topo_nic_locality() allocated.
 * @loc: filled locality, or one zeroed; may be released twice.
 */
PC_API void pc_nic_locality_free(struct pc_nic_locality *loc);

/**
 * pc_locality_rule_str - "pci", "netdev" or "machine".
 * @rule: rule.
 *
 * Return: a static string.
 */
PC_API const char *pc_locality_rule_str(enum pc_locality_rule rule);

/* pc_plan_policy.flags */
enum {
	/* Use every allowed core, the housekeeping one(s) included. */
	PC_PLAN_NO_HOUSEKEEPING = 1u << 0,
	/* Once every free core has a worker, put more on SMT siblings. */
	PC_PLAN_ALLOW_SMT = 1u << 1,
};

/**
 * struct pc_plan_policy - how pc_plan_build() chooses PUs.
 * @size: sizeof(struct pc_plan_policy) as the caller compiled it: required
 *        (fields are only added at the end; see pc_engine_params' @size).
 * @flags: PC_PLAN_* flags.
 * @housekeeping: PUs (os indexes) kept for the rest of the application:
 *                every core with a PU in it is left out. NULL means the
 *                first allowed core of the machine. Ignored with
 *                PC_PLAN_NO_HOUSEKEEPING.
 * @device_cpus: NULL, or one entry per device: NULL lets the planner place
 *               that device's workers; a cpuset (PU os indexes) places them
 *               there instead, worker k on the k-th lowest PU (extra PUs
 *               are unused). Such PUs must be allowed, and no PU may be
 *               given to two devices; housekeeping does not apply to them.
 *               Their cores are taken away from the planned workers.
 *
 * A NULL policy is the default (all zero).
 */
struct pc_plan_policy {
	uint32_t size;
	unsigned int flags;
	hwloc_const_cpuset_t housekeeping;
	const hwloc_const_cpuset_t *device_cpus;
};

/* Why a worker is where it is. */
enum pc_plan_reason {
	PC_PLAN_LOCAL = 0,   /* a free core local to its device */
	PC_PLAN_SPILL_FULL,  /* every local core taken: nearest other node */
	PC_PLAN_SMT_SIBLING, /* every core taken: SMT sibling (ALLOW_SMT) */
	PC_PLAN_EXPLICIT,    /* on a PU the caller gave (device_cpus) */
};

/**
 * struct pc_plan_entry - where one worker runs.
 * @worker: index of the worker in the plan (0..nr_entries-1).
 * @device: index of its device in the list given to pc_plan_build().
 * @device_name: its device's name.
 * @pu: PU os index to bind to.
 * @core: os index of that PU's core (-1 if the topology has no cores).
 * @core_logical: hwloc logical index of the core; unique machine-wide.
 * @numa_node: os index of the PU's NUMA node: allocate its memory there.
 * @local: whether @pu is among the device's local PUs.
 * @reason: why it is there; see pc_plan_reason_str().
 */
struct pc_plan_entry {
	unsigned int worker;
	unsigned int device;
	char device_name[PC_NIC_NAME_MAX];
	int pu;
	int core;
	int core_logical;
	int numa_node;
	bool local;
	enum pc_plan_reason reason;
};

/**
 * struct pc_plan - the result of pc_plan_build().
 * @nr_entries: number of workers placed.
 * @entries: grouped by device: entry d * workers_per_device + k is worker k
 *            of device d.
 */
struct pc_plan {
	unsigned int nr_entries;
	struct pc_plan_entry entries[];
};

/**
 * pc_plan_build - place @workers_per_device workers for each device.
 * @t: topology.
 * @devices: verbs device names (not necessarily present on this host
 *           when @t comes from XML).
 * @nr_devices: number of @devices, at least 1.
 * @workers_per_device: workers for each device, at least 1.
 * @policy: policy, or NULL for the default.
 * @out: set to the plan, to free with pc_plan_destroy().
 *
 * Deterministic: the same inputs always give the same plan. Each worker
 * gets its own physical core (its first allowed PU); cores local to its
 * device come first, shared round-robin between devices on the same side;
 * then the nearest other NUMA node (hwloc's latency matrix when the
 * topology has one, else the topology tree) with a free core. Any thread.
 *
 * Devices with @policy->device_cpus are placed first, exactly there.
 *
 * Return: 0; -EINVAL for bad arguments (including a @policy whose @size
 * is below the first layout's, a device named twice, and a device_cpus
 * set that is empty, smaller than @workers_per_device, outside the allowed
 * PUs or shared with another device); -E2BIG for a @policy larger than
 * this library's with unknown bytes set; -ENODEV for an unknown device;
 * -ENOSPC when the workers outnumber the available cores (or PUs with
 * PC_PLAN_ALLOW_SMT); -ENOMEM. pc_last_error() says why.
 */
PC_API int pc_plan_build(const struct pc_topo *t, const char *const *devices,
			 unsigned int nr_devices, unsigned int workers_per_device,
			 const struct pc_plan_policy *policy, struct pc_plan **out);

/**
 * pc_plan_destroy - free a plan.
 * @plan: plan, or NULL.
 */
PC_API void pc_plan_destroy(struct pc_plan *plan);

/**
 * pc_plan_reason_str - short explanation of a placement reason.
 * @reason: reason.
 *
 * Return: a static string.
 */
PC_API const char *pc_plan_reason_str(enum pc_plan_reason reason);

/**
 * pc_numa_bind_thread - bind the calling thread to its plan entry's PU.
 * @t: live topology (pc_topo_open()).
 * @e: the entry.
 *
 * Binds with hwloc_set_cpubind(HWLOC_CPUBIND_THREAD), then checks with
 * hwloc_get_last_cpu_location() that the thread runs there. Call it from
 * the worker thread itself, before allocating its memory.
 *
 * Return: 0; -EOPNOTSUPP when @t is not this machine (XML); -EINVAL when
 * the PU is not in @t; the negative errno of a refused binding (-EINVAL or
 * -EPERM outside the process's cpuset); -EIO when the check finds the
 * thread elsewhere, or a binding or check failed without an errno;
 * -ENOMEM.
 */
PC_API int pc_numa_bind_thread(const struct pc_topo *t, const struct pc_plan_entry *e);

/**
 * pc_numa_unbind_thread - undo pc_numa_bind_thread(): the calling thread
 * may run on every PU the process is allowed again.
 * @t: live topology (pc_topo_open()).
 *
 * The thread itself.
 *
 * Return: 0; -EOPNOTSUPP when @t is not this machine (XML); the negative
 * errno of a refused binding (-EINVAL, -EPERM; -EIO without one).
 */
PC_API int pc_numa_unbind_thread(const struct pc_topo *t);

/**
 * struct pc_numa_where - where the calling thread last ran.
 * @pu: PU os index.
 * @numa_node: NUMA node os index of that PU (-1 if unknown).
 */
struct pc_numa_where {
	int pu;
	int numa_node;
};

/**
 * pc_numa_where - report where the calling thread last ran.
 * @t: live topology.
 * @out: filled on success.
 *
 * Any thread, for itself.
 *
 * Return: 0, -EOPNOTSUPP for an XML topology, -ENOMEM, or the negative
 * errno of hwloc_get_last_cpu_location() (-EIO when it sets none).
 */
PC_API int pc_numa_where(const struct pc_topo *t, struct pc_numa_where *out);

/**
 * pc_numa_alloc - allocate zeroed memory on a NUMA node.
 * @t: topology.
 * @size: bytes, > 0.
 * @numa_node: NUMA os index (e.g. pc_plan_entry.numa_node), or -1 for no
 *             preference.
 *
 * Tries hwloc_alloc_membind(HWLOC_MEMBIND_BIND, strict); when the binding
 * cannot be enforced (XML topology, no NUMA support, restricted process)
 * it falls back to a plain page-aligned allocation and logs it once. The
 * pages are touched (zeroed) before return, so they are placed now; check
 * with pc_numa_mem_node(). Any thread; not for the hot path.
 *
 * Return: page-aligned memory to free with pc_numa_free(), or NULL with
 * errno set (EINVAL for size 0 or a node not in @t, ENOMEM).
 */
PC_API void *pc_numa_alloc(const struct pc_topo *t, size_t size, int numa_node);

/**
 * pc_numa_free - free memory from pc_numa_alloc().
 * @t: the topology it was allocated with.
 * @p: memory, or NULL.
 * @size: the size given to pc_numa_alloc().
 */
PC_API void pc_numa_free(const struct pc_topo *t, void *p, size_t size);

/**
 * pc_numa_mem_node - NUMA node holding a memory area.
 * @t: live topology.
 * @p: start of the area (its pages must have been touched).
 * @size: length in bytes.
 *
 * Uses hwloc_get_area_memlocation(). Any thread.
 *
 * Return: the NUMA os index when the whole area is on one node; -EXDEV when
 * it spans several; -ENODATA when none of its pages is in memory;
 * -EOPNOTSUPP for an XML topology; -ENOMEM; the negative errno of
 * hwloc_get_area_memlocation() when the location cannot be queried (-EIO
 * when it sets none).
 */
PC_API int pc_numa_mem_node(const struct pc_topo *t, const void *p, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* POLLCORE_NUMA_H */
