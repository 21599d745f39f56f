// SPDX-License-Identifier: MIT
/*
 * Engine lifecycle (parameters, devices, placement, workers, control
 * thread) and introspection. The application's calls on messages are in
 * submit.c, memory registration in mem.c.
 */
#include "engine_pvt.h"
#include "rndv_pvt.h"
#include "abi_pvt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log_pvt.h"

/*
 * The layouts that carry a size first appeared in 0.2: none is smaller.
 * The first sized layout ended at max_calls (its size counted the tail
 * padding): idle_spin_us starts past it, so a program built against that
 * header never has its padding read as a field. pad0 is that padding.
 */
#define ENGINE_PARAMS_BASE offsetof(struct pc_engine_params, idle_spin_us)
static_assert(offsetof(struct pc_engine_params, idle_spin_us) ==
		      offsetof(struct pc_engine_params, max_calls) + 8,
	      "idle_spin_us must start past the first 0.2 layout, padding included");
#define DEVICE_PARAMS_BASE sizeof(struct pc_device_params)

/* Device @k's parameters (@dp: the caller's array, entries of dp[0].size bytes), or NULL. */
static const struct pc_device_params *device_param(const struct pc_engine *e, unsigned int k)
{
	return e->devp ? &e->devp[k] : NULL;
}

/* The caller's device parameters, one entry per device, copied (read during pc_engine_create()). */
static int device_params_copy(struct pc_engine *e)
{
	const char *base = (const char *)e->p.device_params;
	unsigned int k;
	size_t stride;
	int ret;

	if (!base)
		return 0;
	stride = e->p.device_params[0].size;
	e->devp = calloc(e->ndevs, sizeof(*e->devp));
	if (!e->devp)
		return -ENOMEM;
	for (k = 0; k < e->ndevs; k++) {
		const struct pc_device_params *d = (const void *)(base + k * stride);

		if (d->size != stride)
			return set_error(-EINVAL, "device_params[%u]: size %u, entry 0 says %zu",
					 k, d->size, stride);
		ret = abi_copy(&e->devp[k], sizeof(e->devp[k]), d, stride, DEVICE_PARAMS_BASE,
				  "pc_device_params");
		if (ret)
			return ret;
	}
	return 0;
}

#define DEFAULT(f, v) \
	do { \
		if (!p->f) \
			p->f = (v); \
	} while (0)

static int params_normalise(struct pc_engine_params *p)
{
	DEFAULT(workers_per_device, 1);
	DEFAULT(app_threads, 1);
	DEFAULT(msg_size, 4096);
	DEFAULT(rx_bufs, 1024);
	DEFAULT(tx_bufs, 1024);
	if (p->raw_bufs >= p->rx_bufs)
		return set_error(-EINVAL, "raw_bufs %u leaves no receive buffer of %u for the SRQ",
				    p->raw_bufs, p->rx_bufs);
	DEFAULT(srq_depth, p->rx_bufs - p->raw_bufs);
	DEFAULT(srq_watermark, p->srq_depth / 4 ? p->srq_depth / 4 : 1);
	DEFAULT(sq_depth, 256);
	/* a 64-byte payload with its header (WIRE_HDR_LEN) goes inline */
	DEFAULT(max_inline, 128);
	DEFAULT(signal_every, 16);
	DEFAULT(poll_batch, 32);
	DEFAULT(window, PC_WINDOW_DEFAULT);
	DEFAULT(min_window, 1);
	DEFAULT(ring_size, 1024);
	DEFAULT(max_conns_per_worker, 1024);
	DEFAULT(max_unanswered, p->window);
	if (p->max_unanswered > p->window)
		return set_error(-EINVAL, "max_unanswered %u exceeds window %u: unanswered calls "
				 "hold places of the window, so it could never be reached",
				 p->max_unanswered, p->window);
	DEFAULT(max_calls, 2 * p->window);
	DEFAULT(max_msg_size, PC_MAX_MSG_DEFAULT);
	if (p->max_msg_size < p->msg_size)
		p->max_msg_size = p->msg_size;
	if (p->max_msg_size > (1u << 31))
		return set_error(-EINVAL, "max_msg_size %u exceeds 2 GiB", p->max_msg_size);
	if (p->max_msg_size > p->msg_size) {
		DEFAULT(large_pool_size, 2ull * p->max_msg_size);
		if (p->large_pool_size < p->max_msg_size)
			return set_error(-EINVAL, "large_pool_size %llu is below max_msg_size %u: "
					    "the largest message could never be received",
					    (unsigned long long)p->large_pool_size, p->max_msg_size);
	}
	/*
	 * a call's id names its buffer among the worker's messages (worker_pvt.h),
	 * each receive buffer's packed frames included (WIRE_PACK_MAX per buffer)
	 */
	if ((uint64_t)p->rx_bufs * WIRE_PACK_MAX + p->tx_bufs + p->raw_bufs +
		    (p->max_msg_size > p->msg_size ? p->large_pool_size >> 16 : 0) + 128 >
	    (1u << CALL_GIDX_BITS))
		return set_error(-EINVAL, "rx_bufs %u (each counting %u, for packed messages), "
				 "tx_bufs %u, raw_bufs %u and a large pool of "
				 "%llu MiB make more than %u buffers per worker",
				 p->rx_bufs, WIRE_PACK_MAX, p->tx_bufs, p->raw_bufs,
				 (unsigned long long)(p->large_pool_size >> 20), 1u << CALL_GIDX_BITS);
	/* the time rule unless only a count was asked for (engine.h: precedence) */
	if (!p->idle_spins)
		DEFAULT(idle_spin_us, PC_IDLE_SPIN_US_DEFAULT);
	if (p->idle_spin_us > 1000u * 1000)
		return set_error(-EINVAL, "idle_spin_us %u exceeds 1 s", p->idle_spin_us);
	DEFAULT(grant_delay_us, PC_GRANT_DELAY_DEFAULT_US);
	if (p->grant_delay_us > 10u * 1000 * 1000)
		return set_error(-EINVAL, "grant_delay_us %u exceeds 10 s", p->grant_delay_us);
	DEFAULT(keepalive_ms, PC_KEEPALIVE_DEFAULT_MS);
	p->sq_depth = (uint32_t)pc_align_pow2(p->sq_depth);
	p->ring_size = (uint32_t)pc_align_pow2(p->ring_size);
	if (p->on_request && !p->raw_bufs)
		return set_error(-EINVAL, "on_request is set but raw_bufs is 0: no raw peer could "
				    "ever be accepted");
	if ((uint64_t)p->srq_depth + p->raw_bufs > p->rx_bufs)
		return set_error(-EINVAL, "srq_depth %u and raw_bufs %u exceed rx_bufs %u",
				    p->srq_depth, p->raw_bufs, p->rx_bufs);
	if (p->srq_watermark > p->srq_depth)
		return set_error(-EINVAL, "srq_watermark %u exceeds srq_depth %u",
				    p->srq_watermark, p->srq_depth);
	if (p->window > p->srq_depth)
		return set_error(-EINVAL, "window %u exceeds srq_depth %u: a single peer "
				    "could not be given its credits", p->window, p->srq_depth);
	if (p->window > WIRE_MAX_CREDITS)
		return set_error(-EINVAL, "window %u exceeds %u, the most a message header's "
				    "16-bit grant can carry", p->window, WIRE_MAX_CREDITS);
	if (p->min_window > p->window)
		return set_error(-EINVAL, "min_window %u exceeds window %u", p->min_window,
				    p->window);
	if (p->signal_every > p->sq_depth / 2)
		p->signal_every = p->sq_depth / 2;
	if ((unsigned int)p->idle > PC_IDLE_HYBRID)
		return set_error(-EINVAL, "idle policy %d is not PC_IDLE_AUTO, _BUSY or _HYBRID",
				    (int)p->idle);
	if (p->handoff == PC_HANDOFF_HANDLER && !p->on_msg)
		return set_error(-EINVAL, "handler mode needs on_msg");
	if (p->sq_depth < 4 || p->poll_batch > 4096)
		return set_error(-EINVAL, "sq_depth %u (>= 4) or poll_batch %u (<= 4096)",
				    p->sq_depth, p->poll_batch);
	return 0;
}

static int devices_open(struct pc_engine *e)
{
	const char *const *names = e->p.devices;
	struct ibv_device **present = NULL;
	int n = 0, i, ret = 0;
	unsigned int k;

	e->cm_ctxs = rdma_get_devices(&n);
	for (k = 0; names && names[k]; k++)
		;
	e->ndevs = names ? k : 1;
	if (!e->ndevs)
		return set_error(-EINVAL, "empty device list");
	ret = device_params_copy(e);
	if (ret)
		return ret;
	e->devs = calloc(e->ndevs, sizeof(*e->devs));
	e->devnames = calloc(e->ndevs, sizeof(*e->devnames));
	e->dlife = calloc(e->ndevs, sizeof(*e->dlife));
	present = calloc(n > 0 ? (size_t)n : 1, sizeof(*present));
	if (!e->devs || !e->devnames || !e->dlife || !present) {
		free(present);
		return -ENOMEM;
	}
	for (i = 0; e->cm_ctxs && i < n; i++)
		present[i] = e->cm_ctxs[i]->device;
	for (k = 0; k < e->ndevs; k++) {
		i = dev_pick(present, e->cm_ctxs ? n : 0, names ? names[k] : NULL);
		if (i < 0) {
			ret = i;
			break;
		}
		e->devs[k] = pc_dev_from_context(e->cm_ctxs[i],
						 device_param(e, k) ? device_param(e, k)->port : 1);
		if (!e->devs[k]) {
			ret = -errno;
			break;
		}
		e->devnames[k] = e->devs[k]->name;
		pc_info("%s port %u: %s verbs path", e->devs[k]->name, e->devs[k]->port,
			e->devs[k]->mlx5dv ? "mlx5dv-capable" : "generic");
	}
	free(present);
	return ret;
}

static bool has_overrides(const struct pc_engine *e)
{
	unsigned int d;

	if (e->p.housekeeping_pus)
		return true;
	for (d = 0; e->devp && d < e->ndevs; d++)
		if (e->devp[d].cpus)
			return true;
	return false;
}

/* A PU list in hwloc syntax ("0-1,40"); "" is the empty set. */
static int parse_pus(const char *what, const char *list, hwloc_bitmap_t *out)
{
	*out = hwloc_bitmap_alloc();
	if (!*out)
		return -ENOMEM;
	if (*list && (hwloc_bitmap_list_sscanf(*out, list) < 0 || hwloc_bitmap_weight(*out) < 0))
		return set_error(-EINVAL, "%s: '%s' is not a list of PUs (e.g. \"0-1,40\")",
				    what, list);
	return 0;
}

/* The policy from housekeeping_pus and each device's cpus; sets to free after. */
static int placement_policy(struct pc_engine *e, struct pc_plan_policy *pol,
			    hwloc_bitmap_t *sets)
{
	const struct pc_device_params *dp = e->devp;
	unsigned int d;
	int ret;

	if (e->p.housekeeping_pus) {
		ret = parse_pus("housekeeping_pus", e->p.housekeeping_pus, &sets[e->ndevs]);
		if (ret)
			return ret;
		pol->housekeeping = sets[e->ndevs];
	}
	for (d = 0; dp && d < e->ndevs; d++) {
		if (!dp[d].cpus)
			continue;
		ret = parse_pus(e->devnames[d], dp[d].cpus, &sets[d]);
		if (ret)
			return ret;
	}
	pol->device_cpus = (const hwloc_const_cpuset_t *)sets;
	return 0;
}

/*
 * Placement: NIC-local cores when the plan allows; otherwise unpinned, said
 * aloud. Placement the caller asked for is never dropped: it works or fails.
 */
static int placement(struct pc_engine *e)
{
	bool asked = has_overrides(e);
	struct pc_plan_policy pol = { .size = sizeof(pol) };
	hwloc_bitmap_t *sets = NULL;
	unsigned int d;
	int ret;

	if (e->p.no_numa)
		return asked ? set_error(-EINVAL, "no_numa with housekeeping_pus or device cpus")
			     : 0;
	e->topo = pc_topo_open();
	if (!e->topo) {
		if (asked)
			return set_error(errno ? -errno : -ENODEV,
					    "placement asked for, but no topology: %s", pc_last_error());
		pc_warn("no topology (%s); workers run unpinned", pc_last_error());
		return 0;
	}
	/* one set per device, then the housekeeping one */
	sets = calloc(e->ndevs + 1, sizeof(*sets));
	if (!sets)
		return -ENOMEM;
	ret = placement_policy(e, &pol, sets);
	if (!ret)
		ret = pc_plan_build(e->topo, (const char *const *)e->devnames, e->ndevs,
				    e->p.workers_per_device, &pol, &e->plan);
	for (d = 0; d <= e->ndevs; d++)
		hwloc_bitmap_free(sets[d]);
	free(sets);
	if (ret && !asked) {
		pc_warn("cannot place %u workers per device (%s); workers run unpinned",
			e->p.workers_per_device, pc_last_error());
		ret = 0;
	}
	return ret;
}

/*
 * The stats segment, for pollcore-stat and the like. Without one the engine
 * runs all the same (counters stay readable in the process), said aloud.
 */
static void stats_segment(struct pc_engine *e, unsigned int nworkers)
{
	char devs[128] = "";
	size_t len = 0;
	unsigned int d;
	int ret;

	for (d = 0; d < e->ndevs && len < sizeof(devs); d++)
		len += (size_t)snprintf(devs + len, sizeof(devs) - len, "%s%s", d ? "," : "",
					e->devnames[d]);
	stats_clock_init();
	ret = stats_seg_create(&e->seg, nworkers, e->p.max_conns_per_worker, devs);
	if (ret)
		pc_warn("no stats segment (%s); pollcore-stat cannot see this engine",
			pc_last_error());
}

/* Each engine's serial (struct pc_engine's): attached threads tell engines apart by it. */
static atomic_uint_fast64_t engine_serials;

/* pc_engine_create@@POLLCORE_0.2; compat.c has 0.1's */
PC_API struct pc_engine *pc_engine_create_0_2(const struct pc_engine_params *params);
PC_SYMVER_DEFAULT(pc_engine_create_0_2, pc_engine_create, "POLLCORE_0.2");

struct pc_engine *pc_engine_create_0_2(const struct pc_engine_params *params)
{
	struct pc_engine *e = calloc(1, sizeof(*e));
	unsigned int i, n;
	int ret;

	if (!e)
		return NULL;
	e->serial = atomic_fetch_add(&engine_serials, 1) + 1;
	e->ctl_efd = -1;
	pthread_mutex_init(&e->workers_lock, NULL);
	pthread_mutex_init(&e->listen_lock, NULL);
	ret = params ? abi_copy(&e->p, sizeof(e->p), params, params->size, ENGINE_PARAMS_BASE,
				   "pc_engine_params")
		     : set_error(-EINVAL, "pc_engine_create: no parameters");
	if (ret)
		goto err;
	ret = params_normalise(&e->p);
	if (ret)
		goto err;
	ret = devices_open(e);
	if (ret)
		goto err;
	ret = placement(e);
	if (ret)
		goto err;
	/* call ids name their caller: an application slot or a worker (worker_pvt.h) */
	if ((uint64_t)e->p.app_threads + e->ndevs * e->p.workers_per_device >= CALL_CALLER_ANY) {
		ret = set_error(-EINVAL, "%u application threads and %u workers: at most %u in all",
				e->p.app_threads, e->ndevs * e->p.workers_per_device,
				CALL_CALLER_ANY - 1);
		goto err;
	}
	e->conns = cds_lfht_new(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
	e->slot_taken = calloc(e->p.app_threads, sizeof(*e->slot_taken));
	e->slot_seq = calloc(e->p.app_threads, sizeof(*e->slot_seq));
	n = e->ndevs * e->p.workers_per_device;
	if (posix_memalign((void **)&e->workers, PC_CACHELINE, n * sizeof(*e->workers)) ||
	    !e->conns || !e->slot_taken || !e->slot_seq) {
		ret = -ENOMEM;
		goto err;
	}
	memset(e->workers, 0, n * sizeof(*e->workers));
	stats_segment(e, n);
	ret = control_start(e);
	if (ret)
		goto err;
	/* nworkers counts started workers: destroy undoes exactly those */
	for (i = 0; i < n; i++) {
		struct worker_cfg cfg = {
			.idx = i,
			.p = &e->p,
			.dev = e->devs[i / e->p.workers_per_device],
			.topo = e->topo,
			.place = e->plan ? &e->plan->entries[i] : NULL,
			.conns = e->conns,
			.control = &e->inbox,
			.must_bind = has_overrides(e),
			.stats_blk = stats_seg_worker(&e->seg, i),
			.stats_slots = stats_seg_conns(&e->seg, i),
		};

		ret = worker_start(&e->workers[i], &cfg);
		if (ret)
			goto err;
		e->nworkers++;
	}
	/* release: the workers' setup, acquired in worker_start(), to on_cm_event() */
	atomic_store_explicit(&e->complete, true, memory_order_release);
	/* its workers' SRQs and its conns may now be named by async events */
	control_publish(e);
	/* read during this call only (engine.h): never dereferenced later */
	e->p.devices = NULL;
	e->p.device_params = NULL;
	e->p.housekeeping_pus = NULL;
	free(e->devp);
	e->devp = NULL;
	return e;
err:
	pc_engine_destroy(e);
	errno = -ret;
	return NULL;
}

static unsigned int conns_attached(const struct pc_engine *e)
{
	unsigned int i, n = 0;

	for (i = 0; i < e->nworkers; i++)
		n += __atomic_load_n(&e->workers[i].st.conns, __ATOMIC_RELAXED);
	return n;
}

static void request_close(struct conn *c, const char *why)
{
	conn_request_close(c, &c->e->inbox, 0, why);
}

/* After the workers stopped: whatever is left is destroyed now. */
static void retire_left(struct conn *c)
{
	/* workers are stopped: only the control thread and we touch c */
	if (c->state == CONN_RETIRED)
		return;
	if (c->state == CONN_DRAINED)
		pc_warn("%s qp 0x%x: %u received and %u other buffers or submissions still held by "
			"the application; freed with the engine",
			c->w->dev->name, c->qpn, c->held, conn_refs(c));
	else
		pc_warn("%s qp 0x%x: not drained when the engine stopped; destroying it",
			c->w->dev->name, c->qpn);
	/* its counters leave the stats segment, which goes with the engine (pc_conn_info()) */
	worker_stats_release(c->w, c);
	conn_set_state(c, CONN_RETIRED);
	ctl_post(&c->e->inbox, c, CTL_RETIRE);
}

struct visit {
	void (*fn)(struct pc_conn *c, void *arg);
	void *arg;
};

static unsigned int walk(struct pc_engine *e, const struct visit *v)
{
	bool reg = !urcu_qsbr_read_ongoing() && !self_worker;
	struct cds_lfht_node *node;
	struct cds_lfht_iter it;
	unsigned int n = 0;

	/* workers are registered qsbr readers already; other threads join for the walk */
	if (reg)
		rcu_register_thread();
	rcu_read_lock();
	/* not cds_lfht_for_each_entry: it computes container_of(NULL) at the end */
	for (cds_lfht_first(e->conns, &it); (node = cds_lfht_iter_get_node(&it));
	     cds_lfht_next(e->conns, &it)) {
		struct conn *c = conn_of_node(node);

		if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) == CONN_RETIRED)
			continue;
		v->fn((struct pc_conn *)c, v->arg);
		n++;
	}
	rcu_read_unlock();
	if (reg)
		qsbr_unregister();
	return n;
}

unsigned int pc_engine_for_each_conn(struct pc_engine *e, void (*fn)(struct pc_conn *c, void *arg),
				     void *arg)
{
	struct visit v = { fn, arg };

	return e && fn && e->conns ? walk(e, &v) : 0;
}

static void visit_close(struct pc_conn *c, void *arg)
{
	(void)arg;
	request_close((struct conn *)c, "closed by pc_engine_destroy()");
}

static void visit_retire_left(struct pc_conn *c, void *arg)
{
	(void)arg;
	retire_left((struct conn *)c);
}

static void wait_for(struct pc_engine *e, bool (*done)(struct pc_engine *e), int ms)
{
	while (ms-- > 0 && !done(e))
		usleep(1000);
}

static bool all_drained(struct pc_engine *e)
{
	return conns_attached(e) == 0;
}

static bool all_retired(struct pc_engine *e)
{
	return atomic_load(&e->live_conns) == 0;
}

/* Closes every connection, waits for the drains, stops the workers. */
static void close_all_and_stop_workers(struct pc_engine *e)
{
	unsigned int i;

	if (e->conns && e->ctl_started) {
		pc_engine_for_each_conn(e, visit_close, NULL);
		wait_for(e, all_drained, 10000);
		if (!all_drained(e))
			pc_warn("%u connections did not drain within 10 s", conns_attached(e));
	}
	/* the control thread may be releasing a lost device's workers meanwhile */
	pthread_mutex_lock(&e->workers_lock);
	for (i = 0; i < e->nworkers; i++)
		worker_stop(&e->workers[i]);
	pthread_mutex_unlock(&e->workers_lock);
	if (e->conns && e->ctl_started) {
		pc_engine_for_each_conn(e, visit_retire_left, NULL);
		wait_for(e, all_retired, 10000);
	}
}

void pc_engine_destroy(struct pc_engine *e)
{
	unsigned int i;

	if (!e)
		return;
	close_all_and_stop_workers(e);
	control_stop(e);
	/* every QP is gone: now the CQs and SRQs can go */
	for (i = 0; i < e->nworkers; i++)
		worker_destroy(&e->workers[i]);
	if (e->conns)
		cds_lfht_destroy(e->conns, NULL);
	for (i = 0; e->devs && i < e->ndevs; i++)
		pc_dev_close(e->devs[i]);
	if (e->cm_ctxs)
		rdma_free_devices(e->cm_ctxs);
	pc_plan_destroy(e->plan);
	if (e->topo)
		pc_topo_close(e->topo);
	free(e->slot_taken);
	free(e->slot_seq);
	free(e->workers);
	free(e->devnames);
	free(e->devs);
	free(e->dlife);
	free(e->devp);
	pthread_mutex_destroy(&e->workers_lock);
	pthread_mutex_destroy(&e->listen_lock);
	/* the workers' last publishes are in: readers see the final counts until it goes */
	stats_seg_destroy(&e->seg);
	free(e);
}

/* --- introspection --------------------------------------------------------------------- */

struct pc_conn *pc_conn_get(struct pc_conn *conn)
{
	conn_hold((struct conn *)conn);
	return conn;
}

void pc_conn_put(struct pc_conn *conn)
{
	if (conn)
		conn_drop((struct conn *)conn);
}

void *pc_conn_user(const struct pc_conn *conn)
{
	return ((const struct conn *)conn)->user;
}

void pc_conn_set_user(struct pc_conn *conn, void *user)
{
	((struct conn *)conn)->user = user;
}

void pc_conn_info(const struct pc_conn *pconn, struct pc_conn_info *info)
{
	const struct conn *c = (const struct conn *)pconn;
	/* acquire: pairs with the release where the worker moves the counters */
	const struct pc_stats_conn *st = __atomic_load_n(&c->st, __ATOMIC_ACQUIRE);

	memset(info, 0, sizeof(*info));
	snprintf(info->device, sizeof(info->device), "%s", c->devname);
	info->qp_num = c->qpn;
	info->worker = c->widx;
	info->app_slot = c->app_slot;
	info->raw = c->raw;
	/* written before UP (conn_apply_peer()), which the caller has seen */
	info->peer_max_msg = c->raw ? 0 : c->peer_max_msg;
	info->peer_window = c->raw ? 0 : c->peer_window;
	info->peer_max_large = c->raw ? 0 : c->rv.peer_max_large;
	info->recv_depth = c->raw ? c->rq_depth : 0;
	info->recv_size = c->raw ? c->rq_size : 0;
	info->peer_data_len = c->raw ? c->peer_data_len : 0;
	memcpy(info->peer_data, c->peer_data, info->peer_data_len);
#define SAMPLE(f) info->f = STAT_LD(st->f);
	CONN_COUNTERS(SAMPLE)
#undef SAMPLE
#define SAMPLE(f) info->f = STAT_LD(c->f);
	CONN_GAUGES(SAMPLE)
#undef SAMPLE
}

const char *pc_stats_segment(const struct pc_engine *e)
{
	return e && e->seg.base ? e->seg.name : NULL;
}

unsigned int pc_engine_nworkers(const struct pc_engine *e)
{
	return e ? e->nworkers : 0;
}

struct pc_worker *pc_engine_worker(struct pc_engine *e, unsigned int idx)
{
	if (!e || idx >= e->nworkers) {
		errno = EINVAL;
		return NULL;
	}
	return &e->workers[idx];
}

/* A counter added to struct pc_worker_stats but not to WORKER_COUNTERS fails here. */
#define FIELD_SIZE(f) +sizeof(((struct pc_worker_stats *)0)->f)
static_assert(sizeof(struct pc_worker_stats) ==
	      0 FIELD_SIZE(name) FIELD_SIZE(pu) FIELD_SIZE(numa_node) FIELD_SIZE(cq_single_threaded)
	      FIELD_SIZE(thread_domain) FIELD_SIZE(idle_policy) FIELD_SIZE(busy_poll)
	      FIELD_SIZE(submit_full)
	      FIELD_SIZE(tx_held) WORKER_COUNTERS(FIELD_SIZE),
	      "pc_engine_stats() samples every field");
static_assert(sizeof(struct pc_worker_stats) ==
	      0 FIELD_SIZE(name) FIELD_SIZE(pu) FIELD_SIZE(numa_node)
	      PC_WORKER_STATS_FIELDS(FIELD_SIZE, FIELD_SIZE),
	      "PC_WORKER_STATS_FIELDS names every counter");
#undef FIELD_SIZE

int pc_engine_stats(const struct pc_engine *e, unsigned int idx, struct pc_worker_stats *st)
{
	if (!e || !st || idx >= e->nworkers)
		return -EINVAL;
	worker_sample(&e->workers[idx], st);
	return 0;
}

int pc_engine_print_stats(const struct pc_engine *e, FILE *f)
{
	struct pc_worker_stats s;
	unsigned int i;

	if (!e || !f)
		return -EINVAL;

	for (i = 0; i < e->nworkers; i++) {
		pc_engine_stats(e, i, &s);
		fprintf(f,
			"%s pu %d numa %d: loops %llu polls %llu (empty %llu) wc %llu "
			"wrs %llu doorbells %llu (%.1f WR/doorbell) srq %llu in %llu posts, "
			"limit events %llu, rx %llu tx %llu, handoff_full %llu submit_full %llu "
			"credit_stalls %llu, credit writes %llu piggybacked %llu, sleeps %llu "
			"(%.1f ms), wc_errors %llu, rx_held %u\n",
			s.name, s.pu, s.numa_node, (unsigned long long)s.loops,
			(unsigned long long)s.polls, (unsigned long long)s.empty_polls,
			(unsigned long long)s.completions, (unsigned long long)s.wrs_posted,
			(unsigned long long)s.doorbells,
			s.doorbells ? (double)s.wrs_posted / (double)s.doorbells : 0.0,
			(unsigned long long)s.srq_posted, (unsigned long long)s.srq_doorbells,
			(unsigned long long)s.srq_limit_events, (unsigned long long)s.rx_msgs,
			(unsigned long long)s.tx_msgs, (unsigned long long)s.handoff_full,
			(unsigned long long)s.submit_full, (unsigned long long)s.credit_stalls,
			(unsigned long long)s.credit_writes,
			(unsigned long long)s.credit_piggybacks, (unsigned long long)s.sleeps,
			(double)s.sleep_ns / 1e6, (unsigned long long)s.wc_errors, s.rx_held);
	}
	return 0;
}

int pc_engine_info(const struct pc_engine *e, struct pc_engine_info *info)
{
	const struct pc_engine_params *p;
	struct pc_engine_info out;
	uint32_t largest = 0;
	unsigned int i;

	if (!e || !info || info->size < sizeof(out))
		return set_error(-EINVAL, "pc_engine_info: an engine, and info with its size set");
	p = &e->p;
	/* what every worker takes: the devices without memory windows have no rendezvous */
	for (i = 0; i < e->nworkers; i++) {
		uint32_t m = rndv_max_large(&e->workers[i]);

		largest = i ? PC_MIN(largest, m) : m;
	}
	out = (struct pc_engine_info){
		.size = info->size,
		.workers = e->nworkers,
		.devices = e->ndevs,
		.msg_size = p->msg_size,
		.max_msg_size = e->nworkers ? largest : p->msg_size,
		.window = p->window,
		.min_window = p->min_window,
		.max_calls = p->max_calls,
		.max_unanswered = p->max_unanswered,
		.rx_bufs = p->rx_bufs,
		.tx_bufs = p->tx_bufs,
		.srq_depth = p->srq_depth,
		.raw_bufs = p->raw_bufs,
		.sq_depth = p->sq_depth,
		.max_conns_per_worker = p->max_conns_per_worker,
		.app_threads = p->app_threads,
		.handoff = p->handoff,
		.idle = p->idle,
		.keepalive_ms = p->keepalive_ms,
		.grant_delay_us = p->grant_delay_us,
		.large_pool_size = p->max_msg_size > p->msg_size ? p->large_pool_size : 0,
	};
	memcpy(info, &out, sizeof(out));
	return 0;
}
