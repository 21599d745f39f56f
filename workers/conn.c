// SPDX-License-Identifier: MIT
/*
 * Connections: control messages between threads, the table keyed by QP
 * number (rculfhash: the control thread adds and deletes, workers and tools
 * look up under RCU), answering a waiting pc_connect(), and freeing.
 */
#include "conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- control messages -------------------------------------------------------------- */

/* Any thread; each kind is posted at most once per conn (its node is embedded). */
void ctl_post(struct ctl_inbox *in, struct conn *c, enum ctl_kind kind)
{
	struct ctl_msg *m = &c->ctl[kind];

	/* the message holds @c's memory until its consumer is done (conn_drop()) */
	conn_hold(c);
	m->kind = (uint8_t)kind;
	m->conn = c;
	cds_wfcq_node_init(&m->node);
	/* release: pairs with the acquire in ctl_next() */
	atomic_store_explicit(&m->published, 1, memory_order_release);
	/* release: the conn's fields are published with the node (wfcqueue) */
	cds_wfcq_enqueue(&in->head, &in->tail, &m->node);
	in->wake(in->wake_arg);
}

/*
 * Any thread; only the first request of a conn is posted, with its reason
 * (@err, and @why: a static string, or NULL when the worker has its own).
 * Returns whether this one was.
 */
bool conn_request_close(struct conn *c, struct ctl_inbox *control, int err, const char *why)
{
	if (atomic_exchange(&c->close_req, true))
		return false;
	/* published to the control thread by ctl_post() */
	c->req_err = err;
	c->req_why = why;
	ctl_post(control, c, CTL_CLOSE_REQ);
	return true;
}

/* --- the table ------------------------------------------------------------------------- */

static unsigned long qpn_hash(uint32_t qpn)
{
	return (unsigned long)qpn * 0x9e3779b97f4a7c15ull;
}

#if defined(__SANITIZE_THREAD__)
char rcu_gp_token;
#endif

/* RCU read side: a conn met in the table (published by conn_table_add()). */
struct conn *conn_of_node(struct cds_lfht_node *node)
{
	struct conn *c = caa_container_of(node, struct conn, node);

	tsan_subscribe(c);
	return c;
}

static int qpn_match(struct cds_lfht_node *node, const void *key)
{
	return conn_of_node(node)->qpn == *(const uint32_t *)key;
}

/* RCU read side (an online qsbr reader). */
struct conn *conn_lookup(struct cds_lfht *table, uint32_t qpn)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *node;

	cds_lfht_lookup(table, qpn_hash(qpn), qpn_match, &qpn, &it);
	node = cds_lfht_iter_get_node(&it);
	return node ? conn_of_node(node) : NULL;
}

/* Control thread. */
void conn_table_add(struct cds_lfht *table, struct conn *c)
{
	tsan_publish(c);
	cds_lfht_add(table, qpn_hash(c->qpn), &c->node);
}

/* Control thread; readers may hold @c until their next quiescent state. */
void conn_table_del(struct cds_lfht *table, struct conn *c)
{
	cds_lfht_del(table, &c->node);
}

/* --- peer parameters and connect answers -------------------------------------------------- */

/*
 * Applies what the peer said; before ATTACH (passive) or on the worker at UP
 * (active). @pack: this side sends packs (pc_engine_params.no_pack unset).
 */
void conn_apply_peer(struct conn *c, bool pack)
{
	c->raw = c->peer_raw;
	if (c->raw)
		return;
	c->peer_grant_seen = c->peer_priv.credits;
	c->peer_credit_addr = c->peer_priv.credit_addr;
	c->peer_credit_rkey = c->peer_priv.credit_rkey;
	c->peer_max_msg = c->peer_priv.max_msg;
	c->rv.peer_max_large = wire_cm_max_large(&c->peer_priv);
	c->rv.peer_abort = c->peer_priv.features & PC_CM_FEAT_ABORT;
	c->pack_room = pack && (c->peer_priv.features & PC_CM_FEAT_PACK)
			       ? c->peer_max_msg + WIRE_HDR_LEN
			       : 0;
	c->peer_window = c->peer_priv.window;
}

/* The waiting pc_connect(), for whoever answers it first; NULL for the others. */
struct connect_req *conn_connect_take(struct conn *c)
{
	/* acq_rel: the winner sees the waiter's req; the loser sees NULL */
	return atomic_exchange_explicit(&c->creq, NULL, memory_order_acq_rel);
}

void conn_connect_answer(struct connect_req *r, int err)
{
	r->err = err;
	if (err)
		snprintf(r->why, sizeof(r->why), "%s", pc_last_error());
	/* release: sem_post publishes err/why to the waiter in pc_connect() */
	sem_post(&r->done);
}

void conn_connect_done(struct conn *c, int err)
{
	struct connect_req *r = conn_connect_take(c);

	if (r)
		conn_connect_answer(r, err);
}

/* --- allocating and freeing ---------------------------------------------------------------- */

/* Zeroed, cache-aligned (its app-written line), counting locally; NULL with errno set. */
struct conn *conn_alloc(void)
{
	struct conn *c = aligned_alloc(PC_CACHELINE, sizeof(*c));

	if (c) {
		memset(c, 0, sizeof(*c));
		c->st = &c->st_local;
		/* the engine's own reference */
		atomic_init(&c->hrefs, 1);
	}
	return c;
}

static void conn_free_now(struct conn *c)
{
	if (c->credit_mr)
		ibv_dereg_mr(c->credit_mr);
	free((void *)c->credit_word);
	free(c->sq.slot);
	reqset_free(&c->reqs);
	free(c);
}

/*
 * Any thread; gives back one reference to @c's memory. The last frees it:
 * by then it is retired, out of the table, past a grace period, and no
 * control message names it.
 */
void conn_drop(struct conn *c)
{
	/* acq_rel: every use by the other holders happens before the free */
	if (atomic_fetch_sub_explicit(&c->hrefs, 1, memory_order_acq_rel) == 1)
		conn_free_now(c);
}

static void conn_free_cb(struct rcu_head *head)
{
	tsan_grace_period();
	conn_drop(caa_container_of(head, struct conn, rcu));
}

/* The engine's reference, after a grace period: workers and table walkers may still hold @c. */
void conn_free_rcu(struct conn *c)
{
	call_rcu(&c->rcu, conn_free_cb);
}
