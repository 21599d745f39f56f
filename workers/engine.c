// SPDX-License-Identifier: MIT
/*
 * Engine lifecycle (devices, placement, workers, control thread) and the
 * application-facing calls that route work to the owning worker: directly
 * when called on that worker, through its MPSC submission ring otherwise.
 */
#include "engine_pvt.h"
#include "rndv_pvt.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log_pvt.h"

/* The app slots this thread is attached to, one per engine (few engines per process). */
#define APP_BINDINGS 4
static __thread struct {
	struct pc_engine *e;
	int slot;
	uint32_t seq;	/* this thread's call sequence on @e (call ids) */
} app_binding[APP_BINDINGS];

static int app_slot(const struct pc_engine *e)
{
	unsigned int i;

	for (i = 0; i < APP_BINDINGS; i++)
		if (app_binding[i].e == e)
			return app_binding[i].slot;
	return -1;
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
	DEFAULT(max_inline, 64);
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
	/* a call's id names its buffer among the worker's messages (worker_pvt.h) */
	if ((uint64_t)p->rx_bufs + p->tx_bufs + p->raw_bufs +
		    (p->max_msg_size > p->msg_size ? p->large_pool_size >> 16 : 0) + 128 >
	    (1u << CALL_GIDX_BITS))
		return set_error(-EINVAL, "rx_bufs %u, tx_bufs %u, raw_bufs %u and a large pool of "
				 "%llu MiB make more than %u buffers per worker",
				 p->rx_bufs, p->tx_bufs, p->raw_bufs,
				 (unsigned long long)(p->large_pool_size >> 20), 1u << CALL_GIDX_BITS);
	DEFAULT(idle_spins, 1000);
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
						 e->p.device_params ? e->p.device_params[k].port : 1);
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
	for (d = 0; e->p.device_params && d < e->ndevs; d++)
		if (e->p.device_params[d].cpus)
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
	const struct pc_device_params *dp = e->p.device_params;
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
	struct pc_plan_policy pol = { 0 };
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

struct pc_engine *pc_engine_create(const struct pc_engine_params *params)
{
	struct pc_engine *e = calloc(1, sizeof(*e));
	unsigned int i, n;
	int ret;

	if (!e)
		return NULL;
	e->ctl_efd = -1;
	pthread_mutex_init(&e->workers_lock, NULL);
	e->p = *params;
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
	n = e->ndevs * e->p.workers_per_device;
	if (posix_memalign((void **)&e->workers, PC_CACHELINE, n * sizeof(*e->workers)) ||
	    !e->conns || !e->slot_taken) {
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
		pc_warn("%s qp 0x%x: %u received and %u other buffers or submissions still held by the application; freed with the engine",
			c->w->dev->name, c->qpn, c->held, conn_refs(c));
	else
		pc_warn("%s qp 0x%x: not drained when the engine stopped; destroying it",
			c->w->dev->name, c->qpn);
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

	return e->conns ? walk(e, &v) : 0;
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
	free(e->workers);
	free(e->devnames);
	free(e->devs);
	free(e->dlife);
	pthread_mutex_destroy(&e->workers_lock);
	/* the workers' last publishes are in: readers see the final counts until it goes */
	stats_seg_destroy(&e->seg);
	free(e);
}

/* --- routing --------------------------------------------------------------------------- */

/*
 * Hands @ctx to worker @w, which is not this thread: its submission queue
 * takes every node (each submission carries its own), so this never fails.
 */
static pc_always_inline void submit(struct pc_worker *w, struct wr_ctx *ctx)
{
	mpscq_push(&w->submit, &ctx->qnode);
	worker_wake(w);
}

/*
 * Runs @ctx's action on its worker: directly on that worker, else through
 * its submission queue. A submission that names a conn nothing else keeps
 * alive (@ref: a message sent on a conn other than its own) takes a
 * reference on it, which the worker gives back when it takes the
 * submission: -ENOTCONN when that conn is closing (nothing submitted).
 */
static pc_always_inline int route(struct pc_worker *w, struct wr_ctx *ctx, bool ref)
{
	ctx->ref = 0;
	if (self_worker == w) {
		if (ctx->action == ACT_SEND)
			return dp_send(w, pc_container_of(ctx, struct msg, ctx));
		if (ctx->action == ACT_RDMA)
			return dp_rdma(w, op_of_ctx(ctx));
		dp_submit(w, ctx);
		return 0;
	}
	if (ref) {
		if (pc_unlikely(!conn_ref_app(ctx->conn)))
			return -ENOTCONN;
		ctx->ref = 1;
	}
	submit(w, ctx);
	return 0;
}

struct pc_msg *pc_msg_alloc(struct pc_conn *pconn)
{
	struct conn *c = (struct conn *)pconn;
	struct pc_worker *w = c->w;
	struct msg *m = NULL;
	void *obj;
	int slot;

	if (pc_unlikely(__atomic_load_n(&c->state, __ATOMIC_RELAXED) >= CONN_DRAINING)) {
		errno = ENOTCONN;
		return NULL;
	}
	/* the buffer keeps @c alive until it is back in the pool (engine.h) */
	if (self_worker == w) {
		m = dp_tx_alloc(w);
		if (m)
			c->refs_w++;
	} else if ((slot = app_slot(c->e)) >= 0) {
		if (pc_unlikely(!conn_ref_app(c))) {
			errno = ENOTCONN;
			return NULL;
		}
		if (pc_ring_spsc_dequeue_burst(w->chans[slot].txfree, &obj, 1)) {
			m = obj;
		} else {
			conn_unref_app(c);
			/*
			 * The stock is empty: a worker asleep (hybrid idle) would not
			 * top it up before something else woke it; a busy one does
			 * within HOUSEKEEP_TURNS turns (dp_topup_txfree()).
			 */
			worker_wake(w);
		}
	} else {
		set_error(-EPERM, "pc_msg_alloc: call pc_app_attach() on this thread first");
		errno = EPERM;
		return NULL;
	}
	if (!m) {
		errno = ENOBUFS;
		return NULL;
	}
	m->pub.len = 0;
	m->pub.type = PC_MSG_ONEWAY;
	m->pub.req_id = 0;
	m->call_done = NULL;
	m->ctx.conn = c;
	m->origin = c;
	msg_bind(m, c);
	return &m->pub;
}

/*
 * Whether @m may be sent on @c: 0, or -EMSGSIZE, -EXDEV, -EINVAL (the
 * message is still the caller's), pc_last_error() saying why.
 */
static pc_always_inline int msg_check(const struct conn *c, struct msg *m)
{
	const struct pc_msg *pm = &m->pub;

	if (pc_unlikely(pm->len > pm->cap))
		return set_error(-EMSGSIZE, "message of %u bytes exceeds capacity %u", pm->len,
				    pm->cap);
	if (pc_unlikely(c->w != m->w))
		return set_error(-EXDEV, "message belongs to %s, connection to %s", m->w->name,
				    c->w->name);
	/* a buffer of the large pool goes by rendezvous, or as header and payload */
	if (pc_unlikely(m->pool == POOL_LARGE))
		return rndv_submit_check(c, m);
	if (pc_unlikely(!c->raw && c->peer_max_msg && pm->len > c->peer_max_msg))
		return set_error(-EMSGSIZE, "%s qp 0x%x: message of %u bytes exceeds the peer's maximum %u",
				    c->w->dev->name, c->qpn, pm->len, c->peer_max_msg);
	/* a received buffer may be sent on: its payload offset follows the conn */
	if (pc_unlikely(pm->data != (char *)m->buf->addr + (c->raw ? 0 : WIRE_HDR_LEN)))
		return set_error(-EINVAL, "message data pointer was moved");
	return 0;
}

/* A send to a closing or closed @c: the message goes back (engine.h), untouched after. */
static pc_noinline int msg_refuse(struct msg *m)
{
	m->call_done = NULL;
	pc_msg_release(&m->pub);
	return -ENOTCONN;
}

static pc_always_inline bool conn_closing(const struct conn *c)
{
	/* closing or closed, maybe past DOWN (the message keeps @c allocated) */
	return __atomic_load_n(&c->state, __ATOMIC_RELAXED) >= CONN_DRAINING;
}

static pc_always_inline int msg_submit(struct pc_msg *pm, uint8_t type)
{
	struct msg *m = msg_of(pm);
	struct conn *c = (struct conn *)pm->conn;
	int ret = msg_check(c, m);

	if (pc_unlikely(ret))
		return ret;
	if (pc_unlikely(conn_closing(c)))
		return msg_refuse(m);
	pm->type = type;
	m->call_done = NULL;
	m->ctx.conn = c;
	m->ctx.action = ACT_SEND;
	/* a message keeps its origin alive; sent elsewhere, the submission keeps the target */
	ret = route(c->w, &m->ctx, m->origin != c);
	if (pc_unlikely(ret == -ENOTCONN && self_worker != c->w))
		return msg_refuse(m);
	return ret;
}

int pc_send(struct pc_msg *msg)
{
	return msg_submit(msg, PC_MSG_ONEWAY);
}

/*
 * Takes one of @c's max_calls places: calls accepted and not ended (the
 * worker counts those, relaxed; a stale count only refuses).
 */
static pc_always_inline bool calls_reserve(struct conn *c, uint32_t max)
{
	uint64_t made = __atomic_load_n(&c->calls_made, __ATOMIC_RELAXED);

	do {
		if (made - __atomic_load_n(&c->calls_ended, __ATOMIC_RELAXED) >= max)
			return false;
	} while (!__atomic_compare_exchange_n(&c->calls_made, &made, made + 1, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return true;
}

/* A new call's id, from the calling thread's own sequence (worker_pvt.h). */
static pc_always_inline uint64_t call_new_id(struct pc_engine *e, struct pc_worker *w,
					     const struct msg *m)
{
	unsigned int i;

	if (self_worker && self_worker->p == &e->p) {
		if (pc_unlikely(!(++self_worker->call_seq & CALL_SEQ_MASK)))
			self_worker->call_seq = 1;
		return call_id_make(self_worker->call_seq, e->p.app_threads + self_worker->idx,
				    m->gidx);
	}
	(void)w;
	for (i = 0; i < APP_BINDINGS; i++) {
		if (app_binding[i].e != e)
			continue;
		if (pc_unlikely(!(++app_binding[i].seq & CALL_SEQ_MASK)))
			app_binding[i].seq = 1;
		return call_id_make(app_binding[i].seq, (uint32_t)app_binding[i].slot, m->gidx);
	}
	return call_id_make(atomic_fetch_add_explicit(&e->call_seq_any, 1, memory_order_relaxed) | 1,
			    CALL_CALLER_ANY, m->gidx);
}

int pc_call(struct pc_msg *msg, pc_call_fn done, void *arg, uint64_t timeout_us,
	    uint64_t *req_id)
{
	struct conn *c = (struct conn *)msg->conn;
	struct msg *m = msg_of(msg);
	struct pc_worker *w = c->w;
	bool here = self_worker == w, ref;
	uint64_t id;
	int ret;

	if (pc_unlikely(!done && timeout_us))
		return set_error(-EINVAL, "pc_call: a deadline needs a completion");
	if (pc_unlikely(done && c->raw))
		return set_error(-EINVAL, "%s qp 0x%x: pc_call with a completion on a raw peer, "
				    "which sends no responses", c->devname, c->qpn);
	ret = msg_check(c, m);
	if (pc_unlikely(ret))
		return ret;
	if (pc_unlikely(conn_closing(c)))
		return msg_refuse(m);
	/* sent on a conn other than its own: the submission keeps that one alive */
	ref = !here && m->origin != c;
	if (pc_unlikely(ref && !conn_ref_app(c)))
		return msg_refuse(m);
	/* calls not ended: those beyond the window wait in the engine, up to max_calls */
	if (pc_unlikely(!c->raw && !calls_reserve(c, w->p->max_calls))) {
		if (ref)
			conn_unref_app(c);
		return -EAGAIN;
	}
	/* from here on nothing fails: the worker takes the call, and ends it once */
	id = call_new_id(c->e, w, m);
	msg->req_id = id;
	msg->type = PC_MSG_REQUEST;
	/* on the worker, inside a batch that had a response: that batch's clock read */
	m->t_call = here && w->ws.now_batch ? w->ws.now_batch : stats_ticks();
	m->call_done = done;
	if (done) {
		m->call_arg = arg;
		m->call_deadline = timeout_us ? m->t_call + stats_us_ticks(timeout_us) : 0;
		m->call_slot = here ? -1 : (int16_t)app_slot(c->e);
		/* release: the call's fields before a cancel that names it (pc_call_cancel()) */
		atomic_store_explicit(&m->call_live, id, memory_order_release);
	}
	m->ctx.conn = c;
	m->ctx.action = ACT_SEND;
	m->ctx.ref = ref;
	/* not msg->req_id below: once submitted, the message is the worker's */
	if (here)
		dp_send(w, m);
	else
		submit(w, &m->ctx);
	if (req_id)
		*req_id = id;
	return 0;
}

int pc_call_cancel(struct pc_conn *pconn, uint64_t req_id)
{
	struct conn *c = (struct conn *)pconn;
	struct pc_worker *w;
	uint64_t live = req_id;
	struct msg *m;

	if (conn_closing(c))
		return -ENOTCONN;	/* its calls end with -ENOTCONN anyway */
	w = c->w;
	m = req_id & CALL_CANCEL_BIT ? NULL : msg_by_gidx(w, call_id_gidx(req_id));
	/*
	 * acq_rel: the call's fields (pc_call()'s release) before the cancel;
	 * the mark before the worker's exchange that ends the call. It fails
	 * for a call that ended, was cancelled already, or never had this id.
	 */
	if (!m || !atomic_compare_exchange_strong_explicit(&m->call_live, &live,
							   req_id | CALL_CANCEL_BIT,
							   memory_order_acq_rel,
							   memory_order_relaxed))
		return 0;
	/* the buffer's own cancel_ctx: no buffer, no ring slot to run out of */
	if (self_worker == w)
		call_cancel_dequeued(w, m);
	else
		submit(w, &m->cancel_ctx);
	return 0;
}

int pc_reply(struct pc_msg *req)
{
	/* a request answered in place, or a response built in a buffer of its own */
	if (req->type != PC_MSG_REQUEST && req->type != PC_MSG_RESPONSE)
		return set_error(-EINVAL, "pc_reply on a message that is neither a request nor a response");
	return msg_submit(req, PC_MSG_RESPONSE);
}

int pc_msg_release(struct pc_msg *pm)
{
	struct msg *m = msg_of(pm);

	m->ctx.action = ACT_RELEASE;
	route(m->w, &m->ctx, false);
	return 0;
}

int pc_rdma(struct pc_conn *pconn, struct pc_op *op)
{
	struct conn *c = (struct conn *)pconn;
	struct op_priv *pv = op_priv(op);

	if (!op->done || (op->code != PC_OP_WRITE && op->code != PC_OP_READ) || !op->len)
		return set_error(-EINVAL, "pc_rdma: bad operation (code %u, len %u, done %p)",
				    op->code, op->len, (void *)(uintptr_t)op->done);
	pv->ctx.kind = WR_OP;
	pv->ctx.action = ACT_RDMA;
	pv->ctx.conn = c;
	return route(c->w, &pv->ctx, true);
}

int pc_close(struct pc_conn *pconn)
{
	struct conn *c = (struct conn *)pconn;

	/* retired: its engine may be gone too; a close in flight ends the same way */
	if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) == CONN_RETIRED ||
	    !conn_request_close(c, &c->e->inbox, 0, "closed by the application (pc_close)"))
		return -EALREADY;
	return 0;
}

void *pc_mem_reg(struct pc_conn *pconn, void *addr, size_t len, int access, uint32_t *lkey,
		 uint32_t *rkey)
{
	struct conn *c = (struct conn *)pconn;
	struct ibv_mr *mr;

	/* the reference keeps the device's protection domain while we use it */
	if (!conn_ref_app(c)) {
		set_error(-ENOTCONN, "%s qp 0x%x: pc_mem_reg on a closed connection", c->devname,
			     c->qpn);
		errno = ENOTCONN;
		return NULL;
	}
	/* pc_msg_wrap() binds a memory window on it (local only: no remote access granted) */
	if (c->w->rv)
		access |= IBV_ACCESS_MW_BIND;
	mr = ibv_reg_mr(c->w->dev->pd, addr, len, access);
	if (!mr)
		set_error(pc_neg_errno(-1), "%s: ibv_reg_mr(%zu bytes, access 0x%x): %s",
			     c->devname, len, access, strerror(errno));
	conn_unref_app(c);
	if (!mr)
		return NULL;
	*lkey = mr->lkey;
	*rkey = mr->rkey;
	return mr;
}

void pc_mem_dereg(void *handle)
{
	if (handle)
		ibv_dereg_mr(handle);
}

/* --- application slots ------------------------------------------------------------------- */

int pc_app_attach(struct pc_engine *e, unsigned int idx)
{
	int expected = 0;
	unsigned int i;

	if (app_slot(e) >= 0)
		return set_error(-EALREADY, "this thread is already attached to slot %d",
				    app_slot(e));
	for (i = 0; i < APP_BINDINGS && app_binding[i].e; i++)
		;
	if (i == APP_BINDINGS)
		return set_error(-ENOSPC, "a thread can attach to at most %d engines",
				    APP_BINDINGS);
	if (idx >= e->p.app_threads)
		return set_error(-EINVAL, "app slot %u: the engine has %u", idx,
				    e->p.app_threads);
	if (!atomic_compare_exchange_strong(&e->slot_taken[idx], &expected, 1))
		return set_error(-EBUSY, "app slot %u is taken by another thread", idx);
	app_binding[i].e = e;
	app_binding[i].slot = (int)idx;
	return 0;
}

/*
 * Runs the call completions among @msgs[@from..@to) and closes the gaps;
 * returns how many messages are left.
 */
static unsigned int run_completions(struct pc_msg **msgs, unsigned int from, unsigned int to)
{
	unsigned int i, k = from;

	for (i = from; i < to; i++) {
		struct msg *m = msg_of(msgs[i]);
		pc_call_fn done = m->call_done;

		if (pc_likely(!done)) {
			msgs[k++] = msgs[i];
			continue;
		}
		/* the message is the application's from here: it may call again with it */
		m->call_done = NULL;
		done(msgs[i], m->call_status, m->call_arg);
	}
	return k;
}

int pc_app_poll(struct pc_engine *e, struct pc_msg **msgs, unsigned int n)
{
	int slot = app_slot(e);
	unsigned int got = 0, i, k;

	if (pc_unlikely(slot < 0))
		return set_error(-EPERM, "pc_app_poll: this thread is not attached (pc_app_attach())");
	if (pc_unlikely(e->p.handoff != PC_HANDOFF_RING))
		return set_error(-EINVAL, "pc_app_poll: the engine is in handler mode");
	for (i = 0; i < e->nworkers && got < n; i++) {
		struct chan *ch = &e->workers[i].chans[slot];

		k = pc_ring_spsc_dequeue_burst(ch->to_app, (void **)msgs + got, n - got);
		got = run_completions(msgs, got, got + k);
	}
	return (int)got;
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
	return e->seg.base ? e->seg.name : NULL;
}

unsigned int pc_engine_nworkers(const struct pc_engine *e)
{
	return e->nworkers;
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
	if (idx >= e->nworkers)
		return -EINVAL;
	worker_sample(&e->workers[idx], st);
	return 0;
}

void pc_engine_print_stats(const struct pc_engine *e, FILE *f)
{
	struct pc_worker_stats s;
	unsigned int i;

	for (i = 0; i < e->nworkers; i++) {
		pc_engine_stats(e, i, &s);
		fprintf(f, "%s pu %d numa %d: loops %llu polls %llu (empty %llu) wc %llu "
			"wrs %llu doorbells %llu (%.1f WR/doorbell) srq %llu in %llu posts, "
			"limit events %llu, rx %llu tx %llu, handoff_full %llu submit_full %llu "
			"credit_stalls %llu, credit writes %llu piggybacked %llu, sleeps %llu (%.1f ms), wc_errors %llu, rx_held %u\n",
			s.name, s.pu, s.numa_node, (unsigned long long)s.loops,
			(unsigned long long)s.polls, (unsigned long long)s.empty_polls,
			(unsigned long long)s.completions, (unsigned long long)s.wrs_posted,
			(unsigned long long)s.doorbells,
			s.doorbells ? (double)s.wrs_posted / (double)s.doorbells : 0.0,
			(unsigned long long)s.srq_posted, (unsigned long long)s.srq_doorbells,
			(unsigned long long)s.srq_limit_events, (unsigned long long)s.rx_msgs,
			(unsigned long long)s.tx_msgs, (unsigned long long)s.handoff_full,
			(unsigned long long)s.submit_full, (unsigned long long)s.credit_stalls,
			(unsigned long long)s.credit_writes, (unsigned long long)s.credit_piggybacks,
			(unsigned long long)s.sleeps, (double)s.sleep_ns / 1e6,
			(unsigned long long)s.wc_errors, s.rx_held);
	}
}
