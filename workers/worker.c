// SPDX-License-Identifier: MIT
/*
 * Worker resources, thread and loop (layer "worker", docs/architecture.md).
 * The data path proper is in the layers below: completions (complete.c),
 * chains (flush.c), posting (post.c), messages and credits (msg.c,
 * dp_credit.h); closing connections in drain.c.
 */

#include "thread_pvt.h"
#include "idle_pvt.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "log_pvt.h"

/* The longest a hybrid worker sleeps when nothing is due. */
#define SLEEP_MAX_NS (100ull * 1000 * 1000)

/* Send WRs in flight per worker at most, whatever the connections (CQ size). */
#define CQ_SEND_MAX (32u * 1024)

static void worker_publish(struct pc_worker *w, uint64_t now);

static void *numa_pool_alloc(size_t len, size_t align, void *arg)
{
	struct pc_worker *w = arg;

	(void)align; /* pc_numa_alloc() is page-aligned */
	return pc_numa_alloc(w->topo, len, w->place->numa_node);
}

static void numa_pool_free(void *addr, size_t len, void *arg)
{
	struct pc_worker *w = arg;

	pc_numa_free(w->topo, addr, len);
}

/* @first: the gidx of msgs[0] (msg_by_gidx()) */
static void msgs_init(struct pc_worker *w, struct msg *msgs, struct pc_buf *bufs, uint32_t n,
		      enum msg_pool which, uint32_t first)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		msgs[i].buf = &bufs[i];
		msgs[i].w = w;
		msgs[i].pool = (uint8_t)which;
		msgs[i].gidx = first + i;
		msgs[i].ctx.kind = WR_MSG;
		msgs[i].rctx.kind = WR_RECV;
		msgs[i].cancel_ctx = (struct wr_ctx){ .kind = WR_MSG, .action = ACT_CANCEL };
	}
}

static void wake_cb(void *w)
{
	worker_wake(w);
}

static int worker_setup(struct pc_worker *w)
{
	const struct pc_engine_params *p = w->p;
	uint32_t buf_size = (p->msg_size + WIRE_HDR_LEN + PC_CACHELINE - 1) &
			    ~(uint32_t)(PC_CACHELINE - 1);
	struct pc_pool_allocator numa = { numa_pool_alloc, numa_pool_free, w };
	const struct pc_pool_allocator *alloc = NULL;
	struct pc_pool_params pp = { 0 };
	struct ibv_srq_init_attr sattr = { 0 };
	struct pc_dev *d = w->dev;
	char name[32];
	unsigned int i;
	int cqe, ret;

	if (w->place && w->topo) {
		ret = pc_numa_bind_thread(w->topo, w->place);
		if (ret && w->must_bind)
			return set_error(ret, "%s: cannot bind to PU %d: %s", w->name,
					    w->place->pu, strerror(-ret));
		if (ret)
			pc_warn("%s: cannot bind to PU %d (%s); running unbound", w->name,
				w->place->pu, strerror(-ret));
		else {
			w->st.pu = w->place->pu;
			w->st.numa_node = w->place->numa_node;
			alloc = &numa;
		}
	}

	/*
	 * Busy-polling pays only on a core of one's own: an unbound worker
	 * shares its core with the application and the other workers.
	 * Submitters read `hybrid` once pc_engine_create() has returned.
	 */
	w->hybrid = p->idle == PC_IDLE_HYBRID || (p->idle == PC_IDLE_AUTO && w->st.pu < 0);
	w->st.busy_poll = !w->hybrid;

	/* after binding: the stats block and slots are first touched on this node */
	ret = wstats_init(&w->ws, w->stats_blk, w->stats_slots, p->max_conns_per_worker);
	if (ret)
		return ret;

	/* receive buffers: the NIC writes them locally; nothing remote */
	snprintf(name, sizeof(name), "w%u-rx", w->idx);
	pp = (struct pc_pool_params){ .size = sizeof(pp), .name = name, .nbufs = p->rx_bufs,
				      .buf_size = buf_size, .pd = d->pd,
				      .access = IBV_ACCESS_LOCAL_WRITE, .allocator = alloc };
	w->rx = pc_pool_create(&pp);
	if (!w->rx)
		return -errno;
	/* send buffers: the NIC only reads them */
	snprintf(name, sizeof(name), "w%u-tx", w->idx);
	pp = (struct pc_pool_params){ .size = sizeof(pp), .name = name, .nbufs = p->tx_bufs,
				      .buf_size = buf_size, .pd = d->pd, .allocator = alloc };
	w->tx = pc_pool_create(&pp);
	if (!w->tx)
		return -errno;
	/* raw peers' own receive queues: a pool of their own, apart from the SRQ's */
	if (p->raw_bufs) {
		snprintf(name, sizeof(name), "w%u-raw", w->idx);
		pp = (struct pc_pool_params){ .size = sizeof(pp), .name = name,
					      .nbufs = p->raw_bufs, .buf_size = buf_size,
					      .pd = d->pd, .access = IBV_ACCESS_LOCAL_WRITE,
					      .allocator = alloc };
		w->raw = pc_pool_create(&pp);
		if (!w->raw)
			return -errno;
		w->raw_msgs = calloc(p->raw_bufs, sizeof(*w->raw_msgs));
		if (!w->raw_msgs)
			return -ENOMEM;
		msgs_init(w, w->raw_msgs, w->raw->bufs, p->raw_bufs, POOL_RAW, p->rx_bufs + p->tx_bufs);
	}
	w->rx_msgs = calloc(p->rx_bufs, sizeof(*w->rx_msgs));
	w->tx_msgs = calloc(p->tx_bufs, sizeof(*w->tx_msgs));
	w->chain.wr = calloc(p->sq_depth, sizeof(*w->chain.wr));
	w->chain.sge = calloc(p->sq_depth, sizeof(*w->chain.sge));
	w->srq_wrs = calloc(p->rx_bufs, sizeof(*w->srq_wrs));
	w->rwr = calloc(RQ_REFILL_BATCH, sizeof(*w->rwr));
	w->rsge = calloc(RQ_REFILL_BATCH, sizeof(*w->rsge));
	w->wc = calloc(p->poll_batch, sizeof(*w->wc));
	w->nchans = p->app_threads;
	w->chans = calloc(w->nchans, sizeof(*w->chans));
	if (!w->rx_msgs || !w->tx_msgs || !w->chain.wr || !w->chain.sge || !w->srq_wrs ||
	    !w->rwr || !w->rsge || !w->wc || !w->chans)
		return -ENOMEM;
	msgs_init(w, w->rx_msgs, w->rx->bufs, p->rx_bufs, POOL_RX, 0);
	for (i = 0; i < p->rx_bufs; i++) {
		struct srq_wr *r = &w->srq_wrs[i];
		const struct pc_buf *b = w->rx_msgs[i].buf;

		/* exactly what is accepted: a longer message fails its receive (LOC_LEN_ERR) */
		r->sge = (struct ibv_sge){ (uintptr_t)b->addr, WIRE_HDR_LEN + p->msg_size, b->lkey };
		r->wr = (struct ibv_recv_wr){ .wr_id = (uintptr_t)&w->rx_msgs[i].rctx,
					      .sg_list = &r->sge, .num_sge = 1 };
	}
	msgs_init(w, w->tx_msgs, w->tx->bufs, p->tx_bufs, POOL_TX, p->rx_bufs);
	/* a received pack's frames after the first: every one a receive buffer can hold */
	w->npack = p->rx_bufs * (WIRE_PACK_MAX - 1);
	w->pack_msgs = calloc(w->npack, sizeof(*w->pack_msgs));
	w->pack_bufs = calloc(w->npack, sizeof(*w->pack_bufs));
	if (!w->pack_msgs || !w->pack_bufs)
		return -ENOMEM;
	msgs_init(w, w->pack_msgs, w->pack_bufs, w->npack, POOL_PACK,
		  p->rx_bufs + p->tx_bufs + p->raw_bufs);
	for (i = w->npack; i-- > 0;) {
		w->pack_msgs[i].ctx.next = w->pack_free;
		w->pack_free = &w->pack_msgs[i].ctx;
	}
	/* the large-message pool, beside them (NUMA-local when they are) */
	if (rndv_setup(w, alloc != NULL))
		pc_warn("%s: no rendezvous, messages up to msg_size: %s", w->name, pc_last_error());

	mpscq_init(&w->submit);
	for (i = 0; i < w->nchans; i++) {
		struct chan *ch = &w->chans[i];
		uint32_t share = PC_MAX(p->tx_bufs / (2 * w->nchans), 1u);

		if (p->handoff == PC_HANDOFF_RING) {
			ch->to_app = pc_ring_spsc_create(p->ring_size);
			if (!ch->to_app)
				return -errno;
		}
		ch->tx_share = share;
		ch->txfree = pc_ring_spsc_create((unsigned int)pc_align_pow2(share));
		if (!ch->txfree)
			return -errno;
		ch->ovf_tail = &ch->ovf_head;
	}

	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0)
		return set_error(-errno, "%s: eventfd: %s", w->name, strerror(errno));
	if (w->hybrid) {
		w->ch = ibv_create_comp_channel(d->ctx);
		if (!w->ch)
			return set_error(pc_neg_errno(-1), "%s: ibv_create_comp_channel: %s",
					    d->name, strerror(errno));
		if (fcntl(w->ch->fd, F_SETFL, fcntl(w->ch->fd, F_GETFL) | O_NONBLOCK))
			return -errno;
	}
	/*
	 * Every WR that can be outstanding needs room for its completion (a QP
	 * in error flushes them all): the receives, a drain marker per
	 * connection, and the sends in flight, which share a bounded room
	 * (cq_send_room()); admission refuses what would not fit.
	 */
	cqe = (int)PC_MIN(cq_reserved(&(struct credit_limits){ .srq_depth = p->srq_depth,
								.raw_bufs = p->raw_bufs },
				      p->max_conns_per_worker) +
			  PC_MIN((uint64_t)p->max_conns_per_worker * p->sq_depth, CQ_SEND_MAX),
			  (uint64_t)d->dev_attr.max_cqe);
	worker_create_domain(w);
	ret = worker_create_cq(w, cqe);
	if (ret)
		return ret;
	w->lim = (struct credit_limits){
		.srq_depth = p->srq_depth,
		.min_window = p->min_window,
		.raw_bufs = p->raw_bufs,
		.max_conns = p->max_conns_per_worker,
		.cqe = (uint32_t)cqe,
		.sq_depth = p->sq_depth,
	};
	credits_share_set(w);
	cq_conns_add(w, 0);
	w->st.cq_single_threaded = w->cq_single;
	w->st.thread_domain = w->td != NULL;
	sattr.srq_context = w;
	sattr.attr.max_wr = p->srq_depth;
	sattr.attr.max_sge = 1;
	w->srq = ibv_create_srq(w->pd, &sattr);
	if (!w->srq)
		return set_error(pc_neg_errno(-1), "%s port %u: ibv_create_srq(%u): %s", d->name,
				    d->port, p->srq_depth, strerror(errno));
	ret = worker_probe_inline(w);
	if (ret)
		return ret;
	ctl_inbox_init(&w->inbox, wake_cb, w);
	dp_refill_srq(w, true);
	worker_publish(w, now_ns());
	pc_info("%s: %s on PU %d (NUMA %d), CQ %d%s, SRQ %u (watermark %u), %s, %s verbs, %s idle%s",
		w->name, d->name, w->st.pu, w->st.numa_node, cqe,
		w->cq_single ? " single-threaded" : "", p->srq_depth, p->srq_watermark, w->domain,
		w->wr_ex ? "ibv_wr_*" : "generic", w->hybrid ? "hybrid" : "busy",
		p->idle != PC_IDLE_AUTO ? "" : w->hybrid ? " (auto: unbound, cores shared)"
							 : " (auto: a core of its own)");
	return 0;
}

static void chan_free(struct chan *ch)
{
	pc_ring_spsc_destroy(ch->to_app);
	pc_ring_spsc_destroy(ch->txfree);
}

/* Gives back what the worker itself holds, so the pools report only what the app kept. */
static void worker_reclaim(struct pc_worker *w)
{
	const struct pc_engine_params *p = w->p;
	unsigned int i;
	void *obj;

	for (i = 0; w->rx_msgs && i < p->rx_bufs; i++)
		if (w->rx_msgs[i].in_srq) {
			w->rx_msgs[i].in_srq = 0;
			pc_pool_put(w->rx, w->rx_msgs[i].buf);
		}
	for (i = 0; w->raw_msgs && i < p->raw_bufs; i++)
		if (w->raw_msgs[i].in_rq) {
			w->raw_msgs[i].in_rq = 0;
			pc_pool_put(w->raw, w->raw_msgs[i].buf);
		}
	for (i = 0; w->chans && i < w->nchans; i++) {
		struct chan *ch = &w->chans[i];

		while (ch->txfree && pc_ring_spsc_dequeue_burst(ch->txfree, &obj, 1))
			dp_msg_release(w, obj);
		/* their conns were freed before the workers are destroyed: forget them */
		while (ch->to_app && pc_ring_spsc_dequeue_burst(ch->to_app, &obj, 1)) {
			dp_msg_forget(msg_of(obj));
			dp_msg_release(w, msg_of(obj));
		}
		while (ch->ovf_head) {
			struct msg *m = pc_container_of(ch->ovf_head, struct msg, ctx);

			ch->ovf_head = m->ctx.next;
			dp_msg_forget(m);
			dp_msg_release(w, m);
		}
	}
}

static void pool_dereg(struct pc_pool *pool)
{
	if (pool && pool->mr && !ibv_dereg_mr(pool->mr))
		pool->mr = NULL;
}

/*
 * The worker's verbs objects, once no QP uses them; its memory (pools,
 * rings, stats) stays for whoever still reads it. @all: the pools' MRs
 * too (pc_pool_destroy() deregisters those it still has).
 */
static void worker_release(struct pc_worker *w, bool all)
{
	if (w->cq_unacked)
		ibv_ack_cq_events(w->cq, w->cq_unacked);
	w->cq_unacked = 0;
	if (w->srq)
		ibv_destroy_srq(w->srq);
	w->srq = NULL;
	worker_reclaim(w);
	if (w->cq)
		ibv_destroy_cq(w->cq);
	w->cq = NULL;
	worker_destroy_domain(w);
	if (w->ch)
		ibv_destroy_comp_channel(w->ch);
	w->ch = NULL;
	if (all) {
		pool_dereg(w->rx);
		pool_dereg(w->tx);
		pool_dereg(w->raw);
		rndv_release_verbs(w);
	}
}

static void worker_teardown(struct pc_worker *w)
{
	unsigned int i;

	worker_release(w, false);
	if (w->efd >= 0)
		close(w->efd);
	for (i = 0; w->chans && i < w->nchans; i++)
		chan_free(&w->chans[i]);
	pc_pool_destroy(w->tx);
	pc_pool_destroy(w->rx);
	pc_pool_destroy(w->raw);
	rndv_destroy(w);
	free(w->chans);
	free(w->wc);
	free(w->rsge);
	free(w->rwr);
	free(w->srq_wrs);
	free(w->chain.sge);
	free(w->chain.wr);
	free(w->pack_bufs);
	free(w->pack_msgs);
	free(w->tx_msgs);
	free(w->rx_msgs);
	free(w->raw_msgs);
	wstats_free(&w->ws);
}

/* --- stats ------------------------------------------------------------------------------ */

/* What pc_engine_stats() gives: the counters, the submission ring's and send pool's. */
void worker_sample(const struct pc_worker *w, struct pc_worker_stats *st)
{
	struct pc_pool_stats ps;

	/* name, pu, numa_node and the verbs flavour are set before the worker is ready */
	memcpy(st->name, w->st.name, sizeof(st->name));
	st->pu = w->st.pu;
	st->numa_node = w->st.numa_node;
	st->cq_single_threaded = w->st.cq_single_threaded;
	st->thread_domain = w->st.thread_domain;
	st->idle_policy = w->p->idle;
	st->busy_poll = w->st.busy_poll;
#define SAMPLE(f) st->f = STAT_LD(w->st.f);
	WORKER_COUNTERS(SAMPLE)
#undef SAMPLE
	/* the submission queue takes every submission: nothing is ever refused */
	st->submit_full = 0;
	pc_pool_stats(w->tx, &ps);
	st->tx_held = ps.in_use;
}

/* Copies the counters into the stats segment (worker thread). */
static void worker_publish(struct pc_worker *w, uint64_t now)
{
	struct pc_worker_stats st;

	if (!w->ws.blk)
		return;
	worker_sample(w, &st);
	wstats_publish(&w->ws, &st, now);
}

/* @c was attached: its counters move to a slot of the segment, readable from outside. */
static void conn_stats_open(struct pc_worker *w, struct conn *c)
{
	struct pc_stats_conn id = {
		.state = PC_STATS_CONN_ATTACHED,
		.qp_num = c->qpn,
		.worker = (uint16_t)w->idx,
		.raw = c->raw,
		.passive = c->passive,
		.peer_port = c->peer_port,
		.since_ns = now_ns(),
	};
	struct pc_stats_conn *slot;

	memcpy(id.peer, c->peer, sizeof(id.peer));
	slot = wstats_slot_open(&w->ws, &id);
	/* release: the slot's identity before pc_conn_info() on another thread reads it */
	if (slot)
		__atomic_store_n(&c->st, slot, __ATOMIC_RELEASE);
}

/* Applies control messages; returns how many there were. */
unsigned int worker_apply_ctl(struct pc_worker *w)
{
	const struct pc_engine_params *p = w->p;
	struct ctl_msg *cm;
	unsigned int n = 0;

	if (ctl_inbox_empty(&w->inbox))
		return 0;
	/* the wfcqueue orders the conn's fields */
	while ((cm = ctl_next(&w->inbox))) {
		struct conn *c = cm->conn;

		n++;
		switch (cm->kind) {
		case CTL_ATTACH:
			conn_set_state(c, CONN_ATTACHED);
			c->bl_tail = &c->bl_head;
			/* no credit yet: every grant comes from credits_grant() once UP */
			cq_conns_add(w, 1);
			if (c->raw) {
				/* every receive is posted before the accept leaves */
				dp_refill_rq(w, c);
				if (c->passive)
					ctl_post(w->control, c, CTL_ACCEPT);
			} else {
				dp_credited_join(w, c);
			}
			w->cache[c->qpn & (PC_ARRAY_SIZE(w->cache) - 1)] = c;
			conn_stats_open(w, c);
			STAT_ADD(w->st.conns, 1);
			break;
		case CTL_UP: {
			struct connect_req *r = NULL;

			if (c->state != CONN_ATTACHED)
				break;
			/* pc_connect() gave up already: control closes it; it never was UP */
			if (!c->passive && !(r = conn_connect_take(c)))
				break;
			if (!c->passive)
				conn_apply_peer(c, !p->no_pack);
			conn_set_state(c, CONN_UP);
			PC_PROBE(conn_up, c->qpn, c->passive);
			if (p->on_conn)
				p->on_conn((struct pc_conn *)c, PC_CONN_UP, p->arg);
			if (c->early_head)
				dp_deliver_early(w, c);
			if (r)
				conn_connect_answer(r, 0);
			/* its first grant (or a raw peer's receive queue top-up) */
			if (!c->raw)
				c->grant_pending = 1;
			dp_mark_dirty(w, c);
			break;
		}
		case CTL_CLOSE:
			/* drain_begin() ignores a conn already draining or retired */
			drain_begin(w, c);
			break;
		default:
			pc_err("%s: unexpected control message %u", w->name, cm->kind);
		}
		/* the message's reference (ctl_post()) */
		conn_drop(c);
	}
	return n;
}

void worker_wake(struct pc_worker *w)
{
	uint64_t one = 1;

	if (!w->hybrid)
		return;
	/*
	 * acq_rel RMW on `sleeping`, paired with the exchange in worker_sleep():
	 * either we see 1 and write the eventfd, or the worker's exchange reads
	 * our RMW and so sees the enqueue that preceded it.
	 */
	if (atomic_fetch_or_explicit(&w->sleeping, 0, memory_order_acq_rel))
		(void)!write(w->efd, &one, sizeof(one));
}

static bool worker_has_input(struct pc_worker *w)
{
	return !mpscq_empty(&w->submit) || !ctl_inbox_empty(&w->inbox) ||
	       atomic_load(&w->srq_limit) || atomic_load(&w->stop);
}

/*
 * One ibv_poll_cq(); a failure is counted every time and said once (it
 * would repeat on every turn), and reads as an empty poll.
 */
static pc_always_inline int worker_poll(struct pc_worker *w, int batch)
{
	int n = ibv_poll_cq(w->cq, batch, w->wc);

	if (pc_unlikely(n < 0)) {
		STAT_ADD(w->st.poll_errors, 1);
		if (!w->poll_failed)
			pc_err("%s: %s: ibv_poll_cq failed (%d); counted in poll_errors, not logged again",
			       w->name, w->dev->name, n);
		w->poll_failed = true;
		n = 0;
	}
	return n;
}

/*
 * Hybrid idle: arm the CQ (unless an arm still stands), re-check
 * everything (a completion or a submission may have raced with us), then
 * sleep on the completion channel and the eventfd. Nothing is lost:
 * completions that arrived before the arm are found by the re-poll, later
 * ones raise the event; submitters write the eventfd when they see
 * `sleeping` (Dekker pair with worker_wake()).
 */
/*
 * How long a sleep may last: 100 ms at most (stats stay fresh, fd-less
 * pollers and keepalive run), and never past the earliest call deadline or
 * grant deadline. 0: something is due now, do not sleep.
 */
static uint64_t sleep_ns(const struct pc_worker *w, uint64_t now)
{
	uint64_t due = w->call_due ? w->call_due : UINT64_MAX, ns = SLEEP_MAX_NS;

	if (w->grant_wait && w->grant_wait_due < due)
		due = w->grant_wait_due;
	if (due != UINT64_MAX)
		ns = due > now ? PC_MIN(stats_ticks_ns(due - now), ns) : 0;
	return ns;
}

static void worker_sleep(struct pc_worker *w)
{
	struct pollfd pfd[2 + PC_WORKER_MAX_POLLERS] = { { .fd = w->ch->fd, .events = POLLIN },
							 { .fd = w->efd, .events = POLLIN } };
	struct timespec ts;
	unsigned int npfd;
	uint64_t t0, t1, v, ns;
	int n, i;

	/* the sleep is timed in ticks: a clock read is a system call where the clocksource is hpet */
	t0 = stats_ticks();
	ns = sleep_ns(w, t0);
	if (!ns)
		return;
	/*
	 * An arm is one-shot: it stands until the next completion raises its
	 * event, and the event stays on the channel until read (below). While
	 * none was read the arm stands, or its event waits on the channel and
	 * ends the ppoll() at once: arming again would only cost a system call.
	 */
	if (!w->cq_armed) {
		if (ibv_req_notify_cq(w->cq, 0))
			return;
		w->cq_armed = true;
	}
	/* acq_rel: pairs with the RMW in worker_wake() */
	atomic_exchange_explicit(&w->sleeping, 1, memory_order_acq_rel);
	/* the last look before sleeping: a failed poll is counted as on every turn */
	n = worker_poll(w, (int)w->p->poll_batch);
	if (n > 0 || worker_has_input(w) || w->draining) {
		atomic_store(&w->sleeping, 0);
		if (n > 0)
			dp_complete(w, (unsigned int)n);
		return;
	}
	/*
	 * Published before the sleep only when a publish is due (t0: no clock
	 * read, a system call where the clocksource is hpet, for a sleep that
	 * publishes nothing): the block can miss the last 10 ms of work until
	 * the first sleep or turn past the due time, at most a sleep (100 ms)
	 * and a spin later.
	 */
	if (w->ws.blk && t0 >= w->ws.next_publish)
		worker_publish(w, now_ns());
	/* a poller added from now on wakes us through the eventfd */
	npfd = 2 + worker_poller_fds(w, pfd + 2, PC_WORKER_MAX_POLLERS);
	qsbr_offline();
	/* bounded: by the next deadline, else 100 ms (sleep_ns()) */
	ts.tv_sec = (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	n = ppoll(pfd, npfd, &ts, NULL);
	rcu_thread_online();
	atomic_store(&w->sleeping, 0);
	t1 = stats_ticks();
	STAT_ADD(w->st.sleeps, 1);
	STAT_ADD(w->st.sleep_ns, stats_ticks_ns(t1 - t0));
	/* the next spin: longer when an event soon ended this sleep, idle_spin_us after a long one */
	if (w->idle_ticks)
		w->idle_spin = idle_spin_next(w->idle_spin, w->idle_ticks, w->idle_cap,
					      t1 - w->idle_since, n > 0);
	if (n > 0 && (pfd[0].revents & POLLIN)) {
		struct ibv_cq *cq;
		void *ctx;

		/*
		 * One read: the CQ was armed once, so it raised at most one event
		 * since the last sleep (an event left from an arm whose sleep the
		 * eventfd ended is read at the next wake-up); a second read would
		 * only find nothing, a system call per wake-up.
		 */
		if (ibv_get_cq_event(w->ch, &cq, &ctx) == 0) {
			w->cq_unacked++;
			w->cq_armed = false;
		}
		/* ack in batches: ibv_ack_cq_events takes a lock */
		if (w->cq_unacked >= 64) {
			ibv_ack_cq_events(w->cq, w->cq_unacked);
			w->cq_unacked = 0;
		}
		STAT_ADD(w->st.wakeups_cq, 1);
	}
	if (n > 0 && (pfd[1].revents & POLLIN)) {
		(void)!read(w->efd, &v, sizeof(v));
		STAT_ADD(w->st.wakeups_submit, 1);
	}
	/* the poller itself consumes what made its fd readable */
	for (i = 2; n > 0 && i < (int)npfd; i++)
		if (pfd[i].revents) {
			STAT_ADD(w->st.wakeups_poller, 1);
			break;
		}
}

/* One turn of the loop; returns the amount of work found. */
static unsigned int worker_turn(struct pc_worker *w, const struct pc_engine_params *p)
{
	struct mpscq_node *node;
	unsigned int work, k;
	int n;

	/* 1-2. poll the CQ in a batch, dispatch each completion through wr_id */
	n = worker_poll(w, (int)p->poll_batch);
	STAT_ADD(w->st.polls, 1);
	if (pc_likely(n > 0)) {
		dp_complete(w, (unsigned int)n);
	} else {
		STAT_ADD(w->st.empty_polls, 1);
	}
	work = (unsigned int)n;

	/* 3. the application's submissions, in bursts */
	for (k = 0; k < SUBMIT_BURST && (node = mpscq_pop(&w->submit)); k++)
		dp_submit(w, ctx_of_qnode(node));
	work += k;
	/* 3a. deadlines, every turn while one is set (a clock read: rdtsc) */
	if (pc_unlikely(w->call_due)) {
		uint64_t now = stats_ticks();

		if (now >= w->call_due)
			calls_expire(w, now);
	}
	if (pc_unlikely(w->ovf_chans))
		dp_deliver_overflow(w);

	/* 3b. the application's pollers: what they post goes out in this turn's chains */
	k = atomic_load_explicit(&w->pollers_hi, memory_order_relaxed);
	if (k)
		work += worker_run_pollers(w, k);

	/*
	 * 3c. every HOUSEKEEP_TURNS turns: the application slots' send buffers,
	 * grants past their deadline (before the flush that sends them), and
	 * connections added or closing (a receive on one not yet applied
	 * applies it at once)
	 */
	if (!(w->turns & (HOUSEKEEP_TURNS - 1))) {
		if (w->nchans)
			dp_topup_txfree(w);
		if (w->grant_wait)
			dp_grant_wait_check(w);
		if (pc_unlikely(w->retire_wait != NULL))
			drain_retire_wait(w);
		work += worker_apply_ctl(w);
	}

	/* 4. one chain, one doorbell, per QP with work */
	if (w->dirty) {
		dp_flush(w);
		work++;
	}

	/* 5. refill the SRQ in one chained post once a poll batch is missing (or on the event) */
	if (p->srq_depth - w->srq_outstanding >= p->poll_batch ||
	    w->srq_outstanding < p->srq_watermark ||
	    atomic_load_explicit(&w->srq_limit, memory_order_relaxed))
		dp_refill_srq(w, false);

	/* 6. connections closing */
	if (w->draining)
		drain_poll(w);
	/* 7. probes for connections on which nothing arrived */
	ka_tick(w, !work);
	return work;
}

/*
 * One more empty turn of a hybrid worker: whether it has polled long enough
 * to sleep. The time rule (idle_spin_us, lengthened by worker_sleep() while
 * sleeps end soon: idle_pvt.h) reads the clock on the first empty turn of
 * a run and then every IDLE_CLOCK_TURNS; the count rule
 * (idle_spins) when the application set it. Both: the first bound reached.
 */
static pc_always_inline bool idle_enough(struct pc_worker *w, const struct pc_engine_params *p)
{
	uint32_t n = ++w->empty_turns;

	if (p->idle_spins && n >= p->idle_spins)
		return true;
	if (!w->idle_ticks)
		return false;
	if (n == 1) {
		w->idle_since = stats_ticks();
		return false;
	}
	return !(n & (IDLE_CLOCK_TURNS - 1)) && stats_ticks() - w->idle_since >= w->idle_spin;
}

static void *worker_main(void *arg)
{
	struct pc_worker *w = arg;
	const struct pc_engine_params *p = w->p;
	int ret;

	self_worker = w;
	pthread_setname_np(pthread_self(), w->name);
	ret = worker_setup(w);
	w->setup_err = ret;
	/* release: setup results are visible to the engine's waiter */
	atomic_store_explicit(&w->ready, ret ? -1 : 1, memory_order_release);
	if (ret) {
		worker_teardown(w);
		return NULL;
	}
	rcu_register_thread();
	while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
		unsigned int work;

		w->turns++;
		work = worker_turn(w, p);

		STAT_ADD(w->st.loops, 1);
		if (pc_unlikely(wstats_due(&w->ws)))
			worker_publish(w, now_ns());
		if (work || !w->hybrid) {
			w->empty_turns = 0;
		} else if (idle_enough(w, p)) {
			w->empty_turns = 0;
			worker_sleep(w);
		}
		/* 8. quiescent state: conns retired before now may be freed */
		if (!(w->turns & (HOUSEKEEP_TURNS - 1)))
			qsbr_quiescent();
	}
	qsbr_unregister();
	worker_publish(w, now_ns());
	/* resources go in worker_destroy(), once no QP uses the CQ and SRQ */
	return NULL;
}

int worker_start(struct pc_worker *w, const struct worker_cfg *cfg)
{
	int ret;

	w->p = cfg->p;
	w->idx = cfg->idx;
	w->dev = cfg->dev;
	w->topo = cfg->topo;
	w->place = cfg->place;
	w->conns = cfg->conns;
	w->control = cfg->control;
	w->must_bind = cfg->must_bind;
	w->stats_blk = cfg->stats_blk;
	w->stats_slots = cfg->stats_slots;
	w->efd = -1;
	w->grant_wait_due = UINT64_MAX;
	/* grant deadlines count in stats_ticks(): stats_clock_init() ran (engine.c) */
	w->grant_delay = stats_ns_ticks((uint64_t)w->p->grant_delay_us * 1000);
	w->idle_ticks = w->p->idle_spin_us ? stats_ns_ticks((uint64_t)w->p->idle_spin_us * 1000) : 0;
	w->idle_spin = w->idle_ticks;
	w->idle_cap = idle_spin_cap(w->idle_ticks, stats_ns_ticks((uint64_t)IDLE_SPIN_CAP_US * 1000));
	w->wr_ex = worker_wants_wr_ex(w);
	/* what the layers below call back up (worker_pvt.h) */
	w->up = (struct worker_up){
		.fail = drain_fail,
		.retire = drain_maybe_retire,
		.wr_failed = dp_wr_failed,
		.apply_ctl = worker_apply_ctl,
		.release_large = rndv_release,
	};
	w->st.pu = -1;
	w->st.numa_node = -1;
	/* pthread names are 15 chars: pc-w<N>-<device>, truncated */
	snprintf(w->st.name, sizeof(w->st.name), "pc-w%u-%.16s", w->idx, w->dev->name);
	memcpy(w->name, w->st.name, sizeof(w->name) - 1);
	ret = pthread_create(&w->thread, NULL, worker_main, w);
	if (ret)
		return set_error(-ret, "%s: pthread_create: %s", w->name, strerror(ret));
	/* acquire: pairs with the release in worker_main() */
	while (!atomic_load_explicit(&w->ready, memory_order_acquire))
		usleep(1000);
	if (atomic_load(&w->ready) < 0) {
		pthread_join(w->thread, NULL);
		return set_error(w->setup_err ? w->setup_err : -EIO, "%s: setup failed: %s",
				    w->name, pc_last_error());
	}
	return 0;
}

void worker_stop(struct pc_worker *w)
{
	uint64_t one = 1;

	if (w->joined)
		return;
	atomic_store(&w->stop, 1);
	(void)!write(w->efd, &one, sizeof(one));
	pthread_join(w->thread, NULL);
	w->joined = true;
}

/*
 * Its device is gone (removed): stops the thread and gives back every verbs
 * object it holds, so that the device can be closed; what app threads may
 * still read (stats, rings) stays until worker_destroy(). Control thread,
 * once none of its connections is left.
 */
void worker_release_device(struct pc_worker *w)
{
	worker_stop(w);
	worker_release(w, true);
}

void worker_destroy(struct pc_worker *w)
{
	/* the thread is joined: its objects are ours now */
	worker_teardown(w);
}
