// SPDX-License-Identifier: MIT
/*
 * pollcore-bench client: the four modes.
 *
 * The engine runs in handler mode. rpc, write and read are closed loops on
 * the workers: the main thread issues the first `window` requests or
 * operations of each connection, then every response or completion issues
 * the next one from its callback, so one busy worker thread drives the
 * traffic (as one perftest process does). One-way messages have no
 * completion the application sees, so send mode needs another trigger:
 * with --producer worker (the default) the server acknowledges every
 * window/4th message with its count, and each acknowledgement lets the
 * worker top the connection up to `window` unacknowledged messages; with
 * --producer thread the main thread (attached to application slot 0)
 * allocates, stamps and pc_send()s up to --post-batch messages per
 * connection at a time, through the worker's submission ring.
 *
 * Checks: send and rpc ask the server, on each connection, how many data
 * messages and bytes it took and whether any arrived out of order (a
 * control request behind the data, on the same ordered RC connection);
 * rpc also checks each response's sequence number. write compares a hash
 * of the server's region with the local source; read checks each
 * operation's first bytes and, at the end, every byte of the region.
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <infiniband/verbs.h>

struct bconn;

/* A one-sided operation and the window slot it moves. */
struct bop {
	struct pc_op op;
	struct bconn *x;
	uint32_t slot;
};

struct bconn {
	struct bclient *cl;
	struct pc_conn *conn;
	uint32_t id;
	/* the worker's once traffic starts (done: relaxed stores, sampled by main) */
	uint64_t sent;		/* relaxed stores, sampled by main */
	uint64_t done;
	uint64_t acked;		/* send, worker producer: the server's count */
	uint64_t disorder;
	uint64_t t_last;
	uint32_t slot_done;	/* rpc: done % window */
	uint32_t slot_sent;	/* rpc: sent % window */
	uint64_t *t0;		/* rpc: send time per window slot */
	struct tool_hist *lat;
	/* write and read */
	uint8_t *buf;
	void *mr;
	uint32_t lkey;
	uint32_t rkey;
	uint64_t raddr;
	uint64_t *expect;	/* read: the first bytes of each remote slot */
	struct bop *ops;
	/* send mode: a message allocated and not yet accepted by pc_send() */
	struct pc_msg *pending;
	/* control reply, worker -> main */
	struct bench_ctl reply;
	atomic_int reply_ready;
	atomic_int finished;
	char err[384];
};

struct bclient {
	const struct bench_opts *o;
	struct bconn *cc;
	uint64_t limit;		/* per connection */
	uint32_t window;	/* in flight per connection */
	uint32_t ack_every;	/* send, worker producer */
	uint32_t seed;
	atomic_int stop;	/* main -> workers: issue nothing more */
	atomic_int ending;	/* main: connections are going down on purpose */
	atomic_int failed;	/* a worker wrote a bconn's err (release) */
	atomic_uint nfinished;
	int efd;		/* written once all finished, or on a failure: wait_done() wakes */
};

/* Wakes wait_done(): one write per run (or per failure), never on the data path. */
static void main_wake(struct bclient *cl)
{
	uint64_t one = 1;

	if (cl->efd >= 0)
		(void)!write(cl->efd, &one, sizeof(one));
}

static void cli_fail(struct bconn *x, const char *fmt, ...) pc_printf(2, 3);
static void cli_fail(struct bconn *x, const char *fmt, ...)
{
	va_list ap;

	if (x->err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	/* release: err is complete before the main thread looks */
	atomic_store_explicit(&x->cl->failed, 1, memory_order_release);
	main_wake(x->cl);
}

/* On the worker (or main, for a tiny send run): @x has issued all it will. Once. */
static void conn_finish(struct bconn *x)
{
	uint64_t t = bench_now_ns();

	if (atomic_exchange_explicit(&x->finished, 1, memory_order_relaxed))
		return;
	x->t_last = t;
	/* release: t_last, counters and histogram are final */
	if (atomic_fetch_add_explicit(&x->cl->nfinished, 1, memory_order_release) + 1 ==
	    x->cl->o->conns)
		main_wake(x->cl);
}

static void set_sent(struct bconn *x, uint64_t v)
{
	__atomic_store_n(&x->sent, v, __ATOMIC_RELAXED);
}

static bool more(const struct bconn *x)
{
	return x->sent < x->cl->limit && !atomic_load_explicit(&x->cl->stop, memory_order_relaxed);
}

static void cli_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct bconn *x = pc_conn_user(conn);
	struct bclient *cl = arg;

	if (ev == PC_CONN_DOWN && x && !atomic_load_explicit(&cl->ending, memory_order_relaxed))
		cli_fail(x, "connection %u went down after %" PRIu64 " of %" PRIu64
			    " completed (server gone, or a size above its --max-size?)",
			 x->id, x->done, x->sent);
}

/* rpc: a response came back; its buffer carries the next request. */
static void rpc_response(struct bconn *x, struct pc_msg *m)
{
	struct bclient *cl = x->cl;
	uint32_t size = cl->o->size, w = cl->window;
	uint64_t t = bench_now_ns();
	int ret;

	if (pc_unlikely(m->type != PC_MSG_RESPONSE || m->len != size ||
			bench_stamp_of(m->data, size) != (x->done & bench_stamp_mask(size))))
		x->disorder++;
	hist_add(x->lat, t - x->t0[x->slot_done]);
	x->slot_done = x->slot_done + 1 == w ? 0 : x->slot_done + 1;
	__atomic_store_n(&x->done, x->done + 1, __ATOMIC_RELAXED);
	if (!more(x)) {
		pc_msg_release(m);
		if (x->done == x->sent)
			conn_finish(x);
		return;
	}
	/* the response's buffer carries the next request; fresh ones fill the window */
	do {
		bench_stamp(m->data, size, x->sent);
		m->len = size;
		x->t0[x->slot_sent] = t;
		ret = pc_call(m, NULL, NULL, 0, NULL);
		if (pc_unlikely(ret)) {
			cli_fail(x, "connection %u: pc_call of request %" PRIu64 " failed: %s",
				 x->id, x->sent, pc_last_error());
			if (ret != -ENOTCONN)
				pc_msg_release(m);
			return;
		}
		x->slot_sent = x->slot_sent + 1 == w ? 0 : x->slot_sent + 1;
		set_sent(x, x->sent + 1);
	} while (x->sent - x->done < w && more(x) && (m = pc_msg_alloc_size(x->conn, size)));
}

/* send, worker producer: keeps `window` messages unacknowledged until done. */
static void send_top_up(struct bconn *x)
{
	struct bclient *cl = x->cl;
	uint32_t size = cl->o->size;
	struct pc_msg *m;
	int ret;

	while (x->sent - x->acked < cl->window && more(x)) {
		/* above the engine's msg_size, from the large pool: rendezvous */
		m = pc_msg_alloc_size(x->conn, size);
		if (pc_unlikely(!m)) /* the pool is sized so that this is rare; */
			return;	      /* the next acknowledgement retries */
		m->len = size;
		bench_stamp(m->data, size, x->sent);
		ret = pc_send(m);
		if (pc_unlikely(ret)) {
			cli_fail(x, "connection %u: pc_send of message %" PRIu64 ": %s", x->id,
				 x->sent, pc_last_error());
			if (ret != -ENOTCONN)
				pc_msg_release(m);
			return;
		}
		set_sent(x, x->sent + 1);
	}
	if (!more(x))
		conn_finish(x);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	struct bconn *x = pc_conn_user(m->conn);

	(void)arg;
	if (pc_unlikely(bench_is_ctl(m))) {
		memcpy(&x->reply, m->data, sizeof(x->reply));
		pc_msg_release(m);
		/* release: the reply is copied before main reads it */
		atomic_store_explicit(&x->reply_ready, 1, memory_order_release);
		return;
	}
	if (pc_likely(x->cl->o->mode == MODE_RPC && !x->err[0])) {
		rpc_response(x, m);
		return;
	}
	if (pc_likely(x->cl->o->mode == MODE_SEND && m->type == PC_MSG_ONEWAY &&
		      m->len == sizeof(x->acked))) {
		x->acked = bench_stamp_of(m->data, m->len);
		pc_msg_release(m);
		send_top_up(x);
		return;
	}
	cli_fail(x, "connection %u: unexpected message (%u bytes, type %u)", x->id, m->len,
		 m->type);
	pc_msg_release(m);
}

/* Sets up the first bytes of @b's local slot before it is posted as operation @seq. */
static void op_prepare(struct bconn *x, struct bop *b, uint64_t seq)
{
	uint32_t size = x->cl->o->size;
	uint8_t *local = x->buf + (uint64_t)b->slot * size;

	if (x->cl->o->mode == MODE_WRITE)
		bench_stamp(local, size, seq + 1);
	else /* poison: the read must bring the pattern back */
		bench_stamp(local, size, ~x->expect[b->slot]);
}

static void op_done(struct pc_op *op, int status)
{
	struct bop *b = pc_container_of(op, struct bop, op);
	struct bconn *x = b->x;
	uint32_t size = x->cl->o->size;
	int ret;

	if (pc_unlikely(status)) {
		if (atomic_load_explicit(&x->cl->ending, memory_order_relaxed))
			return;
		cli_fail(x, "connection %u: RDMA %s of %u bytes failed: %s (%s)", x->id,
			 op->code == PC_OP_READ ? "READ" : "WRITE", op->len, strerror(-status),
			 pc_last_error());
		return;
	}
	if (op->code == PC_OP_READ &&
	    pc_unlikely(bench_stamp_of(op->local, size) != x->expect[b->slot]))
		x->disorder++;
	__atomic_store_n(&x->done, x->done + 1, __ATOMIC_RELAXED);
	if (!more(x)) {
		if (x->done == x->sent)
			conn_finish(x);
		return;
	}
	op_prepare(x, b, x->sent);
	set_sent(x, x->sent + 1);
	ret = pc_rdma(x->conn, op);
	if (pc_unlikely(ret))
		cli_fail(x, "connection %u: pc_rdma failed: %s", x->id, pc_last_error());
}

/* --- the main thread ------------------------------------------------------------------- */

static void fail_main(struct bench_result *r, const char *fmt, ...) pc_printf(2, 3);
static void fail_main(struct bench_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

/* A send buffer of @len bytes for @x, waiting out short backpressure. */
static struct pc_msg *alloc_wait(struct bconn *x, uint32_t len)
{
	struct pc_msg *m;
	int tries = 0;

	while (!(m = pc_msg_alloc_size(x->conn, len)) && errno == ENOBUFS && ++tries < 100000)
		usleep(100);
	return m;
}

/* Submits @m from the main thread with @fn, retrying while a ring or window is full. */
static int submit_wait(struct pc_msg *m, int (*fn)(struct pc_msg *))
{
	int ret, tries = 0;

	while ((ret = fn(m)) == -ENOBUFS && ++tries < 100000)
		usleep(100);
	return ret;
}

static int call_nowait(struct pc_msg *m)
{
	int ret = pc_call(m, NULL, NULL, 0, NULL);

	return ret == -EAGAIN ? -ENOBUFS : ret;
}

static int ctl_post(struct bconn *x, const struct bench_ctl *req)
{
	struct pc_msg *m = alloc_wait(x, sizeof(*req));
	int ret;

	if (!m) {
		cli_fail(x, "connection %u: no send buffer for a control request: %s", x->id,
			 strerror(errno));
		return -1;
	}
	atomic_store_explicit(&x->reply_ready, 0, memory_order_relaxed);
	memcpy(m->data, req, sizeof(*req));
	((struct bench_ctl *)m->data)->magic = BENCH_MAGIC;
	m->len = sizeof(*req);
	ret = submit_wait(m, call_nowait);
	if (ret) {
		cli_fail(x, "connection %u: control request %u failed: %s", x->id, req->op,
			 pc_last_error());
		if (ret != -ENOTCONN)
			pc_msg_release(m);
		return -1;
	}
	return 0;
}

static int ctl_wait(struct bconn *x)
{
	uint64_t t0 = bench_now_ns();

	while (!atomic_load_explicit(&x->reply_ready, memory_order_acquire)) {
		if (atomic_load_explicit(&x->cl->failed, memory_order_acquire))
			return -1;
		if (bench_now_ns() - t0 > BENCH_STALL_S * 1000000000ull) {
			cli_fail(x, "connection %u: no answer to a control request in %d s", x->id,
				 BENCH_STALL_S);
			return -1;
		}
		usleep(200);
	}
	if (x->reply.status) {
		cli_fail(x, "connection %u: the server refused control request %u: %s", x->id,
			 x->reply.op, strerror(-x->reply.status));
		return -1;
	}
	return 0;
}

/* Issues the same control request on every connection, then waits for every reply. */
static int ctl_all(struct bclient *cl, const struct bench_ctl *req)
{
	uint32_t i;

	for (i = 0; i < cl->o->conns; i++)
		if (ctl_post(&cl->cc[i], req))
			return -1;
	for (i = 0; i < cl->o->conns; i++)
		if (ctl_wait(&cl->cc[i]))
			return -1;
	return 0;
}

/* write and read: a local region of window slots and the server's twin. */
static int region_setup(struct bclient *cl)
{
	const struct bench_opts *o = cl->o;
	uint64_t len = (uint64_t)cl->window * o->size;
	struct bench_ctl req = { .op = CTL_REGION,
				 .mode = o->mode,
				 .size = o->size,
				 .slots = cl->window,
				 .seed = cl->seed };
	int access = IBV_ACCESS_LOCAL_WRITE;
	uint32_t i, s;

	for (i = 0; i < o->conns; i++) {
		struct bconn *x = &cl->cc[i];
		uint32_t rkey;

		x->buf = aligned_alloc(4096, (len + 4095) & ~4095ull);
		x->ops = calloc(cl->window, sizeof(*x->ops));
		x->expect = calloc(cl->window, sizeof(*x->expect));
		if (!x->buf || !x->ops || !x->expect) {
			cli_fail(x, "out of memory for a %" PRIu64 "-byte region", len);
			return -1;
		}
		/* write: the source differs from the server's initial bytes */
		bench_pattern_fill(x->buf, len, cl->seed);
		if (o->mode == MODE_READ)
			memset(x->buf, 0, len);
		x->mr = pc_mem_reg(x->conn, x->buf, len, access, &x->lkey, &rkey);
		if (!x->mr) {
			cli_fail(x, "connection %u: %s", i, pc_last_error());
			return -1;
		}
		for (s = 0; s < cl->window; s++) {
			uint8_t first[8] = { 0 };

			for (uint32_t k = 0; k < 8 && k < o->size; k++)
				first[k] = bench_pattern(cl->seed, (uint64_t)s * o->size + k);
			memcpy(&x->expect[s], first, sizeof(first));
		}
	}
	if (ctl_all(cl, &req))
		return -1;
	for (i = 0; i < o->conns; i++) {
		cl->cc[i].raddr = cl->cc[i].reply.addr;
		cl->cc[i].rkey = cl->cc[i].reply.rkey;
	}
	return 0;
}

/* write, read: the first @n operations of @x, from the main thread. */
static int kick_ops(struct bclient *cl, struct bconn *x, uint32_t n)
{
	const struct bench_opts *o = cl->o;
	uint32_t k;
	int ret = 0;

	for (k = 0; k < n; k++) {
		struct bop *b = &x->ops[k];

		b->x = x;
		b->slot = k;
		b->op = (struct pc_op){ .code = o->mode == MODE_READ ? PC_OP_READ : PC_OP_WRITE,
					.local = x->buf + (uint64_t)k * o->size,
					.lkey = x->lkey,
					.len = o->size,
					.remote_addr = x->raddr + (uint64_t)k * o->size,
					.rkey = x->rkey,
					.done = op_done };
		op_prepare(x, b, k);
	}
	/* the worker owns x once the first operation is in its ring */
	x->sent = n;
	for (k = 0; k < n && !ret; k++)
		while ((ret = pc_rdma(x->conn, &x->ops[k].op)) == -ENOBUFS)
			usleep(50);
	return ret;
}

/* rpc, send (worker producer): the first @n messages of @x, from the main thread. */
static int kick_msgs(struct bclient *cl, struct bconn *x, uint32_t n, struct pc_msg **first)
{
	int (*submit)(struct pc_msg *) = cl->o->mode == MODE_RPC ? call_nowait : pc_send;
	uint32_t k, size = cl->o->size;
	int ret = 0;

	for (k = 0; k < n; k++) {
		first[k] = alloc_wait(x, size);
		if (!first[k]) {
			while (k--)
				pc_msg_release(first[k]);
			return -ENOBUFS;
		}
		first[k]->len = size;
		bench_stamp(first[k]->data, size, k);
	}
	/* the worker owns x once the first request is in its ring */
	x->sent = n;
	x->slot_sent = n == cl->window ? 0 : n;
	for (k = 0; k < n && !ret; k++) {
		if (x->t0)
			x->t0[k] = bench_now_ns();
		ret = submit_wait(first[k], submit);
	}
	/* a send run shorter than one acknowledgement is over already */
	if (!ret && cl->o->mode == MODE_SEND && n == cl->limit)
		conn_finish(x);
	return ret;
}

/* rpc, write, read, send (worker producer): the first of each connection. */
static int kick(struct bclient *cl)
{
	uint32_t i, n = cl->o->mode == MODE_RPC	 ? 1
		      : cl->o->mode == MODE_SEND ? cl->ack_every
						 : cl->window;
	struct pc_msg **first;
	int ret;

	/*
	 * rpc and send start with what their first answer acknowledges, so
	 * that the worker's top-ups queue behind every message submitted here
	 * (write and read have no order to keep).
	 */
	n = (uint32_t)PC_MIN((uint64_t)n, cl->limit);
	first = calloc(n, sizeof(*first));
	ret = first ? 0 : -ENOMEM;

	for (i = 0; i < cl->o->conns && !ret; i++)
		ret = cl->o->mode == MODE_RPC || cl->o->mode == MODE_SEND
			  ? kick_msgs(cl, &cl->cc[i], n, first)
			  : kick_ops(cl, &cl->cc[i], n);
	free(first);
	if (ret)
		cli_fail(&cl->cc[i ? i - 1 : 0], "starting the traffic: %s",
			 ret == -ENOMEM ? "out of memory" : pc_last_error());
	return ret ? -1 : 0;
}

/* --- progress, the send producer, waiting ---------------------------------------------- */

struct progress {
	uint64_t t_start;
	uint64_t t_next;	/* next line due */
	uint64_t t_moved;	/* when the total last changed */
	uint64_t last;		/* total at the previous line */
	uint64_t seen;		/* total at the previous look */
};

static uint64_t total_done(const struct bclient *cl)
{
	uint64_t t = 0;
	uint32_t i;

	for (i = 0; i < cl->o->conns; i++)
		t += __atomic_load_n(cl->o->mode == MODE_SEND ? &cl->cc[i].sent : &cl->cc[i].done,
				     __ATOMIC_RELAXED);
	return t;
}

/* Prints a line a second on stderr; fails the run after BENCH_STALL_S without progress. */
static int progress_tick(struct bclient *cl, struct progress *pg, uint64_t now)
{
	uint64_t t = total_done(cl);

	if (t != pg->seen) {
		pg->seen = t;
		pg->t_moved = now;
	} else if (now - pg->t_moved > BENCH_STALL_S * 1000000000ull) {
		cli_fail(&cl->cc[0], "no progress for %d s (%" PRIu64 " done)", BENCH_STALL_S, t);
		return -1;
	}
	if (now < pg->t_next)
		return 0;
	fprintf(stderr, PROG " %s: %5.1f s  %12" PRIu64 " done  %12.0f /s\n",
		bench_mode_name(cl->o->mode), (double)(now - pg->t_start) / 1e9, t,
		(double)(t - pg->last) * 1e9 / (double)(now - pg->t_next + 1000000000ull));
	pg->last = t;
	pg->t_next = now + 1000000000ull;
	return 0;
}

static uint64_t deadline_of(const struct bench_opts *o, uint64_t t0)
{
	return o->count ? UINT64_MAX : t0 + (uint64_t)(o->duration_s * 1e9);
}

/* Submits up to --post-batch messages on @x; returns how many, or -1 on failure. */
static int send_burst(struct bclient *cl, struct bconn *x)
{
	uint32_t size = cl->o->size, b;
	int ret;

	for (b = 0; b < cl->o->post_batch && x->sent < cl->limit; b++) {
		struct pc_msg *m = x->pending;

		if (!m) {
			m = pc_msg_alloc_size(x->conn, size);
			if (!m) {
				if (errno == ENOBUFS)
					break; /* all in flight: backpressure */
				cli_fail(x, "connection %u: pc_msg_alloc_size: %s", x->id,
					 pc_last_error());
				return -1;
			}
			m->len = size;
		}
		bench_stamp(m->data, size, x->sent);
		ret = pc_send(m);
		x->pending = ret == -ENOBUFS ? m : NULL;
		if (ret == -ENOBUFS)
			break; /* submission ring full */
		if (ret) {
			cli_fail(x, "connection %u: pc_send of message %" PRIu64 ": %s", x->id,
				 x->sent, pc_last_error());
			if (ret != -ENOTCONN)
				pc_msg_release(m);
			return -1;
		}
		set_sent(x, x->sent + 1);
	}
	return (int)b;
}

/* send: the main thread produces until the count or the duration is reached. */
static int send_loop(struct bclient *cl, struct progress *pg)
{
	uint64_t deadline = deadline_of(cl->o, pg->t_start), now, turn = 0;
	uint32_t i, active = cl->o->conns;
	int ret = 0, n;

	while (active && !ret) {
		bool moved = false;

		for (active = 0, i = 0; i < cl->o->conns; i++) {
			n = send_burst(cl, &cl->cc[i]);
			if (n < 0)
				return -1;
			moved |= n > 0;
			active += cl->cc[i].sent < cl->limit;
		}
		if (moved && ++turn % 64)
			continue;
		if (atomic_load_explicit(&cl->failed, memory_order_acquire))
			return -1;
		now = bench_now_ns();
		if (now >= deadline)
			break;
		ret = progress_tick(cl, pg, now);
		if (!moved)
			sched_yield(); /* let the workers run: they free the buffers */
	}
	for (i = 0; i < cl->o->conns; i++)
		if (cl->cc[i].pending) {
			pc_msg_release(cl->cc[i].pending);
			cl->cc[i].pending = NULL;
		}
	return ret;
}

/*
 * How often the main thread looks while the workers run, when nothing
 * wakes it (the end of the run and a failure do, through cl->efd). Its
 * wakeups take a CPU from the workers; every 1 ms, as it was, each was a
 * timer interrupt and an emulated clock read in the soft-RoCE VM.
 */
#define WAIT_TICK_MS 100

/* All but the thread producer: waits for the workers, stopping them at the deadline. */
static int wait_done(struct bclient *cl, struct progress *pg)
{
	uint64_t deadline = deadline_of(cl->o, pg->t_start), now;
	int ms;

	for (;;) {
		if (atomic_load_explicit(&cl->failed, memory_order_acquire))
			return -1;
		if (atomic_load_explicit(&cl->nfinished, memory_order_acquire) == cl->o->conns)
			return 0;
		now = bench_now_ns();
		if (now >= deadline)
			atomic_store_explicit(&cl->stop, 1, memory_order_relaxed);
		if (progress_tick(cl, pg, now))
			return -1;
		/* no later than the deadline */
		ms = deadline - now < WAIT_TICK_MS * 1000000ull ?
		     (int)((deadline - now) / 1000000) + 1 : WAIT_TICK_MS;
		if (cl->efd < 0) {
			usleep((useconds_t)ms * 1000);
		} else {
			struct pollfd pfd = { .fd = cl->efd, .events = POLLIN };
			uint64_t v;

			if (poll(&pfd, 1, ms) > 0)
				(void)!read(cl->efd, &v, sizeof(v));
		}
	}
}

/* --- the checks ------------------------------------------------------------------------ */

static int check_counts(struct bclient *cl, struct bench_result *r, uint64_t t_start)
{
	const struct bench_opts *o = cl->o;
	struct bench_ctl req = { .op = CTL_REPORT };
	uint64_t t_end = 0;
	uint32_t i;

	for (i = 0; i < o->conns; i++) {
		struct bconn *x = &cl->cc[i];

		r->sent += x->sent;
		r->completed += x->done;
		r->disorder += x->disorder;
		t_end = PC_MAX(t_end, x->t_last);
	}
	r->bytes_sent = r->sent * o->size;
	if (o->mode == MODE_WRITE || o->mode == MODE_READ) {
		r->received = r->completed;
		r->bytes_received = r->completed * o->size;
	} else {
		if (ctl_all(cl, &req))
			return -1;
		if (o->mode == MODE_SEND)
			t_end = bench_now_ns(); /* the reports came behind the last message */
		for (i = 0; i < o->conns; i++) {
			r->received += cl->cc[i].reply.msgs;
			r->bytes_received += cl->cc[i].reply.bytes;
			r->disorder += cl->cc[i].reply.disorder;
		}
	}
	r->secs = (double)(t_end - t_start) / 1e9;
	return 0;
}

/* write: the server's region hashes like the local source; read: every byte came back. */
static int check_bytes(struct bclient *cl, struct bench_result *r)
{
	const struct bench_opts *o = cl->o;
	uint64_t len = (uint64_t)cl->window * o->size, k;
	struct bench_ctl req = { .op = CTL_DIGEST };
	uint32_t i;

	r->verified = true;
	if (o->mode == MODE_WRITE) {
		if (ctl_all(cl, &req))
			return -1;
		for (i = 0; i < o->conns; i++)
			if (cl->cc[i].reply.digest != bench_digest(cl->cc[i].buf, len)) {
				r->verified = false;
				fail_main(r, "connection %u: the server's region differs from what "
					     "was written", i);
			}
		return 0;
	}
	for (i = 0; i < o->conns; i++)
		for (k = 0; k < len && r->verified; k++)
			if (cl->cc[i].buf[k] != bench_pattern(cl->seed, k)) {
				r->verified = false;
				fail_main(r, "connection %u: byte %" PRIu64 " read is 0x%02x, the "
					     "server holds 0x%02x", i, k, cl->cc[i].buf[k],
					  bench_pattern(cl->seed, k));
			}
	return 0;
}

/* Sets r->error when a count or check disagrees; returns 0 when all agree. */
static int judge(const struct bench_opts *o, struct bench_result *r)
{
	if (r->sent == 0)
		fail_main(r, "nothing was sent");
	if (o->mode != MODE_SEND && r->completed != r->sent)
		fail_main(r, "%" PRIu64 " issued but %" PRIu64 " completed", r->sent, r->completed);
	if (r->received != r->sent)
		fail_main(r, "sent %" PRIu64 " but the server received %" PRIu64, r->sent,
			  r->received);
	if (r->bytes_received != r->bytes_sent)
		fail_main(r, "%" PRIu64 " bytes sent but %" PRIu64 " received", r->bytes_sent,
			  r->bytes_received);
	if (r->disorder)
		fail_main(r, "%" PRIu64 " messages or operations arrived out of order or with "
			     "wrong bytes", r->disorder);
	if ((o->mode == MODE_WRITE || o->mode == MODE_READ) && !r->verified)
		fail_main(r, "the region's bytes do not match");
	return r->error[0] ? -1 : 0;
}

/* --- setup and teardown ---------------------------------------------------------------- */

static int client_alloc(struct bclient *cl)
{
	const struct bench_opts *o = cl->o;
	uint32_t i;

	cl->cc = calloc(o->conns, sizeof(*cl->cc));
	if (!cl->cc)
		return -1;
	for (i = 0; i < o->conns; i++) {
		struct bconn *x = &cl->cc[i];

		x->cl = cl;
		x->id = i;
		if (o->mode != MODE_RPC)
			continue;
		x->t0 = calloc(cl->window, sizeof(*x->t0));
		x->lat = calloc(1, sizeof(*x->lat));
		if (!x->t0 || !x->lat)
			return -1;
	}
	return 0;
}

static void client_free(struct bclient *cl)
{
	uint32_t i;

	for (i = 0; cl->cc && i < cl->o->conns; i++) {
		/* the handle pc_connect() returned: valid past pc_engine_destroy() */
		pc_conn_put(cl->cc[i].conn);
		free(cl->cc[i].t0);
		free(cl->cc[i].lat);
		free(cl->cc[i].buf);
		free(cl->cc[i].ops);
		free(cl->cc[i].expect);
	}
	free(cl->cc);
}

/*
 * Send buffers per worker: the main thread's slot keeps a stock of up to
 * about half the pool (a power-of-two ring), and the rest must still cover
 * every window of the worker's connections, so that a top-up on the worker
 * does not run dry.
 */
static uint32_t tx_bufs_for(const struct bclient *cl)
{
	uint32_t per_worker = (cl->o->conns + cl->o->workers - 1) / cl->o->workers;
	uint64_t need = 2ull * cl->window * per_worker + 64, tx = 1024;

	while (tx < pc_align_pow2(tx / 2 + 1) + need && tx < (1u << 20))
		tx += 512;
	return (uint32_t)tx;
}

static struct pc_engine *client_engine(struct bclient *cl)
{
	const struct bench_opts *o = cl->o;
	struct pc_engine_params p;
	/*
	 * --msg-size below --size: messages above it go by rendezvous. Without
	 * it, the engine's default (4096), or --size above that: buffers that
	 * hold a pack of small messages (docs/api.md), as an application's do.
	 */
	uint32_t msg = o->mode == MODE_SEND || o->mode == MODE_RPC ?
		       (o->msg_size ? PC_MIN(o->msg_size, o->size) : PC_MAX(o->size, 4096u)) : 0;
	struct pc_engine *e;

	bench_params(o, PC_MAX(msg, (uint32_t)sizeof(struct bench_ctl)), &p);
	/*
	 * Credits this side grants cover a full window of responses. Not fewer
	 * than the engine's default: with one credit the server's next response
	 * waits for the grant of the last one, which comes back only after this
	 * side's request has completed (a round trip more per request).
	 */
	if (o->mode == MODE_RPC && cl->window > PC_WINDOW_DEFAULT)
		p.window = cl->window;
	p.tx_bufs = tx_bufs_for(cl);
	p.on_conn = cli_on_conn;
	p.on_msg = cli_on_msg;
	p.arg = cl;
	e = pc_engine_create(&p);
	if (!e)
		return NULL;
	if (pc_app_attach(e, 0)) {
		pc_engine_destroy(e);
		return NULL;
	}
	return e;
}

static int client_connect(struct bclient *cl, struct pc_engine *e, struct bench_result *r)
{
	const struct bench_opts *o = cl->o;
	uint32_t i;

	for (i = 0; i < o->conns; i++) {
		cl->cc[i].conn = pc_connect(e, o->addr, (uint16_t)o->port, -1,
					   o->connect_timeout_s ? (int)o->connect_timeout_s * 1000 : 10000,
					   &cl->cc[i]);
		if (!cl->cc[i].conn) {
			fail_main(r, "cannot connect to %s port %u (connection %u of %u): %s (%s)",
				  o->addr, o->port, i + 1, o->conns, strerror(errno),
				  pc_last_error());
			return -1;
		}
	}
	return 0;
}

static void collect(struct bclient *cl, struct bench_result *r)
{
	uint32_t i;

	/* cc is NULL when client_alloc() failed */
	for (i = 0; cl->cc && i < cl->o->conns; i++) {
		if (cl->cc[i].err[0])
			fail_main(r, "%s", cl->cc[i].err);
		if (cl->cc[i].lat) {
			if (!r->lat)
				r->lat = calloc(1, sizeof(*r->lat));
			if (r->lat)
				hist_merge(r->lat, cl->cc[i].lat);
		}
	}
}

int bench_client(const struct bench_opts *o, struct bench_result *r)
{
	struct bclient cl = { .o = o, .efd = eventfd(0, EFD_CLOEXEC) };
	struct progress pg = { 0 };
	struct pc_engine *e = NULL;
	uint64_t t0 = bench_now_ns(), t1, t2;
	uint32_t i;
	int ret = -1;

	cl.limit = o->count ? o->count : UINT64_MAX;
	cl.window = o->mode == MODE_SEND && o->producer == PROD_THREAD ? 1 : o->window;
	cl.ack_every = PC_MAX(cl.window / 4, 1u);
	/* every slot of a write or read region is moved at least once */
	if (o->count && cl.window > o->count)
		cl.window = (uint32_t)o->count;
	cl.seed = (uint32_t)bench_now_ns() | 1;
	if (client_alloc(&cl)) {
		fail_main(r, "out of memory for %u connections", o->conns);
		goto out;
	}
	e = client_engine(&cl);
	if (!e) {
		fail_main(r, "cannot start the engine: %s", pc_last_error());
		goto out;
	}
	t1 = bench_now_ns();
	if (client_connect(&cl, e, r))
		goto out;
	t2 = bench_now_ns();
	fprintf(stderr, PROG " %s: engine up in %.2f s, %u connection%s in %.2f s\n",
		bench_mode_name(o->mode), (double)(t1 - t0) / 1e9, o->conns, o->conns > 1 ? "s" : "",
		(double)(t2 - t1) / 1e9);
	if ((o->mode == MODE_WRITE || o->mode == MODE_READ) && region_setup(&cl))
		goto out;
	if (o->mode == MODE_SEND && o->producer == PROD_WORKER) {
		struct bench_ctl req = { .op = CTL_ACKS, .slots = cl.ack_every };

		if (ctl_all(&cl, &req))
			goto out;
	}
	pg.t_start = pg.t_moved = bench_now_ns();
	pg.t_next = pg.t_start + 1000000000ull;
	if (o->mode == MODE_SEND && o->producer == PROD_THREAD ? send_loop(&cl, &pg)
							       : kick(&cl) || wait_done(&cl, &pg))
		goto out;
	if (check_counts(&cl, r, pg.t_start))
		goto out;
	if ((o->mode == MODE_WRITE || o->mode == MODE_READ) && check_bytes(&cl, r))
		goto out;
	ret = 0;
out:
	collect(&cl, r);
	if (!ret)
		ret = judge(o, r);
	atomic_store_explicit(&cl.ending, 1, memory_order_relaxed);
	atomic_store_explicit(&cl.stop, 1, memory_order_relaxed);
	for (i = 0; cl.cc && i < o->conns; i++)
		pc_mem_dereg(cl.cc[i].mr);
	/* the worker's counters (doorbells, WRs per doorbell, credit WRITEs), as the server prints */
	pc_engine_print_stats(e, stderr);
	t1 = bench_now_ns();
	pc_engine_destroy(e);
	fprintf(stderr, PROG " %s: engine down in %.2f s\n", bench_mode_name(o->mode),
		(double)(bench_now_ns() - t1) / 1e9);
	client_free(&cl);
	if (cl.efd >= 0)
		close(cl.efd);
	return ret;
}
