// SPDX-License-Identifier: MIT
/*
 * Rendezvous from and into the application's own registered memory
 * (rndv_pvt.h): pc_msg_wrap() makes a message of a buffer the application
 * registered with pc_mem_reg(), and on_large gives the destination of an
 * incoming large message. Either way the buffer stands in a struct lmsg of
 * its own, one of RNDV_ZC_SLOTS entries after the pool's blocks, with its
 * window and slot: the rendezvous of rndv.c runs unchanged on it, binding
 * the window on the application's registration (sending) or reading into
 * it (receiving), and nothing is copied. Where a block would go back to
 * the pool, the entry goes back to its stack and released() runs
 * (lm_free()).
 *
 * The free entries form a stack that any thread pops (pc_msg_wrap()) and
 * the worker pushes (as does a thread giving back an entry it popped and
 * could not use): a compare-and-swap on a word that holds a tag beside
 * the index, so an entry popped and pushed again meanwhile is not
 * mistaken for the one read (ABA). No lock, no system call.
 */
#include "rndv_pvt.h"

#include <string.h>
#include "log_pvt.h"

#define ZC_TAG (1ull << 32)

/* Any thread: a free entry, or NULL. */
static struct lmsg *zc_pop(struct rndv_pool *rv)
{
	uint64_t old = __atomic_load_n(&rv->zc_free, __ATOMIC_ACQUIRE), nw;
	uint32_t top, next;

	do {
		top = (uint32_t)old;
		if (!top)
			return NULL;
		/* maybe stale if another thread popped it first: then the exchange fails */
		next = __atomic_load_n(&rv->lm[top - 1].zc_next, __ATOMIC_RELAXED);
		nw = ((old & ~0xffffffffull) + ZC_TAG) | next;
	} while (!__atomic_compare_exchange_n(&rv->zc_free, &old, nw, true, __ATOMIC_ACQUIRE,
					      __ATOMIC_ACQUIRE));
	return &rv->lm[top - 1];
}

/* Worker (or any thread that popped @lm and did not use it); @lm is not touched after. */
void rndv_zc_push(struct rndv_pool *rv, struct lmsg *lm)
{
	uint64_t old = __atomic_load_n(&rv->zc_free, __ATOMIC_RELAXED), nw;

	do {
		__atomic_store_n(&lm->zc_next, (uint32_t)old, __ATOMIC_RELAXED);
		nw = ((old & ~0xffffffffull) + ZC_TAG) | (lm_index(rv, lm) + 1);
	} while (!__atomic_compare_exchange_n(&rv->zc_free, &old, nw, true, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

void rndv_zc_init(struct rndv_pool *rv, uint32_t first)
{
	uint32_t i;

	for (i = first; i < rv->nlm; i++) {
		rv->lm[i].zc = true;
		rv->lm[i].zc_next = i + 1 < rv->nlm ? i + 2 : 0;
	}
	rv->zc_free = first < rv->nlm ? first + 1 : 0;
}

/*
 * Is [@addr, @addr + @len) inside @handle's registration on @w's device?
 * 0 with *@mrp set, or the negative errno with pc_last_error() saying why.
 */
static int zc_check(struct pc_worker *w, const struct conn *c, const void *handle,
		    const void *addr, uint64_t len, struct ibv_mr **mrp)
{
	uintptr_t a = (uintptr_t)addr, base;
	struct ibv_mr *mr;

	if (pc_unlikely(!handle || !addr || !len))
		return set_error(-EINVAL, "%s qp 0x%x: an application buffer needs a handle, an "
				 "address and a length (%p, %p, %llu)", c->devname, c->qpn,
				 handle, addr, (unsigned long long)len);
	mr = mem_mr(handle, w->dev->pd);
	if (pc_unlikely(!mr))
		return set_error(-EXDEV, "%s qp 0x%x: the buffer's handle has no registration "
				 "on this connection's device (another device or engine)",
				 c->devname, c->qpn);
	base = (uintptr_t)mr->addr;
	if (pc_unlikely(a < base || len > mr->length || a - base > mr->length - len))
		return set_error(-ERANGE, "%s qp 0x%x: buffer [%p, +%llu) is outside its "
				 "registration [%p, +%zu)", c->devname, c->qpn, addr,
				 (unsigned long long)len, mr->addr, mr->length);
	*mrp = mr;
	return 0;
}

/* A popped entry takes the application's buffer (sending or receiving). */
static void zc_fill(struct lmsg *lm, void *addr, struct ibv_mr *mr, pc_release_fn released,
		    void *arg, uint64_t len)
{
	lm->zc_addr = addr;
	lm->zc_mr = mr;
	lm->zc_released = released;
	lm->zc_arg = arg;
	lm->zc_ok = false;
	lm->zc_status = 0;
	lm->size = len;
	lm->tx_counted = false;
	lm->m.call_done = NULL;
}

struct pc_msg *pc_msg_wrap(struct pc_conn *pconn, void *mem, void *addr, size_t len,
			   pc_release_fn released, void *arg)
{
	struct conn *c = (struct conn *)pconn;
	struct pc_worker *w = c->w;
	struct rndv_pool *rv;
	struct ibv_mr *mr = NULL;
	struct lmsg *lm;
	uint64_t peer;
	int ret;

	/* first: a handle may outlive its worker (past pc_engine_destroy()), not read it then */
	if (pc_unlikely(__atomic_load_n(&c->state, __ATOMIC_RELAXED) >= CONN_DRAINING))
		goto closed;
	rv = w->rv;
	ret = zc_check(w, c, mem, addr, len, &mr);
	if (ret)
		goto err;
	if (pc_unlikely(c->raw || !rv)) {
		ret = set_error(-EOPNOTSUPP, "%s qp 0x%x: %s", c->devname, c->qpn, c->raw ?
				"a raw peer's connection: it speaks no rendezvous" :
				"no rendezvous on this device (max_msg_size, memory windows)");
		goto err;
	}
	peer = len > w->p->msg_size ? c->rv.peer_max_large : c->peer_max_msg;
	if (pc_unlikely(len > rv->max_large || len > peer)) {
		ret = set_error(-EMSGSIZE, "%s qp 0x%x: a message of %zu bytes exceeds %s maximum "
				"%llu", c->devname, c->qpn, len, len > rv->max_large ?
				"the engine's" : "the peer's", len > rv->max_large ?
				(unsigned long long)rv->max_large : (unsigned long long)peer);
		goto err;
	}
	lm = zc_pop(rv);
	if (pc_unlikely(!lm)) {
		ret = set_error(-ENOBUFS, "%s qp 0x%x: %u application buffers in use on %s already",
				c->devname, c->qpn, RNDV_ZC_SLOTS, w->name);
		goto err;
	}
	/* the message keeps @c alive until released() ran (engine.h) */
	if (self_worker == w) {
		c->refs_w++;
	} else if (!conn_ref_app(c)) {
		rndv_zc_push(rv, lm);
		goto closed;
	}
	zc_fill(lm, addr, mr, released, arg, len);
	return lm_to_send(lm, c, addr, (uint32_t)len, (uint32_t)len);

closed:
	ret = set_error(-ENOTCONN, "%s qp 0x%x: pc_msg_wrap on a closed connection", c->devname,
			c->qpn);
err:
	errno = -ret;
	return NULL;
}

/*
 * on_large: the application's buffer for the descriptor @d, in an entry
 * ready for start_read(); NULL to read into the pool (declined, no entry
 * free, or an answer out of range: that one's released() runs now with
 * zc_check()'s errno, pc_last_error() saying why).
 */
struct lmsg *rndv_zc_recv(struct pc_worker *w, struct conn *c, const struct wire_rndv *d,
			  uint64_t req_id)
{
	struct rndv_pool *rv = w->rv;
	struct pc_large_buf b = { 0 };
	struct ibv_mr *mr = NULL;
	struct lmsg *lm;
	int ret;

	lm = zc_pop(rv);
	if (!lm)
		return NULL;
	if (!w->p->on_large((struct pc_conn *)c, d->len, d->inner, req_id, &b, w->p->arg)) {
		rndv_zc_push(rv, lm);
		return NULL;
	}
	ret = zc_check(w, c, b.mem, b.addr, d->len, &mr);
	if (ret) {
		rndv_zc_push(rv, lm);
		if (b.released)
			b.released(b.arg, ret);
		return NULL;
	}
	zc_fill(lm, b.addr, mr, b.released, b.arg, d->len);
	lm->rx_counted = false;
	lm->m.origin = NULL;
	return lm;
}

/* lm_free() of an application's entry: what its released() is told. */
int rndv_zc_status(const struct lmsg *lm)
{
	const struct conn *c = lm->ref_conn;

	if (lm->zc_ok || lm->zc_status)
		return lm->zc_status;
	/* given back when its connection had closed, or unsent */
	return c && c->state >= CONN_DRAINING ? -ENOTCONN : -ECANCELED;
}
