// SPDX-License-Identifier: MIT
/*
 * tools/blk/server.c - pollcore-blk's target (docs/storage.md).
 *
 * Handler mode: every command runs to completion on the worker that owns
 * its connection, as a small state machine in a preallocated struct blk_io:
 *
 *   READ:  wait for a staging buffer -> backend read into it -> RDMA WRITE
 *          to the client's buffer -> completion
 *   WRITE: wait for a staging buffer -> RDMA READ from the client's buffer
 *          -> backend write from it -> completion
 *   FLUSH: backend flush -> completion
 *
 * The completion goes back with pc_reply() in the request's own buffer, so
 * answering never allocates and never fails for want of a buffer; holding
 * that buffer until then is what bounds a worker's commands by its receive
 * buffers (and the clients by their credits). Staging buffers are a
 * bounded, registered pool per worker; a command that finds none waits in
 * the worker's FIFO and starts when one comes back (backpressure, never a
 * drop). The io_uring backend's completions come back through a poller on
 * the same worker (backend_uring.c).
 */
#include "../cli.h"
#include "blk.h"

#include <pollcore/numa.h>

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SRV_MSG_SIZE 256  /* commands are 48 bytes, completions 32 */
#define SRV_RX_BUFS  1024 /* per worker: also the command slots per worker */

struct blk_server {
	struct blk_geom geom;
	struct blk_backend be;
	struct blk_wq *wqs;
	unsigned int nwq;
	atomic_uint ups, downs;
	atomic_uint io_err_logged;
};

static struct pc_topo *topo; /* NULL with --no-numa, or when hwloc cannot load one */


static inline struct blk_wq *wq_of(struct blk_server *s, const struct pc_conn *conn)
{
	return &s->wqs[pc_worker_index(pc_conn_worker(conn))];
}

/* Answers in the request's buffer; a close that beat us has taken it back. */
static void reply(struct blk_wq *wq, struct pc_msg *m, uint64_t tag, enum blk_status st,
		  const struct blk_geom *ident)
{
	struct blk_cpl c = {.magic = BLK_CPL_MAGIC, .status = (uint16_t)st, .tag = tag};
	int ret;

	if (ident) {
		c.bs = ident->bs;
		c.max_io = ident->max_io;
		c.nblocks = ident->nblocks;
	}
	blk_cpl_encode(&c, m->data);
	m->len = sizeof(c);
	ret = pc_reply(m);
	if (pc_unlikely(ret)) {
		wq->st.replies_lost++;
		if (ret != -ENOTCONN) /* -ENOTCONN: pollcore released it */
			pc_msg_release(m);
	}
}

static void io_finish(struct blk_io *io, enum blk_status st)
{
	struct blk_wq *wq = io->wq;

	if (st == BLK_S_OK) {
		if (io->cmd.opcode == BLK_OP_READ) {
			wq->st.reads++;
			wq->st.bytes_read += io->cmd.len;
		} else if (io->cmd.opcode == BLK_OP_WRITE) {
			wq->st.writes++;
			wq->st.bytes_written += io->cmd.len;
		} else {
			wq->st.flushes++;
		}
	}
	reply(wq, io->msg, io->cmd.tag, st, NULL);
	io->msg = NULL;
	io->next = wq->free_ios;
	wq->free_ios = io;
	if (io->stage) {
		io->stage = NULL;
		blk_stage_put(&wq->stage, io->stage_idx); /* may let a waiting command start */
	}
}

/*
 * The RDMA transfer's outcome. A failed one (a bad rkey or address: remote
 * access error) moves the QP to the error state and pollcore closes the
 * connection (docs/storage.md), so the XFER completion is normally dropped
 * with it; the command slot and buffer come back either way.
 */
static void op_done(struct pc_op *op, int status)
{
	struct blk_io *io = (struct blk_io *)op;
	struct blk_server *s = io->wq->srv;

	if (pc_unlikely(status)) {
		io->wq->st.xfer_errors++;
		io_finish(io, BLK_S_XFER);
	} else if (io->cmd.opcode == BLK_OP_READ) {
		io_finish(io, BLK_S_OK);
	} else {
		s->be.submit(&s->be, io->wq->be, &io->bio); /* WRITE: the data is here; store it */
	}
}

static void io_rdma(struct blk_io *io, uint8_t code)
{
	int ret;

	if (pc_unlikely(io->gone)) { /* engine.h: the handle is not named after DOWN */
		io->wq->st.xfer_errors++;
		io_finish(io, BLK_S_XFER);
		return;
	}
	io->op = (struct pc_op){.code = code,
				.local = io->stage,
				.lkey = io->wq->stage.reg.lkey,
				.len = io->cmd.len,
				.remote_addr = io->cmd.addr,
				.rkey = io->cmd.rkey,
				.done = op_done,
				.arg = io};
	ret = pc_rdma(io->msg->conn, &io->op);
	if (pc_unlikely(ret)) { /* on the owning worker: -EINVAL only */
		io->wq->st.xfer_errors++;
		io_finish(io, BLK_S_XFER);
	}
}

/* The backend's outcome (store.h), on the worker. */
static void io_stored(struct blk_bio *bio, int res)
{
	struct blk_io *io = pc_container_of(bio, struct blk_io, bio);
	struct blk_server *s = io->wq->srv;

	if (pc_unlikely(res)) {
		io->wq->st.io_errors++;
		if (atomic_fetch_add_explicit(&s->io_err_logged, 1, memory_order_relaxed) < 10)
			fprintf(stderr, PROG " server: %s of lba %" PRIu64 " (%u bytes): %s\n",
				io->cmd.opcode == BLK_OP_READ	 ? "read"
				: io->cmd.opcode == BLK_OP_WRITE ? "write"
								 : "flush",
				io->cmd.lba, io->cmd.len, strerror(-res));
		io_finish(io, BLK_S_IO);
	} else if (io->cmd.opcode == BLK_OP_READ) {
		io_rdma(io, PC_OP_WRITE); /* the blocks are staged: into the client's buffer */
	} else {
		io_finish(io, BLK_S_OK);
	}
}

/* @io holds a staging buffer now: start its backend read or its RDMA READ. */
static void io_staged(struct blk_io *io, uint8_t *buf, uint32_t idx)
{
	struct blk_server *s = io->wq->srv;

	io->stage = buf;
	io->stage_idx = idx;
	if (pc_unlikely(io->gone)) { /* nobody to answer: the slot and buffer come back */
		io_finish(io, BLK_S_XFER);
		return;
	}
	io->bio.buf = buf;
	if (io->cmd.opcode == BLK_OP_READ)
		s->be.submit(&s->be, io->wq->be, &io->bio);
	else
		io_rdma(io, PC_OP_READ);
}

/* A staging buffer came back for a command that waited (store.h). */
static void io_stage_ready(struct blk_stage_waiter *w, uint8_t *buf, uint32_t idx)
{
	io_staged(pc_container_of(w, struct blk_io, sw), buf, idx);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	struct blk_server *s = arg;
	struct blk_wq *wq = wq_of(s, m->conn);
	enum blk_status st;
	struct blk_cmd cmd;
	struct blk_io *io;
	uint8_t *buf;
	uint32_t idx;

	if (pc_unlikely(m->type != PC_MSG_REQUEST)) {
		wq->st.bad_cmds++; /* nothing to answer: commands come as requests */
		pc_msg_release(m);
		return;
	}
	st = blk_cmd_parse(m->data, m->len, &s->geom, &cmd);
	if (pc_unlikely(st != BLK_S_OK)) {
		wq->st.bad_cmds++;
		reply(wq, m, cmd.tag, st, NULL);
		return;
	}
	if (pc_unlikely(cmd.opcode == BLK_OP_IDENTIFY)) {
		wq->st.identifies++;
		reply(wq, m, cmd.tag, BLK_S_OK, &s->geom);
		return;
	}
	io = wq->free_ios;
	if (pc_unlikely(!io)) {
		reply(wq, m, cmd.tag, BLK_S_BUSY, NULL);
		return;
	}
	wq->free_ios = io->next;
	io->cmd = cmd;
	io->msg = m;
	io->next = NULL;
	io->stage = NULL;
	io->gone = false;
	io->bio = (struct blk_bio){
		.op = cmd.opcode == BLK_OP_READ	   ? BLK_BIO_READ
		      : cmd.opcode == BLK_OP_WRITE ? BLK_BIO_WRITE
						   : BLK_BIO_FLUSH,
		.off = cmd.lba * s->geom.bs,
		.len = cmd.len,
		.done = io_stored,
	};
	if (cmd.opcode == BLK_OP_FLUSH) {
		s->be.submit(&s->be, wq->be, &io->bio);
		return;
	}
	io->sw.ready = io_stage_ready;
	if (blk_stage_get(&wq->stage, &io->sw, &buf, &idx))
		io_staged(io, buf, idx);
}

/*
 * The staging pool is registered on the worker at its first connection and
 * deregistered when its last one is DOWN (drained: no transfer of this
 * worker is on a QP any more), so that the registration never outlives the
 * device's use by the engine. One ibv_reg_mr per idle-to-busy transition,
 * never on the I/O path.
 */
static void srv_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct blk_server *s = arg;
	struct blk_wq *wq = wq_of(s, conn);
	struct pc_conn_info ci;
	uint32_t k;

	pc_conn_info(conn, &ci);
	if (ev == PC_CONN_UP) {
		atomic_fetch_add_explicit(&s->ups, 1, memory_order_relaxed);
		if (blk_stage_attach(&wq->stage, conn)) {
			fprintf(stderr, PROG " server: worker %u: cannot register %zu bytes "
					     "of staging buffers: %s; closing qp 0x%x\n",
				wq->idx, wq->stage.len, pc_last_error(), ci.qp_num);
			pc_conn_set_user(conn, NULL);
			pc_close(conn);
		} else {
			pc_conn_set_user(conn, wq);
			wq->conns++;
		}
		printf(PROG " server: %s qp 0x%x: connected on worker %d\n", ci.device, ci.qp_num,
		       ci.worker);
	} else {
		printf(PROG " server: %s qp 0x%x: closed after %" PRIu64 " commands: %s\n",
		       ci.device, ci.qp_num, ci.msgs_recv, pc_last_error());
		/*
		 * Its commands still in the backend or waiting for staging finish
		 * without naming the connection again: their replies go to
		 * pc_reply(), which takes a message after DOWN (-ENOTCONN).
		 */
		for (k = 0; k < wq->nios; k++)
			if (wq->ios[k].msg && wq->ios[k].msg->conn == conn)
				wq->ios[k].gone = true;
		atomic_fetch_add_explicit(&s->downs, 1, memory_order_relaxed);
		if (pc_conn_user(conn)) { /* its attach succeeded */
			wq->conns--;
			blk_stage_detach(&wq->stage);
		}
	}
	fflush(stdout);
}

static int wq_setup(struct blk_server *s, struct blk_wq *wq, struct pc_engine *e, unsigned int i,
		    uint32_t nstage, int node)
{
	uint32_t k;

	wq->srv = s;
	wq->idx = i;
	wq->pw = pc_engine_worker(e, i);
	wq->nios = SRV_RX_BUFS;
	wq->ios = calloc(wq->nios, sizeof(*wq->ios));
	if (!wq->pw || !wq->ios || blk_stage_init(&wq->stage, nstage, s->geom.max_io, node)) {
		fprintf(stderr, PROG " server: worker %u: out of memory for %u staging buffers\n",
			i, nstage);
		return -ENOMEM;
	}
	for (k = 0; k < wq->nios; k++) {
		wq->ios[k].wq = wq;
		wq->ios[k].next = k + 1 < wq->nios ? &wq->ios[k + 1] : NULL;
	}
	wq->free_ios = wq->ios;
	return s->be.wq_init(&s->be, wq->pw, i, &wq->be);
}

static void print_stats(struct blk_server *s)
{
	unsigned int i;

	for (i = 0; i < s->nwq; i++) {
		const struct blk_wq_stats *st = &s->wqs[i].st;

		printf(PROG " server: worker %u: reads %" PRIu64 " (%" PRIu64 " bytes) writes %" PRIu64
			    " (%" PRIu64 " bytes) flushes %" PRIu64 " bad_cmds %" PRIu64
			    " xfer_errors %" PRIu64 " io_errors %" PRIu64 " staging_waits %" PRIu64
			    " max_waiting %" PRIu64 " replies_lost %" PRIu64 "\n",
		       i, st->reads, st->bytes_read, st->writes, st->bytes_written, st->flushes,
		       st->bad_cmds, st->xfer_errors, st->io_errors, s->wqs[i].stage.waits,
		       s->wqs[i].stage.max_waiting,
		       st->replies_lost);
	}
}

struct srv_opts {
	const char *addr, *file;
	uint64_t ram;
	uint32_t port, bs, workers, staging;
	bool no_numa;
	enum pc_idle idle;
};

static int parse_opts(int argc, char **argv, struct srv_opts *o)
{
	static const struct option opts[] = {
	    {"addr", required_argument, NULL, 'a'},  {"port", required_argument, NULL, 'p'},
	    {"ram", required_argument, NULL, 'r'},   {"file", required_argument, NULL, 'f'},
	    {"bs", required_argument, NULL, 'b'},    {"workers", required_argument, NULL, 'w'},
	    {"staging", required_argument, NULL, 's'}, {"no-numa", no_argument, NULL, 'N'},
	    {"hybrid", no_argument, NULL, 'H'},      {"busy", no_argument, NULL, 'B'},
	    {"help", no_argument, NULL, 'h'},        {0},
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "a:p:r:f:b:w:s:NHBh", opts, NULL)) != -1) {
		switch (c) {
		case 'a': o->addr = optarg; break;
		case 'f': o->file = optarg; break;
		case 'N': o->no_numa = true; break;
		case 'H': o->idle = PC_IDLE_HYBRID; break;
		case 'B': o->idle = PC_IDLE_BUSY; break;
		case 'p':
			if (blk_parse_u32("--port", optarg, 1, 65535, &o->port))
				return 2;
			break;
		case 'r':
			if (blk_parse_size("--ram", optarg, 4096, 1ull << 40, &o->ram))
				return 2;
			break;
		case 'b':
			if (blk_parse_size("--bs", optarg, 512, 1u << 20, &v))
				return 2;
			if (v & (v - 1))
				return blk_bad_usage("--bs: '%s' is not a power of two", optarg);
			o->bs = (uint32_t)v;
			break;
		case 'w':
			if (blk_parse_u32("--workers", optarg, 1, 64, &o->workers))
				return 2;
			break;
		case 's':
			if (blk_parse_u32("--staging", optarg, 1, 4096, &o->staging))
				return 2;
			break;
		case 'h':
			blk_usage(stdout);
			return 0;
		default:
			return blk_bad_usage("server: unknown option or missing value: '%s'",
					     argv[optind - 1]);
		}
	}
	if (optind != argc)
		return blk_bad_usage("server: unexpected argument '%s'", argv[optind]);
	if (!o->ram == !o->file)
		return blk_bad_usage("server: give exactly one of --ram SIZE and --file PATH");
	if (o->ram && o->ram < o->bs)
		return blk_bad_usage("server: --ram %" PRIu64 " is less than one block (--bs %u)",
				     o->ram, o->bs);
	return -1;
}

int blk_server_main(int argc, char **argv)
{
	struct srv_opts o = {.port = BLK_PORT, .bs = 4096, .workers = 1, .staging = 64};
	struct pc_engine_params p = { .size = sizeof(p) };
	struct blk_server s = {0};
	struct pc_worker_stats ws;
	struct pc_engine *e = NULL;
	unsigned int i;
	int rc, node = -1, sig;
	sigset_t sigs;

	rc = parse_opts(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = 1;
	/* the workers and the control thread inherit this: signals come to sigwait() */
	cli_block_stop_signals(&sigs);

	p.workers_per_device = o.workers;
	p.msg_size = SRV_MSG_SIZE;
	p.rx_bufs = SRV_RX_BUFS;
	p.tx_bufs = 64; /* completions travel in the request buffers */
	p.no_numa = o.no_numa;
	p.idle = o.idle;
	p.on_conn = srv_on_conn;
	p.on_msg = srv_on_msg;
	p.arg = &s;
	e = pc_engine_create(&p);
	if (!e) {
		fprintf(stderr, PROG " server: cannot start the engine: %s\n", pc_last_error());
		return 1;
	}
	if (!o.no_numa && !pc_engine_stats(e, 0, &ws) && ws.numa_node >= 0) {
		node = ws.numa_node;
		topo = pc_topo_open();
		blk_mem_topo(topo);
	}
	s.geom.bs = o.bs;
	s.geom.max_io = o.bs > BLK_MAX_IO ? o.bs : BLK_MAX_IO;
	if (o.ram ? blk_ram_open(&s.be, PROG " server", o.ram / o.bs * o.bs, o.bs, node)
		  : blk_uring_open(&s.be, PROG " server", o.file, o.bs))
		goto out;
	s.geom.nblocks = s.be.size / o.bs;
	if (!blk_geom_valid(&s.geom)) {
		fprintf(stderr, PROG " server: %s holds no whole block of %u bytes\n", s.be.desc,
			o.bs);
		goto out;
	}
	s.nwq = pc_engine_nworkers(e);
	s.wqs = calloc(s.nwq, sizeof(*s.wqs));
	if (!s.wqs)
		goto out;
	for (i = 0; i < s.nwq; i++)
		if (wq_setup(&s, &s.wqs[i], e, i, o.staging, node))
			goto out;
	if (pc_listen(e, o.addr, (uint16_t)o.port)) {
		fprintf(stderr, PROG " server: cannot listen on %s port %u: %s\n",
			o.addr ? o.addr : "any address", o.port, pc_last_error());
		goto out;
	}
	printf(PROG " server: listening on %s port %u: %s, %" PRIu64 " blocks of %u bytes, "
		    "%u worker%s, %u staging buffers of %u KiB each, numa node %d\n",
	       o.addr ? o.addr : "any address", pc_listen_port(e), s.be.desc, s.geom.nblocks, o.bs,
	       s.nwq, s.nwq > 1 ? "s" : "", o.staging, s.geom.max_io >> 10, node);
	fflush(stdout);

	while (sigwait(&sigs, &sig))
		;
	printf(PROG " server: %s: %u connections served\n", strsignal(sig), atomic_load(&s.ups));
	print_stats(&s);
	pc_engine_print_stats(e, stdout);
	rc = 0;
out:
	fflush(stdout);
	/* the workers stop first: nothing calls into the backend after this */
	pc_engine_destroy(e);
	for (i = 0; s.wqs && i < s.nwq; i++) {
		if (s.be.wq_fini)
			s.be.wq_fini(&s.be, s.wqs[i].be);
		blk_stage_fini(&s.wqs[i].stage);
		free(s.wqs[i].ios);
	}
	free(s.wqs);
	if (s.be.close)
		s.be.close(&s.be);
	blk_mem_topo(NULL);
	if (topo)
		pc_topo_close(topo);
	return rc;
}
