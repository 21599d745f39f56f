// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_tgt.c - pollcore-nvmf's transport glue (nvmf_tgt.h):
 * the core's actions carried out on pollcore raw connections.
 *
 * A queue (struct nt_queue) is created at UP on the worker that owns its
 * connection, from the connect request's private data (pc_conn_info()'s
 * peer_data, checked again by nvmf_cm_request(), which is pure). It has
 * 2 x (hsqsize + 1) command slots (struct nt_req): a slot is busy from its
 * capsule's arrival until its CQE is sent and, for data to the host, until
 * the RDMA WRITE before it completed - which the host may outrun, sending
 * its next command as soon as it has the CQE. A capsule that still finds no
 * slot waits, held, in the queue's FIFO (never dropped).
 *
 * Every command runs to completion on the worker, as the core's actions
 * say (nvmf_ctrl.h):
 *   FETCH, WRITE  a staging buffer, then the data: RDMA READ from the host,
 *                 or copied from the capsule (page-aligned for O_DIRECT);
 *                 then nvmf_req_data() or the backend write. A RAM
 *                 namespace's in-capsule write is copied to the disk at once.
 *   READ          a staging buffer, the backend read into it, then the RDMA
 *                 WRITE and the CQE send in one chain (one doorbell). A RAM
 *                 namespace registered on the device (while it has queues,
 *                 like the staging pool) is sent from in place: no buffer,
 *                 no copy.
 *   FILL          a staging buffer, nvmf_req_fill(), WRITE + CQE.
 *   FLUSH, ZEROES, DISCARD  the backend (a flush of all namespaces and the
 *                 ranges of a deallocate one after the other).
 * The capsule's receive is given back (pc_msg_release()) as soon as its
 * bytes are not needed - always before the command's CQE is sent, so that
 * it is reposted first. Staging buffers are the worker's registered pool
 * (store.h), with a FIFO of commands waiting for one. A CQE that finds no
 * send buffer (ENOBUFS) waits in its queue's FIFO and the worker's poller
 * sends it once one is free: never dropped while the connection lives.
 *
 * The worker's poller also delivers asynchronous events (after
 * nt_event_notify()), closes the queues of dead controllers (keep-alive
 * expiry, admin queue gone: looked for when nvmf_tgt_dead_gen() changed),
 * and frees a queue once it is DOWN and no command of it is in the backend
 * any more. It runs on every loop turn, so an idle turn costs it three
 * loads: no clock read, no locked instruction.
 */
#include "nvmf_tgt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum rq_state { RQ_FREE = 0, RQ_BUSY, RQ_HELD };

/**
 * struct nt_req - one command slot of a queue; only its worker touches it.
 * @r: the core's (first: a held AER's nvmf_req is a cast away).
 * @op: its RDMA READ or WRITE.
 * @bio: its backend operation.
 * @sw: waiting for a staging buffer.
 * @tq: its queue.
 * @capsule: the received capsule, until its bytes are not needed.
 * @stage: staging buffer, NULL while none is held.
 * @stage_idx: its index.
 * @src: the data to the host: the staging buffer, or a RAM namespace's own
 *       bytes (a read in place); NULL when there is none.
 * @src_lkey: its local key.
 * @act: what the staging buffer is for, then which backend operation runs.
 * @state: enum rq_state.
 * @iter: FLUSH of all: the next namespace; DISCARD: the next range.
 * @next: the free list, or the queue's CQE FIFO.
 */
struct nt_req {
	struct nvmf_req r;
	struct pc_op op;
	struct blk_bio bio;
	struct blk_stage_waiter sw;
	struct nt_queue *tq;
	struct pc_msg *capsule;
	uint8_t *stage;
	uint32_t stage_idx;
	const uint8_t *src;
	uint32_t src_lkey;
	uint8_t act;
	uint8_t state;
	uint32_t iter;
	struct nt_req *next;
};

/**
 * struct nt_queue - one host queue (one connection); only its worker
 * touches it, from UP until it is freed (DOWN, and no command busy).
 */
struct nt_queue {
	struct nt_wq *wq;
	struct pc_conn *conn;	/* a reference of ours, until the queue is freed */
	struct nvmf_queue *q;
	uint16_t qid, hsqsize;
	uint32_t qp_num;
	uint32_t ram_att;	/* bit i: attached to the worker's ram[i] */
	struct nt_req *reqs;
	uint32_t nreqs;
	struct nt_req *free;
	uint32_t busy;		/* slots in use, held AERs excepted */
	struct pc_msg *pend_head, *pend_tail;	/* capsules waiting for a slot (msg->user) */
	struct nt_req *cqe_head, *cqe_tail;	/* CQEs waiting for a send buffer */
	bool down, closing, in_cqe_wait;
	struct nt_queue *next, *prev;	/* the worker's queues */
	struct nt_queue *cqe_next;	/* the worker's queues with CQEs waiting */
};

static void do_act(struct nt_req *rq, enum nvmf_act act);

/* Closes @tq's connection (once); its DOWN follows. */
static void tq_close(struct nt_queue *tq)
{
	if (tq->closing || tq->down)
		return;
	tq->closing = true;
	tq->wq->st.closes++;
	pc_close(tq->conn);
}

static void capsule_release(struct nt_req *rq)
{
	if (rq->capsule) {
		pc_msg_release(rq->capsule);
		rq->capsule = NULL;
	}
}

static void start_cmd(struct nt_queue *tq, struct pc_msg *m);

/* The slot is free again; a capsule that waited for one starts. */
static void rq_free(struct nt_req *rq)
{
	struct nt_queue *tq = rq->tq;
	struct pc_msg *m;

	capsule_release(rq);
	rq->state = RQ_FREE;
	rq->next = tq->free;
	tq->free = rq;
	if (--tq->busy == 0 && pc_unlikely(tq->down))
		tq->wq->reap = true; /* the poller frees it */
	if (rq->stage) {
		rq->stage = NULL;
		blk_stage_put(&tq->wq->stage, rq->stage_idx); /* may start a waiting command */
	}
	if (tq->pend_head && !tq->down && !tq->closing) {
		m = tq->pend_head;
		tq->pend_head = m->user;
		if (!tq->pend_head)
			tq->pend_tail = NULL;
		start_cmd(tq, m);
	}
}

static void write_done(struct pc_op *op, int status)
{
	struct nt_req *rq = pc_container_of(op, struct nt_req, op);

	if (pc_unlikely(status)) {
		rq->tq->wq->st.xfer_errors++;
		tq_close(rq->tq);
	}
	rq_free(rq);
}

/*
 * Sends @rq's CQE, after an RDMA WRITE of its data when it has any: false
 * when no send buffer is free (the caller queues it). Everything it needs
 * is read before pc_rdma(), whose done() may run (and free the slot) before
 * it returns.
 */
static bool try_send_cqe(struct nt_req *rq)
{
	struct nt_queue *tq = rq->tq;
	struct nt_wq *wq = tq->wq;
	struct pc_msg *m = pc_msg_alloc(tq->conn);
	bool data;

	if (pc_unlikely(!m)) {
		if (errno == ENOBUFS)
			return false;
		wq->st.cqe_lost++; /* closing: DOWN follows */
		rq_free(rq);
		return true;
	}
	memcpy(m->data, &rq->r.cqe, sizeof(rq->r.cqe));
	m->len = sizeof(rq->r.cqe);
	if (rq->r.cqe.status >> 1)
		wq->st.errors++;
	data = rq->src && rq->r.xfer.dir == NVMF_XFER_TO_HOST && !(rq->r.cqe.status >> 1) &&
	       rq->r.xfer.len;
	if (data) {
		rq->op = (struct pc_op){.code = PC_OP_WRITE,
					.local = (void *)rq->src,
					.lkey = rq->src_lkey,
					.len = rq->r.xfer.len,
					.remote_addr = rq->r.xfer.addr,
					.rkey = rq->r.xfer.key,
					.done = write_done};
		if (pc_unlikely(pc_rdma(tq->conn, &rq->op))) { /* on the owning worker: -EINVAL */
			wq->st.xfer_errors++;
			pc_msg_release(m);
			tq_close(tq);
			rq_free(rq);
			return true;
		}
	}
	/* in the same chain as the WRITE: the host finds the data placed when the CQE arrives */
	if (pc_unlikely(pc_send(m)))
		wq->st.cqe_lost++; /* -ENOTCONN: released; the close is under way */
	if (!data)
		rq_free(rq);
	return true;
}

static void cqe_enqueue(struct nt_queue *tq, struct nt_req *rq)
{
	rq->next = NULL;
	if (tq->cqe_tail)
		tq->cqe_tail->next = rq;
	else
		tq->cqe_head = rq;
	tq->cqe_tail = rq;
	if (!tq->in_cqe_wait) {
		tq->in_cqe_wait = true;
		tq->cqe_next = tq->wq->cqe_wait;
		tq->wq->cqe_wait = tq;
	}
}

static void send_cqe(struct nt_req *rq)
{
	struct nt_queue *tq = rq->tq;

	if (pc_unlikely(tq->down || tq->closing)) {
		tq->wq->st.cqe_lost++;
		rq_free(rq);
		return;
	}
	if (pc_unlikely(tq->cqe_head)) { /* others wait already: in order */
		cqe_enqueue(tq, rq);
		return;
	}
	if (pc_unlikely(!try_send_cqe(rq))) {
		tq->wq->st.cqe_waits++;
		cqe_enqueue(tq, rq);
	}
}

static const char *const bio_what[] = {
	[BLK_BIO_READ] = "read", [BLK_BIO_WRITE] = "write", [BLK_BIO_FLUSH] = "flush",
	[BLK_BIO_ZEROES] = "write zeroes", [BLK_BIO_DISCARD] = "deallocate",
};

/* The backend's outcome (store.h), on the worker. */
static void bio_done(struct blk_bio *bio, int res)
{
	struct nt_req *rq = pc_container_of(bio, struct nt_req, bio);
	struct nt_queue *tq = rq->tq;
	struct nt_tgt *t = tq->wq->tgt;
	struct nt_stats *st = &tq->wq->st;
	uint64_t off, len;

	if (pc_unlikely(tq->down)) {
		rq_free(rq);
		return;
	}
	if (pc_unlikely(res)) {
		if (st->io_errors++ < 10)
			fprintf(stderr, PROG ": worker %u: namespace %u: %s of %" PRIu64
					" bytes at %" PRIu64 " failed: %s\n",
				tq->wq->idx, rq->r.io.nsid, bio_what[rq->bio.op], rq->bio.len,
				rq->bio.off, strerror(-res));
	} else if (rq->act == NVMF_ACT_FLUSH && !rq->r.io.backend && ++rq->iter < t->nr_ns) {
		rq->bio.op = BLK_BIO_FLUSH; /* a flush of all: the next namespace */
		t->be[rq->iter].submit(&t->be[rq->iter], tq->wq->be[rq->iter], &rq->bio);
		return;
	} else if (rq->act == NVMF_ACT_DISCARD) {
		while (++rq->iter < rq->r.io.nr_ranges) {
			if (nvmf_req_range(&rq->r, rq->stage, rq->iter, &off, &len) || !len)
				continue;
			rq->bio.op = BLK_BIO_DISCARD;
			rq->bio.off = off;
			rq->bio.len = len;
			((struct blk_backend *)rq->r.io.backend)
				->submit(rq->r.io.backend, tq->wq->be[rq->r.io.nsid - 1], &rq->bio);
			return;
		}
	}
	if (!res) {
		switch (rq->act) {
		case NVMF_ACT_READ:
			st->reads++;
			st->bytes_read += rq->r.io.len;
			break;
		case NVMF_ACT_WRITE:
			st->writes++;
			st->bytes_written += rq->r.io.len;
			break;
		case NVMF_ACT_FLUSH: st->flushes++; break;
		case NVMF_ACT_ZEROES: st->zeroes++; break;
		default: st->discards++; break;
		}
	}
	do_act(rq, nvmf_req_complete(tq->q, &rq->r, res));
}

/* Starts a backend operation on the command's namespace (the core's io). */
static void bio_start(struct nt_req *rq, uint8_t op, void *buf, uint64_t off, uint64_t len)
{
	struct blk_backend *b = rq->r.io.backend;

	rq->bio = (struct blk_bio){.op = op,
				   .flags = rq->r.io.flags & NVMF_IO_FUA ? BLK_BIO_FUA : 0,
				   .buf = buf,
				   .off = off,
				   .len = len,
				   .done = bio_done};
	b->submit(b, rq->tq->wq->be[rq->r.io.nsid - 1], &rq->bio);
}

/* The data of a FETCH or WRITE is in the staging buffer. */
static void data_in(struct nt_req *rq)
{
	struct nt_queue *tq = rq->tq;

	if (rq->act == NVMF_ACT_WRITE)
		bio_start(rq, BLK_BIO_WRITE, rq->stage, rq->r.io.off, rq->r.io.len);
	else
		do_act(rq, nvmf_req_data(tq->q, &rq->r, rq->stage, rq->r.xfer.len));
}

static void read_done(struct pc_op *op, int status)
{
	struct nt_req *rq = pc_container_of(op, struct nt_req, op);

	if (pc_unlikely(status || rq->tq->down)) {
		/* the QP is in error: the connection is closing (its DOWN follows) */
		if (status)
			rq->tq->wq->st.xfer_errors++;
		tq_close(rq->tq);
		rq_free(rq);
		return;
	}
	data_in(rq);
}

/* @rq holds a staging buffer now: carry on with what it was for. */
static void staged(struct nt_req *rq, uint8_t *buf, uint32_t idx)
{
	struct nt_queue *tq = rq->tq;
	const struct nvmf_xfer *x = &rq->r.xfer;

	rq->stage = buf;
	rq->stage_idx = idx;
	if (pc_unlikely(tq->down || tq->closing)) {
		rq_free(rq);
		return;
	}
	switch (rq->act) {
	case NVMF_ACT_FETCH:
	case NVMF_ACT_WRITE:
		if (x->in_capsule) {
			/* copied: the receive goes back now, and O_DIRECT gets an aligned buffer */
			memcpy(buf, (const uint8_t *)rq->capsule->data + x->icd_off, x->len);
			capsule_release(rq);
			tq->wq->st.in_capsule++;
			data_in(rq);
			return;
		}
		capsule_release(rq);
		rq->op = (struct pc_op){.code = PC_OP_READ,
					.local = buf,
					.lkey = tq->wq->stage.reg.lkey,
					.len = x->len,
					.remote_addr = x->addr,
					.rkey = x->key,
					.done = read_done};
		if (pc_unlikely(pc_rdma(tq->conn, &rq->op))) {
			tq->wq->st.xfer_errors++;
			tq_close(tq);
			rq_free(rq);
		}
		return;
	case NVMF_ACT_FILL:
		capsule_release(rq);
		rq->src = buf;
		rq->src_lkey = tq->wq->stage.reg.lkey;
		do_act(rq, nvmf_req_fill(tq->q, &rq->r, buf, x->len));
		return;
	default: /* READ */
		capsule_release(rq);
		rq->src = buf;
		rq->src_lkey = tq->wq->stage.reg.lkey;
		bio_start(rq, BLK_BIO_READ, buf, rq->r.io.off, rq->r.io.len);
		return;
	}
}

/*
 * A write to a RAM namespace whose data came in the capsule: copied from the
 * receive buffer to the disk at once (the staging buffer is for data that an
 * RDMA READ brings, which may fail halfway: the disk never sees such data).
 * False when the command is not such a one.
 */
static bool write_in_place(struct nt_req *rq)
{
	struct nt_queue *tq = rq->tq;
	struct nt_wq *wq = tq->wq;
	const struct blk_backend *b = rq->r.io.backend;
	const struct nvmf_xfer *x = &rq->r.xfer;

	if (!b->mem || !x->in_capsule || rq->stage)
		return false;
	/* the core checked the range against the size, and icd_off + len against the capsule */
	memcpy(b->mem + rq->r.io.off, (const uint8_t *)rq->capsule->data + x->icd_off, x->len);
	capsule_release(rq);
	rq->act = NVMF_ACT_WRITE;
	wq->st.writes++;
	wq->st.in_capsule++;
	wq->st.bytes_written += rq->r.io.len;
	do_act(rq, nvmf_req_complete(tq->q, &rq->r, 0));
	return true;
}

/*
 * A read of a RAM namespace registered on the device: the RDMA WRITE goes
 * from the disk's own bytes, with no staging buffer and no copy (the RAM
 * backend's read is a memcpy and completes at once, so nothing is skipped
 * but the copy). False when the namespace is not such a one.
 */
static bool read_in_place(struct nt_req *rq)
{
	struct nt_queue *tq = rq->tq;
	struct nt_wq *wq = tq->wq;
	const struct blk_backend *b = rq->r.io.backend;
	const struct blk_mreg *reg = &wq->ram[rq->r.io.nsid - 1];

	if (!b->mem || !reg->mr || rq->stage)
		return false;
	capsule_release(rq);
	rq->act = NVMF_ACT_READ;
	rq->src = b->mem + rq->r.io.off; /* the core checked the range against the size */
	rq->src_lkey = reg->lkey;
	wq->st.reads++;
	wq->st.in_place++;
	wq->st.bytes_read += rq->r.io.len;
	do_act(rq, nvmf_req_complete(tq->q, &rq->r, 0));
	return true;
}

static void stage_ready(struct blk_stage_waiter *w, uint8_t *buf, uint32_t idx)
{
	staged(pc_container_of(w, struct nt_req, sw), buf, idx);
}

/* Carries out the core's answer for @rq (nvmf_ctrl.h). */
static void do_act(struct nt_req *rq, enum nvmf_act act)
{
	struct nt_queue *tq = rq->tq;
	uint64_t off, len;
	uint8_t *buf;
	uint32_t idx;

	switch (act) {
	case NVMF_ACT_COMPLETE:
		capsule_release(rq); /* reposted before the CQE goes out */
		send_cqe(rq);
		return;
	case NVMF_ACT_HOLD:
		capsule_release(rq);
		rq->state = RQ_HELD; /* nvmf_queue_poll_event() gives it back */
		if (--tq->busy == 0 && pc_unlikely(tq->down))
			tq->wq->reap = true;
		return;
	case NVMF_ACT_FETCH:
	case NVMF_ACT_WRITE:
	case NVMF_ACT_FILL:
	case NVMF_ACT_READ:
		if (pc_unlikely(rq->r.xfer.len > tq->wq->stage.buf_size)) {
			tq_close(tq); /* the core bounds transfers by MDTS: not reached */
			rq_free(rq);
			return;
		}
		if (act == NVMF_ACT_READ && read_in_place(rq))
			return;
		if (act == NVMF_ACT_WRITE && write_in_place(rq))
			return;
		rq->act = (uint8_t)act;
		if (rq->stage) {
			staged(rq, rq->stage, rq->stage_idx);
			return;
		}
		rq->sw.ready = stage_ready;
		if (blk_stage_get(&tq->wq->stage, &rq->sw, &buf, &idx))
			staged(rq, buf, idx);
		return;
	case NVMF_ACT_FLUSH:
		capsule_release(rq);
		rq->act = (uint8_t)act;
		rq->iter = 0;
		if (!rq->r.io.backend) { /* every namespace, one after the other */
			struct nt_tgt *t = tq->wq->tgt;

			rq->bio = (struct blk_bio){.op = BLK_BIO_FLUSH, .done = bio_done};
			t->be[0].submit(&t->be[0], tq->wq->be[0], &rq->bio);
			return;
		}
		bio_start(rq, BLK_BIO_FLUSH, NULL, 0, 0);
		return;
	case NVMF_ACT_ZEROES:
		capsule_release(rq);
		rq->act = (uint8_t)act;
		bio_start(rq, rq->r.io.flags & NVMF_IO_DEALLOCATE ? BLK_BIO_DISCARD : BLK_BIO_ZEROES,
			  NULL, rq->r.io.off, rq->r.io.len);
		return;
	case NVMF_ACT_DISCARD:
		/* the ranges are in the staging buffer (FETCH), kept until the completion */
		rq->act = (uint8_t)act;
		for (rq->iter = 0; rq->iter < rq->r.io.nr_ranges; rq->iter++) {
			if (nvmf_req_range(&rq->r, rq->stage, rq->iter, &off, &len) || !len)
				continue;
			bio_start(rq, BLK_BIO_DISCARD, NULL, off, len);
			return;
		}
		tq->wq->st.discards++;
		do_act(rq, nvmf_req_complete(tq->q, &rq->r, 0)); /* only empty ranges */
		return;
	default: /* CLOSE */
		tq_close(tq);
		rq_free(rq);
		return;
	}
}

static void start_cmd(struct nt_queue *tq, struct pc_msg *m)
{
	struct nt_req *rq = tq->free;

	tq->free = rq->next;
	rq->next = NULL;
	rq->state = RQ_BUSY;
	rq->capsule = m;
	rq->stage = NULL;
	rq->src = NULL;
	tq->busy++;
	tq->wq->st.cmds++;
	do_act(rq, nvmf_queue_submit(tq->q, m->data, m->len, &rq->r));
}

static void on_msg(struct pc_msg *m, void *arg)
{
	struct nt_queue *tq = pc_conn_user(m->conn);

	(void)arg;
	if (pc_unlikely(!tq || tq->down || tq->closing)) {
		pc_msg_release(m);
		return;
	}
	if (pc_unlikely(!tq->free || tq->pend_head)) {
		m->user = NULL; /* held, in order, until a slot is free */
		if (tq->pend_tail)
			tq->pend_tail->user = m;
		else
			tq->pend_head = m;
		tq->pend_tail = m;
		return;
	}
	start_cmd(tq, m);
}

/* ---- queues: up, down, freed ---------------------------------------------------- */

static void tq_free(struct nt_queue *tq)
{
	struct nt_wq *wq = tq->wq;

	if (tq->prev)
		tq->prev->next = tq->next;
	else if (wq->queues == tq)
		wq->queues = tq->next;
	if (tq->next)
		tq->next->prev = tq->prev;
	nvmf_queue_destroy(tq->q); /* held AERs are dropped with it */
	if (tq->conn)
		pc_conn_put(tq->conn);
	free(tq->reqs);
	free(tq);
}

/*
 * Registers the worker's RAM namespaces on the device with the first queue
 * that comes up (local access only: the HCA reads them for RDMA WRITEs).
 * One that cannot be registered (e.g. RLIMIT_MEMLOCK) is said once and its
 * reads go through staging buffers, as a file's do.
 */
static void ram_attach(struct nt_wq *wq, struct nt_queue *tq, struct pc_conn *conn)
{
	uint32_t i;

	for (i = 0; i < wq->tgt->nr_ns; i++) {
		if (!wq->ram[i].mem || wq->ram_failed[i])
			continue;
		if (blk_mreg_attach(&wq->ram[i], conn)) {
			wq->ram_failed[i] = !wq->ram[i].users;
			fprintf(stderr, PROG ": worker %u: namespace %u: cannot register its %zu "
					"bytes: %s; its reads are copied through staging buffers\n",
				wq->idx, i + 1, wq->ram[i].len, pc_last_error());
			continue;
		}
		tq->ram_att |= 1u << i;
	}
}

static void ram_detach(struct nt_wq *wq, struct nt_queue *tq)
{
	uint32_t i;

	for (i = 0; i < wq->tgt->nr_ns; i++)
		if (tq->ram_att & (1u << i))
			blk_mreg_detach(&wq->ram[i]);
	tq->ram_att = 0;
}

static void queue_up(struct nt_wq *wq, struct pc_conn *conn)
{
	struct nt_tgt *t = wq->tgt;
	struct nvmf_rdma_cm_rep rep;
	struct nvmf_rdma_cm_rej rej;
	struct nvmf_cm_params p;
	struct pc_conn_info ci;
	struct nt_queue *tq;
	uint32_t k;
	int ret;

	pc_conn_set_user(conn, NULL);
	pc_conn_info(conn, &ci);
	/* accepted by on_request from the same bytes: the check is pure */
	if (nvmf_cm_request(t->core, ci.peer_data, ci.peer_data_len, &p, &rep, &rej)) {
		fprintf(stderr, PROG ": qp 0x%x: connect data no longer valid; closing\n",
			ci.qp_num);
		pc_close(conn);
		return;
	}
	tq = calloc(1, sizeof(*tq));
	if (tq) {
		tq->nreqs = 2u * (p.hsqsize + 1u);
		tq->reqs = calloc(tq->nreqs, sizeof(*tq->reqs));
		tq->q = tq->reqs ? nvmf_queue_create(t->core, p.qid, p.hsqsize) : NULL;
	}
	if (!tq || !tq->q) {
		fprintf(stderr, PROG ": qp 0x%x: queue %u: out of memory; closing\n", ci.qp_num,
			p.qid);
		if (tq)
			free(tq->reqs);
		free(tq);
		pc_close(conn);
		return;
	}
	ret = blk_stage_attach(&wq->stage, conn);
	if (ret) {
		fprintf(stderr, PROG ": worker %u: cannot register %zu bytes of staging buffers: "
				"%s; closing qp 0x%x\n",
			wq->idx, wq->stage.len, pc_last_error(), ci.qp_num);
		nvmf_queue_destroy(tq->q);
		free(tq->reqs);
		free(tq);
		pc_close(conn);
		return;
	}
	ram_attach(wq, tq, conn);
	tq->wq = wq;
	tq->conn = pc_conn_get(conn);
	tq->qid = p.qid;
	tq->hsqsize = p.hsqsize;
	tq->qp_num = ci.qp_num;
	for (k = 0; k < tq->nreqs; k++) {
		tq->reqs[k].tq = tq;
		tq->reqs[k].next = k + 1 < tq->nreqs ? &tq->reqs[k + 1] : NULL;
	}
	tq->free = tq->reqs;
	tq->next = wq->queues;
	if (wq->queues)
		wq->queues->prev = tq;
	wq->queues = tq;
	wq->st.queues++;
	pc_conn_set_user(conn, tq);
	atomic_fetch_add_explicit(&t->ups, 1, memory_order_relaxed);
	printf(PROG ": %s qp 0x%x: queue %u (%u entries) connected on worker %u\n", ci.device,
	       ci.qp_num, p.qid, p.hsqsize + 1u, wq->idx);
	fflush(stdout);
}

static void queue_down(struct nt_wq *wq, struct pc_conn *conn)
{
	struct nt_queue *tq = pc_conn_user(conn), **pp;
	struct pc_msg *m;
	struct nt_req *rq;

	if (!tq)
		return;
	printf(PROG ": qp 0x%x: queue %u of controller %u closed: %s\n", tq->qp_num, tq->qid,
	       nvmf_queue_cntlid(tq->q), pc_last_error());
	fflush(stdout);
	atomic_fetch_add_explicit(&wq->tgt->downs, 1, memory_order_relaxed);
	tq->down = true;
	while ((m = tq->pend_head)) {
		tq->pend_head = m->user;
		pc_msg_release(m);
	}
	tq->pend_tail = NULL;
	while ((rq = tq->cqe_head)) {
		tq->cqe_head = rq->next;
		wq->st.cqe_lost++;
		rq_free(rq);
	}
	tq->cqe_tail = NULL;
	if (tq->in_cqe_wait) {
		for (pp = &wq->cqe_wait; *pp; pp = &(*pp)->cqe_next)
			if (*pp == tq) {
				*pp = tq->cqe_next;
				break;
			}
		tq->in_cqe_wait = false;
	}
	/* drained: no RDMA of it is on the QP any more (engine.h) */
	blk_stage_detach(&wq->stage);
	ram_detach(wq, tq);
	pc_conn_set_user(conn, NULL);
	if (!tq->busy)
		tq_free(tq);
	/* else: the poller frees it once its backend operations are back */
}

static void on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct nt_tgt *t = arg;
	struct nt_wq *wq = &t->wqs[pc_worker_index(pc_conn_worker(conn))];

	if (ev == PC_CONN_UP)
		queue_up(wq, conn);
	else
		queue_down(wq, conn);
}

/* ---- the worker's poller ------------------------------------------------------- */

static int wq_poll(void *arg)
{
	struct nt_wq *wq = arg;
	struct nt_queue *tq, *next, *waiting;
	struct nvmf_req *r;
	struct nt_req *rq;
	uint32_t gen;
	int work = 0;

	/* completions that waited for a send buffer */
	waiting = wq->cqe_wait;
	wq->cqe_wait = NULL;
	for (tq = waiting; tq; tq = next) {
		next = tq->cqe_next;
		tq->in_cqe_wait = false;
		while ((rq = tq->cqe_head)) {
			tq->cqe_head = rq->next;
			if (!tq->cqe_head)
				tq->cqe_tail = NULL;
			if (!try_send_cqe(rq)) {
				rq->next = tq->cqe_head; /* still none: back in front */
				tq->cqe_head = rq;
				if (!tq->cqe_tail)
					tq->cqe_tail = rq;
				break;
			}
			work++;
		}
		if (tq->cqe_head && !tq->in_cqe_wait) {
			tq->in_cqe_wait = true;
			tq->cqe_next = wq->cqe_wait;
			wq->cqe_wait = tq;
		}
	}
	/* asynchronous events: the admin queues' held requests (a load first: no locked RMW per turn) */
	if (pc_unlikely(atomic_load_explicit(&wq->events, memory_order_relaxed)) &&
	    atomic_exchange_explicit(&wq->events, 0, memory_order_acquire)) {
		for (tq = wq->queues; tq; tq = tq->next) {
			if (tq->qid || tq->down)
				continue;
			while ((r = nvmf_queue_poll_event(tq->q))) {
				rq = (struct nt_req *)r;
				rq->state = RQ_BUSY;
				tq->busy++;
				wq->st.aers++;
				send_cqe(rq);
				work++;
			}
		}
	}
	/* dead controllers, queues to free: only when something changed */
	gen = nvmf_tgt_dead_gen(wq->tgt->core);
	if (pc_likely(gen == wq->dead_gen && !wq->reap))
		return work;
	wq->dead_gen = gen;
	wq->reap = false;
	for (tq = wq->queues; tq; tq = next) {
		next = tq->next;
		if (tq->down) {
			if (!tq->busy)
				tq_free(tq);
		} else if (!tq->closing && nvmf_queue_dead(tq->q)) {
			printf(PROG ": qp 0x%x: queue %u: controller %u is gone; closing\n",
			       tq->qp_num, tq->qid, nvmf_queue_cntlid(tq->q));
			fflush(stdout);
			tq_close(tq);
		}
	}
	return work;
}

/* nvmf_tgt.h */
void nt_event_notify(void *arg, struct nvmf_queue *admin)
{
	struct nt_tgt *t = arg;
	unsigned int i;

	(void)admin; /* its worker is not known here: every worker looks (events are rare) */
	for (i = 0; i < t->nwq; i++)
		atomic_store_explicit(&t->wqs[i].events, 1, memory_order_release);
}

/* ---- the control thread: connect requests --------------------------------------- */

static int on_request(struct pc_conn_request *req, void *arg)
{
	struct nt_tgt *t = arg;
	struct nvmf_cm_params p;

	if (nvmf_cm_request(t->core, req->private_data, req->private_len, &p, &t->rep, &t->rej)) {
		fprintf(stderr, PROG ": connect request from %s rejected: rdma_cm status %u\n",
			req->peer, t->rej.sts);
		atomic_fetch_add_explicit(&t->rejects, 1, memory_order_relaxed);
		req->reply = &t->rej;
		req->reply_len = sizeof(t->rej);
		return -EPROTO;
	}
	if (p.hsqsize + 1u > req->max_recv_depth) {
		fprintf(stderr, PROG ": connect request from %s for queue %u of %u entries "
				"rejected: worker %u has %u receive buffers left (--controllers)\n",
			req->peer, p.qid, p.hsqsize + 1u, req->worker, req->max_recv_depth);
		atomic_fetch_add_explicit(&t->rejects, 1, memory_order_relaxed);
		t->rej = (struct nvmf_rdma_cm_rej){.sts = NVMF_RDMA_CM_NO_RSC};
		req->reply = &t->rej;
		req->reply_len = sizeof(t->rej);
		return -ENOBUFS;
	}
	req->recv_depth = p.hsqsize + 1u;
	req->recv_size = 64 + t->in_capsule;
	req->reply = &t->rep;
	req->reply_len = sizeof(t->rep);
	req->user = NULL;
	return 0;
}

/* nvmf_tgt.h */
void nt_engine_params(struct nt_tgt *t, struct pc_engine_params *p)
{
	p->msg_size = 64 + t->in_capsule;
	p->on_request = on_request;
	p->on_conn = on_conn;
	p->on_msg = on_msg;
	p->arg = t;
}

/* nvmf_tgt.h */
int nt_wq_setup(struct nt_tgt *t, unsigned int idx, uint32_t nstage, int node)
{
	struct nt_wq *wq = &t->wqs[idx];
	uint32_t i;
	int ret;

	wq->tgt = t;
	wq->idx = idx;
	wq->pw = pc_engine_worker(t->e, idx);
	if (!wq->pw)
		return -EINVAL;
	ret = blk_stage_init(&wq->stage, nstage, t->mdts, node);
	if (ret) {
		fprintf(stderr, PROG ": worker %u: out of memory for %u staging buffers of %u KiB\n",
			idx, nstage, t->mdts >> 10);
		return ret;
	}
	for (i = 0; i < t->nr_ns; i++) {
		ret = t->be[i].wq_init(&t->be[i], wq->pw, idx, &wq->be[i]);
		if (ret)
			return ret;
		if (t->be[i].mem)
			wq->ram[i] = (struct blk_mreg){.mem = t->be[i].mem, .len = t->be[i].size};
	}
	wq->poller = pc_worker_add_poller(wq->pw, wq_poll, wq);
	if (!wq->poller) {
		ret = -errno;
		fprintf(stderr, PROG ": worker %u: pc_worker_add_poller: %s\n", idx,
			pc_last_error());
		return ret;
	}
	return 0;
}

/* nvmf_tgt.h */
void nt_wq_teardown(struct nt_tgt *t, unsigned int idx)
{
	struct nt_wq *wq = &t->wqs[idx];
	uint32_t i;

	/* the engine is gone: queues whose backend operations never came back go now */
	while (wq->queues)
		tq_free(wq->queues); /* pc_conn_put() works after pc_engine_destroy() */
	for (i = 0; i < t->nr_ns; i++)
		if (t->be[i].wq_fini)
			t->be[i].wq_fini(&t->be[i], wq->be[i]);
	blk_stage_fini(&wq->stage);
}

/* nvmf_tgt.h */
void nt_print_stats(const struct nt_tgt *t, FILE *f)
{
	unsigned int i;

	for (i = 0; i < t->nwq; i++) {
		const struct nt_stats *s = &t->wqs[i].st;

		fprintf(f, PROG ": worker %u: queues %" PRIu64 " commands %" PRIu64 " reads %" PRIu64
			   " (%" PRIu64 " bytes, %" PRIu64 " in place) writes %" PRIu64 " (%" PRIu64 " bytes, %" PRIu64
			   " in-capsule) flushes %" PRIu64 " zeroes %" PRIu64 " discards %" PRIu64
			   " errors %" PRIu64 " xfer_errors %" PRIu64 " io_errors %" PRIu64
			   " staging_waits %" PRIu64 " cqe_waits %" PRIu64 " cqe_lost %" PRIu64
			   " closes %" PRIu64 " aers %" PRIu64 "\n",
			i, s->queues, s->cmds, s->reads, s->bytes_read, s->in_place, s->writes, s->bytes_written,
			s->in_capsule, s->flushes, s->zeroes, s->discards, s->errors, s->xfer_errors,
			s->io_errors, t->wqs[i].stage.waits, s->cqe_waits, s->cqe_lost, s->closes,
			s->aers);
	}
}
