// SPDX-License-Identifier: MIT
/*
 * The control thread: rdma_cm events (listen, accept, connect, disconnect),
 * the devices' async events (SRQ limit, LAST_WQE_REACHED, QP errors),
 * close requests and the destruction of retired connections.
 *
 * It sleeps in poll() (RCU offline) on the event channel, every device's
 * async fd and an eventfd; everything else reaches it through the request
 * wfcqueue.
 */
#include "engine_pvt.h"
#include "rndv_pvt.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "log_pvt.h"

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
}

/* Wakes the control thread for its inbox (any thread). */
static void control_wake(void *arg)
{
	struct pc_engine *e = arg;
	uint64_t one = 1;

	(void)!write(e->ctl_efd, &one, sizeof(one));
}

/* --- private data ---------------------------------------------------------------- */

/* Nothing granted up front: the worker grants every credit once the conn is up. */
static void cm_fill_priv(struct conn *c, struct wire_cm_priv *priv)
{
	wire_cm_fill(priv, 0, c->window, (uintptr_t)&c->credit_word[0], c->credit_mr->rkey,
		     c->e->p.msg_size);
	priv->max_large = rndv_max_large(c->w);
	/* one message per receive, each with a whole buffer (pc_engine_params.no_pack) */
	if (c->e->p.no_pack)
		priv->features &= ~PC_CM_FEAT_PACK;
}

/* --- choosing a worker ------------------------------------------------------------ */

/* Says why @w cannot take one more connection (set_error), naming the numbers. */
static int refusal(struct pc_worker *w, enum credit_verdict v, uint32_t raw_depth)
{
	const struct credit_limits *l = &w->lim;
	const struct credit_load *a = &w->adm;
	const char *dev = w->dev->name;
	unsigned int port = w->dev->port;

	switch (v) {
	case CREDIT_NO_CONNS:
		return set_error(-EBUSY, "%s port %u %s: %u connections, max_conns_per_worker %u",
				    dev, port, w->name, a->conns, l->max_conns);
	case CREDIT_NO_BUFS:
		return set_error(-EBUSY, "%s port %u %s: %u connections cannot each have min_window %u "
				    "credits from %u receive buffers (srq_depth)", dev, port, w->name,
				    a->conns - a->raw + 1, l->min_window, l->srq_depth);
	case CREDIT_NO_FLOOR:
		return set_error(-EBUSY, "%s port %u %s: its peers hold %u of its %u receive buffers "
				 "(credits granted are not taken back): no room for min_window %u "
				 "more; retry when they have used them or closed", dev, port, w->name,
				 a->committed, l->srq_depth, l->min_window);
	case CREDIT_NO_RAW:
		if (!l->raw_bufs)
			return set_error(-EBUSY, "%s port %u %s: a raw peer (no pollcore private data) "
					    "and raw_bufs is 0", dev, port, w->name);
		return set_error(-EBUSY, "%s port %u %s: %u raw connections hold %u of its %u "
				    "raw_bufs; %u more asked", dev, port, w->name, a->raw,
				    a->raw_taken, l->raw_bufs, raw_depth);
	case CREDIT_NO_CQ:
		return set_error(-EBUSY, "%s port %u %s: its CQ of %u entries cannot also hold %u "
				    "receives, %u connections' drain markers and %u sends", dev, port,
				    w->name, l->cqe, l->srq_depth + l->raw_bufs, a->conns + 1,
				    l->sq_depth);
	default:
		return 0;
	}
}

/*
 * The worker of device @ctx for a new connection: @want, or the least loaded
 * of those that can admit it (core/credit.h). NULL with pc_last_error()
 * saying why when none can. Control thread.
 */
static struct pc_worker *pick_worker(struct pc_engine *e, struct ibv_context *ctx, int want,
				     uint32_t raw_depth)
{
	struct pc_worker *best = NULL, *refused = NULL;
	enum credit_verdict why = CREDIT_ADMIT;
	unsigned int i, best_n = ~0u;

	for (i = 0; i < e->nworkers; i++) {
		struct pc_worker *w = &e->workers[i];
		unsigned int n = atomic_load(&w->nconns);
		enum credit_verdict v;

		if (w->dev->ctx != ctx || !engine_dev_usable(e, w->dev) ||
		    (want >= 0 && (unsigned int)want != i))
			continue;
		/* what the worker's conns commit, and the floors admitted before it attached them */
		w->adm.committed = __atomic_load_n(&w->adm_taken, __ATOMIC_RELAXED);
		v = credit_admit(&w->lim, &w->adm, raw_depth);
		if (v != CREDIT_ADMIT) {
			if (!refused) {
				refused = w;
				why = v;
			}
			continue;
		}
		if (n < best_n) {
			best = w;
			best_n = n;
		}
	}
	if (!best && refused)
		refusal(refused, why, raw_depth);
	else if (!best && engine_dev_gone(e, ctx))
		set_error(-ENODEV, "%s: this device was removed while the engine ran; the engine "
			     "no longer uses it (a new engine will)", engine_dev_gone(e, ctx));
	else if (!best)
		set_error(-EBUSY, "%s: no worker %d on this device", ibv_get_device_name(ctx->device),
			     want);
	return best;
}

/* The peer's numeric address and port, for the stats slot (pollcore-stat --conns). */
static void conn_name_peer(struct conn *c)
{
	struct sockaddr *sa = rdma_get_peer_addr(c->id);
	socklen_t len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						  : sizeof(struct sockaddr_in);

	if (getnameinfo(sa, len, c->peer, sizeof(c->peer), NULL, 0, NI_NUMERICHOST))
		snprintf(c->peer, sizeof(c->peer), "?");
	c->peer_port = ntohs(rdma_get_dst_port(c->id));
}

/* Creates the QP on @w, publishes the conn and hands it to the worker. */
/*
 * Reserves @w's SRQ for the floor of one more credited conn (adm_taken,
 * workers/dp_credit.h), or says why not: the worker may have granted that
 * room since pick_worker() looked.
 */
static int adm_reserve(struct pc_worker *w)
{
	uint32_t mw = w->lim.min_window;
	uint32_t cur = __atomic_load_n(&w->adm_taken, __ATOMIC_RELAXED);

	do {
		if ((uint64_t)cur + mw > w->lim.srq_depth) {
			w->adm.committed = cur;
			return refusal(w, CREDIT_NO_FLOOR, 0);
		}
	} while (!__atomic_compare_exchange_n(&w->adm_taken, &cur, cur + mw, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return 0;
}

static int conn_attach(struct pc_engine *e, struct conn *c, struct pc_worker *w)
{
	int ret = c->raw ? 0 : adm_reserve(w);

	if (ret)
		return ret;
	ret = worker_create_qp(w, c, c->id);
	if (ret) {
		if (!c->raw)
			__atomic_fetch_sub(&w->adm_taken, w->lim.min_window, __ATOMIC_RELAXED);
		return ret;
	}
	conn_name_peer(c);
	snprintf(c->devname, sizeof(c->devname), "%s", w->dev->name);
	c->widx = (int)w->idx;
	atomic_fetch_add(&w->nconns, 1);
	/* admitted: counted until retired (conn_retire()) */
	w->adm.conns++;
	w->adm.raw += c->raw;
	w->adm.raw_taken += c->raw ? c->rq_depth : 0;
	c->app_slot = w->next_slot++ % (w->nchans ? w->nchans : 1);
	conn_table_add(e->conns, c);
	atomic_fetch_add(&e->live_conns, 1);
	c->attached = true;
	ctl_post(&w->inbox, c, CTL_ATTACH);
	return 0;
}

/* Active conns wait in e->connecting until answered (control thread only). */
static void connecting_del(struct pc_engine *e, struct conn *c)
{
	struct conn **pp;

	for (pp = &e->connecting; *pp; pp = &(*pp)->connecting_next)
		if (*pp == c) {
			*pp = c->connecting_next;
			c->connecting_next = NULL;
			return;
		}
}

/* Destroys a conn that never reached a worker. */
static void conn_destroy_unattached(struct conn *c, int err)
{
	connecting_del(c->e, c);
	conn_connect_done(c, err);
	if (c->id) {
		if (c->id->qp)
			rdma_destroy_qp(c->id);
		rdma_destroy_id(c->id);
		c->id = NULL;
	}
	/* the engine's reference; a pc_connect() or a control message may hold others */
	conn_drop(c);
}

/*
 * Closes @c for @err (0: a normal close), @why saying it in words for its
 * DOWN (a static string; NULL: strerror(@err)).
 */
static void conn_begin_close(struct conn *c, int err, const char *why)
{
	if (c->closing)
		return;
	c->closing = true;
	/* a pc_close() from now on says the close is under way (-EALREADY) */
	atomic_store(&c->close_req, true);
	/* read by the worker once it takes CTL_CLOSE */
	c->ctl_err = err;
	c->ctl_why = why;
	if (!c->attached) {
		conn_destroy_unattached(c, err ? err : -ECONNABORTED);
		return;
	}
	/* moves the QP to ERR and tells the peer; the worker drains */
	rdma_disconnect(c->id);
	ctl_post(&c->w->inbox, c, CTL_CLOSE);
}

void control_close_conn(struct conn *c, int err, const char *why)
{
	conn_begin_close(c, err, why);
}

static void conn_retire(struct pc_engine *e, struct conn *c)
{
	/* a close request still in the inbox (it holds the memory) finds nothing to do */
	c->closing = true;
	c->w->adm.conns--;
	c->w->adm.raw -= c->raw;
	c->w->adm.raw_taken -= c->raw ? c->rq_depth : 0;
	conn_table_del(e->conns, c);
	connecting_del(e, c);
	conn_connect_done(c, c->close_err ? c->close_err : -ECONNRESET);
	rdma_destroy_qp(c->id);
	rdma_destroy_id(c->id);
	c->id = NULL;
	/* now, not with the memory: its device may have to be closed before that */
	if (c->credit_mr && !ibv_dereg_mr(c->credit_mr))
		c->credit_mr = NULL;
	atomic_fetch_sub(&e->live_conns, 1);
	/* readers (workers, tools) may still hold it until their next quiescent state */
	conn_free_rcu(c);
}

/* --- rdma_cm events ---------------------------------------------------------------- */

/* Rejects @id saying why (pc_last_error()), in the log and to the peer. */
static void reject(struct rdma_cm_id *id)
{
	struct wire_cm_rej rej;

	pc_warn("%s: refusing a connection: %s", ibv_get_device_name(id->verbs->device),
		pc_last_error());
	wire_rej_fill(&rej, pc_last_error());
	rdma_reject(id, &rej, sizeof(rej));
}

/* The peer's numeric address, for on_request() and the log. */
static void peer_name(struct rdma_cm_id *id, char *buf, size_t len)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						 : sizeof(struct sockaddr_in);

	if (getnameinfo(sa, sl, buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST))
		snprintf(buf, len, "?");
}

/*
 * A raw peer asks to connect to @w: the application's answer (on_request),
 * or the engine's preset one. Fills @c's receive queue shape and its
 * accept's private data. On a refusal, rejects @id (with the application's
 * private data when it refused) and returns a negative errno.
 */
static int raw_request(struct pc_engine *e, struct pc_worker *w, struct rdma_cm_event *ev,
		       struct conn *c)
{
	struct rdma_cm_id *id = ev->id;
	char peer[NI_MAXHOST];
	struct pc_conn_request req = {
		.device = w->dev->name,
		.port = w->dev->port,
		.peer = peer,
		.private_data = ev->param.conn.private_data,
		.private_len = ev->param.conn.private_data_len,
		.worker = w->idx,
		.max_recv_depth = PC_MIN(w->lim.raw_bufs - w->adm.raw_taken,
					 (uint32_t)w->dev->dev_attr.max_qp_wr),
		.msg_size = e->p.msg_size,
	};
	int ret;

	peer_name(id, peer, sizeof(peer));
	req.recv_depth = PC_MIN(PC_RAW_DEPTH_DEFAULT, req.max_recv_depth);
	req.recv_size = e->p.msg_size;
	ret = e->p.on_request ? e->p.on_request(&req, e->p.arg) : 0;
	if (ret) {
		pc_debug("%s port %u: on_request refused raw peer %s (%d)", w->dev->name,
			 w->dev->port, peer, ret);
		if (req.reply_len > PC_REJECT_DATA_MAX || (!req.reply && req.reply_len)) {
			pc_warn("%s port %u: on_request refused %s with %u bytes of private data "
				"(at most %u); rejected without them", w->dev->name, w->dev->port,
				peer, req.reply_len, PC_REJECT_DATA_MAX);
			req.reply_len = 0;
		}
		rdma_reject(id, req.reply_len ? req.reply : NULL, req.reply_len);
		return ret < 0 ? ret : -ECONNREFUSED;
	}
	if (!req.recv_depth || req.recv_depth > req.max_recv_depth || !req.recv_size ||
	    req.recv_size > e->p.msg_size || req.reply_len > PC_ACCEPT_DATA_MAX ||
	    (!req.reply && req.reply_len)) {
		/* nobody to return it to: the log says it */
		pc_warn("%s port %u: refusing raw peer %s: on_request answered recv_depth %u "
			"(1..%u), recv_size %u (1..%u), %u bytes of private data (at most %u)",
			w->dev->name, w->dev->port, peer, req.recv_depth, req.max_recv_depth,
			req.recv_size, e->p.msg_size, req.reply_len, PC_ACCEPT_DATA_MAX);
		rdma_reject(id, NULL, 0);
		return -EINVAL;
	}
	c->peer_data_len = (uint8_t)PC_MIN(req.private_len, PC_CONNECT_DATA_MAX);
	if (c->peer_data_len)
		memcpy(c->peer_data, req.private_data, c->peer_data_len);
	c->rq_depth = req.recv_depth;
	c->rq_size = req.recv_size;
	c->user = req.user;
	c->acc_len = req.reply_len;
	if (req.reply_len)
		memcpy(c->acc_data, req.reply, req.reply_len);
	return 0;
}

/* Accepts passive @c, answering its CONNECT_REQUEST's rd_atomic ask. */
static void conn_accept(struct conn *c)
{
	struct pc_worker *w = c->w;
	struct rdma_conn_param param = { 0 };
	struct wire_cm_priv priv;

	if (c->closing)
		return;
	if (c->raw) {
		param.private_data = c->acc_len ? c->acc_data : NULL;
		param.private_data_len = c->acc_len;
	} else {
		cm_fill_priv(c, &priv);
		param.private_data = &priv;
		param.private_data_len = sizeof(priv);
	}
	/*
	 * The request event's values are from this side's point of view
	 * already (ib_cm swaps the REQ's): initiator_depth is what the peer
	 * lets us have in flight (its responder resources), responder_resources
	 * what it will have in flight towards us (its initiator depth). An
	 * NVMe-oF host asks for responder resources only, and this side's
	 * RDMA READs need an initiator depth (nvmet-rdma answers the same way).
	 */
	param.responder_resources = (uint8_t)PC_MIN(c->acc_responder_resources,
						    w->dev->dev_attr.max_qp_rd_atom);
	param.initiator_depth = (uint8_t)PC_MIN(c->acc_initiator_depth,
						w->dev->dev_attr.max_qp_init_rd_atom);
	param.rnr_retry_count = 7;	/* credits prevent RNR; never fail on it */
	param.retry_count = 7;
	if (rdma_accept(c->id, &param)) {
		pc_warn("%s qp 0x%x: rdma_accept: %s", w->dev->name, c->qpn, strerror(errno));
		conn_begin_close(c, -errno, NULL);
		return;
	}
	pc_debug("%s qp 0x%x: accepted on %s (%s peer)", w->dev->name, c->qpn, w->name,
		 c->raw ? "raw" : "pollcore");
}

static void on_connect_request(struct pc_engine *e, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	const char *dev = ibv_get_device_name(id->verbs->device);
	struct wire_cm_priv peer;
	struct pc_worker *w;
	struct conn *c;
	int ret;

	ret = wire_cm_parse(dev, ev->param.conn.private_data, ev->param.conn.private_data_len,
			    &peer);
	w = ret < 0 ? NULL : pick_worker(e, id->verbs, e->p.choose_worker ?
					 e->p.choose_worker(dev, e->nworkers, e->p.arg) : -1,
					 ret == 0 ? 1 : 0);
	c = w ? conn_alloc() : NULL;
	if (!c) {
		if (w)
			set_error(-ENOMEM, "%s: out of memory for a connection", dev);
		reject(id);
		rdma_destroy_id(id);
		return;
	}
	c->e = e;
	c->id = id;
	c->passive = true;
	id->context = c;
	c->peer_priv = peer;
	c->peer_raw = ret == 0;
	c->acc_initiator_depth = ev->param.conn.initiator_depth;
	c->acc_responder_resources = ev->param.conn.responder_resources;
	if (c->peer_raw && raw_request(e, w, ev, c)) {
		c->id = NULL;
		conn_drop(c);
		rdma_destroy_id(id);
		return;
	}
	conn_apply_peer(c, !e->p.no_pack);
	/* raw peers get no credits: they bring their own flow control */
	c->window = c->raw ? 0 : e->p.window;
	ret = conn_attach(e, c, w);
	if (ret) {
		reject(id);
		if (c->attached)
			conn_begin_close(c, ret, NULL);
		else
			conn_destroy_unattached(c, ret);
		return;
	}
	/* a raw peer's receives are posted first: the worker says so (CTL_ACCEPT) */
	if (!c->raw)
		conn_accept(c);
}

static void on_route_resolved(struct pc_engine *e, struct conn *c)
{
	struct rdma_conn_param param = { 0 };
	struct pc_worker *w;
	struct wire_cm_priv priv;
	int ret;

	w = pick_worker(e, c->id->verbs, c->want_worker, 0);
	if (!w) {
		/* answered now, while pc_last_error() is pick_worker()'s */
		conn_connect_done(c, engine_dev_gone(e, c->id->verbs) ? -ENODEV : -EBUSY);
		conn_begin_close(c, -EBUSY, NULL);
		return;
	}
	/* credits come from the worker once up, on both sides */
	c->window = e->p.window;
	ret = conn_attach(e, c, w);
	if (ret) {
		conn_begin_close(c, ret, NULL);
		return;
	}
	cm_fill_priv(c, &priv);
	param.private_data = &priv;
	param.private_data_len = sizeof(priv);
	param.responder_resources = (uint8_t)PC_MIN(16, w->dev->dev_attr.max_qp_rd_atom);
	param.initiator_depth = (uint8_t)PC_MIN(16, w->dev->dev_attr.max_qp_init_rd_atom);
	param.rnr_retry_count = 7;
	param.retry_count = 7;
	if (rdma_connect(c->id, &param)) {
		set_error(-errno, "%s: rdma_connect: %s", w->dev->name, strerror(errno));
		conn_begin_close(c, -errno, NULL);
	}
}

static int cm_event_errno(enum rdma_cm_event_type t, int status)
{
	switch (t) {
	case RDMA_CM_EVENT_REJECTED: return -ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE: return -EHOSTUNREACH;
	case RDMA_CM_EVENT_ADDR_ERROR: return -EADDRNOTAVAIL;
	case RDMA_CM_EVENT_ROUTE_ERROR: return -ENETUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR: return status < 0 ? status : -ECONNABORTED;
	default: return -ECONNRESET;
	}
}

static void on_cm_event(struct pc_engine *e, struct rdma_cm_event *ev)
{
	struct conn *c = ev->id->context;
	char why[sizeof(((struct wire_cm_rej *)0)->why)];
	int err;

	/*
	 * acquire: pairs with the release in pc_engine_create(); a request may
	 * pick any worker, whose setup ran on its own thread
	 */
	(void)atomic_load_explicit(&e->complete, memory_order_acquire);
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		on_connect_request(e, ev);
		break;
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(ev->id, 2000))
			conn_begin_close(c, -errno, NULL);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		on_route_resolved(e, c);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!c->passive) {
			/* the worker applies it when it takes CTL_UP */
			err = wire_cm_parse(c->w->dev->name, ev->param.conn.private_data,
					    ev->param.conn.private_data_len, &c->peer_priv);
			if (err == 0)
				err = set_error(-EPROTO, "%s qp 0x%x: the server sent no pollcore "
						   "parameters (not a pollcore server?)",
						   c->w->dev->name, c->qpn);
			if (err < 0) {
				/* answered now, while pc_last_error() is still ours */
				conn_connect_done(c, err);
				conn_begin_close(c, err, NULL);
				break;
			}
			c->peer_raw = false;
		}
		ctl_post(&c->w->inbox, c, CTL_UP);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		err = cm_event_errno(ev->event, ev->status);
		if (ev->event == RDMA_CM_EVENT_REJECTED &&
		    wire_rej_parse(ev->param.conn.private_data, ev->param.conn.private_data_len,
				   why, sizeof(why)))
			set_error(err, "%s: refused by the server: %s",
				     ev->id->verbs ? ibv_get_device_name(ev->id->verbs->device)
						   : "rdma_cm", why);
		else
			set_error(err, "%s: %s (status %d)",
				     ev->id->verbs ? ibv_get_device_name(ev->id->verbs->device)
						   : "rdma_cm", rdma_event_str(ev->event), ev->status);
		/* a waiting pc_connect() is answered now, while pc_last_error() is this one */
		if (c && !c->passive)
			conn_connect_done(c, err);
		if (c)
			conn_begin_close(c, err, NULL);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (c)
			conn_begin_close(c, 0, "disconnected (RDMA_CM_EVENT_DISCONNECTED: the peer "
					 "closed, or its QP failed)");
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		engine_dev_lost(e, ev->id->verbs, "RDMA_CM_EVENT_DEVICE_REMOVAL");
		if (c)
			conn_begin_close(c, -ENODEV, "device removed (RDMA_CM_EVENT_DEVICE_REMOVAL)");
		break;
	default:
		pc_debug("rdma_cm: %s", rdma_event_str(ev->event));
	}
}

/* --- async events -------------------------------------------------------------------- */

/*
 * Device contexts are shared by every engine and by the application in the
 * process, and any of their control threads may read an event. An event's
 * QP or SRQ is acted on only when a listed engine's table or worker has it;
 * its context pointer, which may be the application's, is never trusted.
 * The list's lock is held while the event is handled, so no engine leaves
 * meanwhile (control_stop()).
 */
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pc_engine *engines;

/* The engine is complete: its workers' SRQs and its conns may be looked up. */
void control_publish(struct pc_engine *e)
{
	pthread_mutex_lock(&engines_lock);
	e->next_engine = engines;
	engines = e;
	e->listed = true;
	pthread_mutex_unlock(&engines_lock);
}

bool control_engine_live(const struct pc_engine *e, uint64_t serial)
{
	const struct pc_engine *x;
	bool live = false;

	pthread_mutex_lock(&engines_lock);
	for (x = engines; x && !live; x = x->next_engine)
		live = x == e && x->serial == serial;
	pthread_mutex_unlock(&engines_lock);
	return live;
}

static void control_unpublish(struct pc_engine *e)
{
	struct pc_engine **pp;

	pthread_mutex_lock(&engines_lock);
	for (pp = &engines; *pp; pp = &(*pp)->next_engine)
		if (*pp == e) {
			*pp = e->next_engine;
			break;
		}
	e->listed = false;
	pthread_mutex_unlock(&engines_lock);
}

static struct conn *own_conn(struct ibv_qp *qp)
{
	struct pc_engine *e;

	for (e = engines; e; e = e->next_engine) {
		/* RCU read side: the control thread is online while it handles events */
		struct conn *c = conn_lookup(e->conns, qp->qp_num);

		if (c && c->qp == qp)
			return c;
	}
	return NULL;
}

static struct pc_worker *own_worker(struct ibv_srq *srq)
{
	struct pc_engine *e;
	unsigned int i;

	for (e = engines; e; e = e->next_engine)
		for (i = 0; i < e->nworkers; i++)
			if (e->workers[i].srq == srq)
				return &e->workers[i];
	return NULL;
}

/* Every engine on @ctx loses that device (whichever control thread read the event). */
static void device_fatal(struct ibv_context *ctx)
{
	struct pc_engine *e;
	unsigned int d;

	for (e = engines; e; e = e->next_engine)
		for (d = 0; d < e->ndevs; d++)
			if (e->devs[d]->ctx == ctx) {
				atomic_store(&e->dlife[d].fatal, true);
				control_wake(e);
			}
}

/* With engines_lock held. */
static void on_async_event(struct pc_dev *d, struct ibv_async_event *ev)
{
	struct pc_worker *w;
	struct conn *c;

	switch (ev->event_type) {
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		w = own_worker(ev->element.srq);
		if (!w)
			goto foreign;
		atomic_store(&w->srq_limit, 1);
		worker_wake(w);
		break;
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		c = own_conn(ev->element.qp);
		if (!c)
			goto foreign;
		/* release: pairs with the acquire in drain_done() */
		atomic_store_explicit(&c->last_wqe, true, memory_order_release);
		worker_wake(c->w);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
		c = own_conn(ev->element.qp);
		if (!c)
			goto foreign;
		pc_err("%s port %u qp 0x%x: %s; closing the connection", d->name, d->port,
		       ev->element.qp->qp_num, ibv_event_type_str(ev->event_type));
		conn_request_close(c, &c->e->inbox, -EIO, ibv_event_type_str(ev->event_type));
		break;
	case IBV_EVENT_DEVICE_FATAL:
		pc_err("%s port %u: %s", d->name, d->port, ibv_event_type_str(ev->event_type));
		device_fatal(d->ctx);
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_CQ_ERR:
		pc_err("%s port %u: %s", d->name, d->port, ibv_event_type_str(ev->event_type));
		break;
	default:
		pc_debug("%s: async event %s", d->name, ibv_event_type_str(ev->event_type));
	}
	return;
foreign:
	/* another engine's or the application's object: not ours to touch */
	pc_debug("%s: %s on a QP or SRQ this engine does not own; ignored", d->name,
		 ibv_event_type_str(ev->event_type));
}

/* Answers and closes the active conns whose pc_connect() deadline passed. */
static void connect_deadlines(struct pc_engine *e)
{
	struct conn **pp = &e->connecting;
	uint64_t now = now_ns();

	while (*pp) {
		struct conn *c = *pp;
		struct connect_req *r;

		if (atomic_load_explicit(&c->creq, memory_order_relaxed) &&
		    now < c->connect_deadline_ns) {
			pp = &c->connecting_next;
			continue;
		}
		*pp = c->connecting_next;
		c->connecting_next = NULL;
		/* the worker may answer UP at the same time: one of us wins */
		r = conn_connect_take(c);
		if (!r)
			continue;
		if (c->qpn)
			set_error(-ETIMEDOUT, "%s qp 0x%x: not established within %u ms",
				     ibv_get_device_name(c->id->verbs->device), c->qpn,
				     c->connect_timeout_ms);
		else
			set_error(-ETIMEDOUT, "address or route not resolved within %u ms",
				     c->connect_timeout_ms);
		conn_connect_answer(r, -ETIMEDOUT);
		conn_begin_close(c, -ETIMEDOUT, NULL);
	}
}

/* Active side, on the control thread: every rdma_cm id is created here. */
static void conn_start_connect(struct pc_engine *e, struct conn *c)
{
	struct rdma_addrinfo *res = c->res;
	int ret = 0;

	c->res = NULL;
	c->connecting_next = e->connecting;
	e->connecting = c;
	if (rdma_create_id(e->ch, &c->id, c, RDMA_PS_TCP))
		ret = set_error(pc_neg_errno(-1), "rdma_create_id: %s", strerror(errno));
	else if (rdma_resolve_addr(c->id, res->ai_src_addr, res->ai_dst_addr, 2000))
		ret = set_error(pc_neg_errno(-1), "rdma_resolve_addr: %s", strerror(errno));
	rdma_freeaddrinfo(res);
	if (ret)
		conn_begin_close(c, ret, NULL);
}

/* --- the thread ----------------------------------------------------------------------- */

static void ctl_requests(struct pc_engine *e)
{
	struct ctl_msg *m;
	uint64_t v;

	(void)!read(e->ctl_efd, &v, sizeof(v));
	while ((m = ctl_next(&e->inbox))) {
		struct conn *c = m->conn;

		if (m->kind == CTL_CONNECT)
			conn_start_connect(e, c);
		else if (m->kind == CTL_CLOSE_REQ)
			conn_begin_close(c, c->req_err, c->req_why);
		else if (m->kind == CTL_RETIRE)
			conn_retire(e, c);
		else if (m->kind == CTL_ACCEPT)
			conn_accept(c);
		/* the message's reference (ctl_post()) */
		conn_drop(c);
	}
}

static void *ctl_main(void *arg)
{
	struct pc_engine *e = arg;
	struct pollfd *pfd = calloc(e->ndevs + 2, sizeof(*pfd));
	unsigned int i;

	pthread_setname_np(pthread_self(), "pc-control");
	rcu_register_thread();
	atomic_store(&e->ctl_ready, 1);
	while (pfd && !atomic_load(&e->ctl_stop)) {
		struct rdma_cm_event *ev;

		pfd[0] = (struct pollfd){ .fd = e->ch->fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = e->ctl_efd, .events = POLLIN };
		/* a lost device's context may be closed: its fd is not ours any more */
		for (i = 0; i < e->ndevs; i++)
			pfd[2 + i] = (struct pollfd){ .fd = e->dlife[i].state == DEV_OK ?
							    e->devs[i]->ctx->async_fd : -1,
						      .events = POLLIN };
		qsbr_offline();
		poll(pfd, e->ndevs + 2, 100);
		rcu_thread_online();

		while (rdma_get_cm_event(e->ch, &ev) == 0) {
			struct rdma_cm_event copy = *ev;
			uint8_t pd[256];	/* IB CM: REQ 56, REP 196, REJ 148 bytes */

			/* keep the private data: it dies with the ack */
			if (ev->param.conn.private_data_len && ev->param.conn.private_data) {
				memcpy(pd, ev->param.conn.private_data,
				       PC_MIN(sizeof(pd), ev->param.conn.private_data_len));
				copy.param.conn.private_data = pd;
			}
			/* ack first: rdma_destroy_id() on this id waits for its acks */
			rdma_ack_cm_event(ev);
			on_cm_event(e, &copy);
		}
		for (i = 0; i < e->ndevs; i++) {
			struct ibv_async_event aev;

			while (e->dlife[i].state == DEV_OK &&
			       ibv_get_async_event(e->devs[i]->ctx, &aev) == 0) {
				pthread_mutex_lock(&engines_lock);
				on_async_event(e->devs[i], &aev);
				pthread_mutex_unlock(&engines_lock);
				ibv_ack_async_event(&aev);
			}
		}
		ctl_requests(e);
		if (e->connecting)
			connect_deadlines(e);
		engine_dev_poll(e);
		qsbr_quiescent();
	}
	/* conns freed with call_rcu must be gone before the engine is */
	rcu_barrier();
	qsbr_unregister();
	free(pfd);
	return NULL;
}

int control_start(struct pc_engine *e)
{
	unsigned int i;
	int ret;

	ctl_inbox_init(&e->inbox, control_wake, e);
	e->ctl_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->ctl_efd < 0)
		return set_error(-errno, "eventfd: %s", strerror(errno));
	e->ch = rdma_create_event_channel();
	if (!e->ch)
		return set_error(pc_neg_errno(-1), "rdma_create_event_channel: %s",
				    strerror(errno));
	engine_dev_watch(e);
	ret = set_nonblock(e->ch->fd);
	for (i = 0; !ret && i < e->ndevs; i++)
		ret = set_nonblock(e->devs[i]->ctx->async_fd);
	if (ret)
		return set_error(ret, "fcntl(O_NONBLOCK): %s", strerror(-ret));
	ret = pthread_create(&e->ctl_thread, NULL, ctl_main, e);
	if (ret)
		return set_error(-ret, "pthread_create(control): %s", strerror(ret));
	e->ctl_started = true;
	while (!atomic_load(&e->ctl_ready))
		usleep(1000);
	return 0;
}

void control_stop(struct pc_engine *e)
{
	if (e->listed)
		control_unpublish(e);
	if (e->ctl_started) {
		atomic_store(&e->ctl_stop, 1);
		control_wake(e);
		pthread_join(e->ctl_thread, NULL);
	}
	if (e->listen_id)
		rdma_destroy_id(e->listen_id);
	if (e->ch)
		rdma_destroy_event_channel(e->ch);
	if (e->ctl_efd >= 0)
		close(e->ctl_efd);
}
