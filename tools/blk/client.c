// SPDX-License-Identifier: MIT
/*
 * tools/blk/client.c - pollcore-blk's client: fio-like workloads over one
 * connection, with verification (docs/storage.md).
 *
 * --verify: every block a write carries is stamped with its LBA, a
 * generation and a checksum (proto.h); the client remembers the last
 * generation acknowledged per I/O unit and never has two commands on one
 * unit at once, so every read has exactly one right answer. A verified run
 * writes the whole region first, runs the workload checking every read,
 * then reads the whole region back and checks it. --phase write|check
 * split that for the durability test: write the region with one
 * generation and FLUSH; later, after a server crash and restart, read it
 * back expecting that generation everywhere.
 */
#include "client.h"

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STALL_S 30 /* no completion for this long: give up */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

/* --- latency histogram ---------------------------------------------------------------- */

/* The value at quantile @q, in microseconds. */
static double hist_us(const struct tool_hist *h, double q)
{
	return hist_quantile(h, q) / 1e3;
}

/* --- the worker: issuing and completing ----------------------------------------------- */

static inline uint64_t rng_next(struct client *cl)
{
	uint64_t x = cl->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	cl->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static void cli_fail(struct client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cli_fail(struct client *cl, const char *fmt, ...)
{
	va_list ap;

	if (atomic_load_explicit(&cl->failed, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	vsnprintf(cl->err, sizeof(cl->err), fmt, ap);
	va_end(ap);
	atomic_store_explicit(&cl->failed, 1, memory_order_release);
}

/*
 * The next unit the job wants, or UINT64_MAX when it must wait (the unit is
 * busy). *@again: a unit a close lost, issued again (not counted as new).
 */
static uint64_t pick_unit(struct client *cl, bool *again)
{
	uint64_t u;
	int tries;

	*again = cl->nredo > 0;
	if (*again)
		return cl->redo[--cl->nredo]; /* never busy: nothing is in flight on it */
	if (cl->job.perm)
		u = cl->perm[cl->issued];
	else if (!cl->job.rand)
		u = cl->seq_pos % cl->nunits;
	else {
		for (tries = 0; tries < 8; tries++) {
			u = rng_next(cl) % cl->nunits;
			if (!cl->unit_busy[u])
				return u;
		}
		return UINT64_MAX;
	}
	return cl->unit_busy[u] ? UINT64_MAX : u;
}

/* Issues commands up to the queue depth; returns how many. Worker. */
static int issue(struct client *cl)
{
	struct blk_cmd c = {.magic = BLK_CMD_MAGIC, .len = cl->iobs, .rkey = cl->rkey};
	struct cslot *s;
	struct pc_msg *m;
	uint32_t idx, k;
	uint64_t u;
	bool again;
	int n = 0, ret;

	while (cl->inflight < cl->depth &&
	       (!cl->job.total || cl->issued < cl->job.total || cl->nredo) &&
	       !atomic_load_explicit(&cl->stop, memory_order_relaxed)) {
		m = pc_msg_alloc(cl->conn);
		if (!m)
			break; /* ENOBUFS: all send buffers out; completions bring them back */
		u = pick_unit(cl, &again);
		if (u == UINT64_MAX) {
			pc_msg_release(m);
			break;
		}
		idx = cl->free_slots[--cl->nfree];
		s = &cl->slots[idx];
		s->unit = u;
		s->seq++;
		s->op = cl->job.read_pct == 100			? BLK_OP_READ
			: !cl->job.read_pct			? BLK_OP_WRITE
			: rng_next(cl) % 100 < cl->job.read_pct ? BLK_OP_READ
								: BLK_OP_WRITE;
		c.opcode = s->op;
		c.lba = cl->base_lba + u * cl->blks_per_io;
		c.addr = (uintptr_t)(cl->buf + (size_t)idx * cl->iobs);
		c.tag = CLI_DATA_TAG | (uint64_t)s->seq << 32 | idx;
		if (s->op == BLK_OP_WRITE) {
			s->gen = cl->job.fixed_gen ? cl->job.fixed_gen : ++cl->gen_next;
			if (cl->job.verify)
				for (k = 0; k < cl->blks_per_io; k++)
					blk_stamp_fill(cl->buf + (size_t)idx * cl->iobs + k * cl->g.bs,
						       cl->g.bs, c.lba + k, s->gen);
		} else {
			s->gen = cl->gen[u];
		}
		blk_cmd_encode(&c, m->data);
		m->len = sizeof(c);
		s->t0 = blk_now_ns();
		ret = pc_call(m, NULL, NULL, 0, NULL);
		if (pc_unlikely(ret)) {
			cl->free_slots[cl->nfree++] = idx;
			if (again)
				cl->redo[cl->nredo++] = (uint32_t)u;
			if (ret == -EAGAIN) { /* the request window: wait for completions */
				pc_msg_release(m);
				break;
			}
			cli_fail(cl, "pc_call: %s", pc_last_error());
			if (ret != -ENOTCONN)
				pc_msg_release(m);
			break;
		}
		s->busy = true;
		cl->unit_busy[u] = 1;
		cl->inflight++;
		if (!again) {
			cl->issued++;
			cl->seq_pos++;
		}
		n++;
	}
	return n;
}

/*
 * A unit whose write was in flight at a close (gen_alt) holds the old or the
 * new generation, blocks of either: each block may match either, and the
 * first read settles what the unit has from then on (a mix of both, a write
 * torn by a crash, leaves no single right answer until the next write).
 */
static void check_read(struct client *cl, uint32_t idx, const struct cslot *s)
{
	const uint8_t *b = cl->buf + (size_t)idx * cl->iobs;
	uint64_t lba = cl->base_lba + s->unit * cl->blks_per_io;
	uint32_t alt = cl->gen_alt[s->unit];
	enum blk_stamp_err e;
	uint32_t k, got = 0, want = s->gen, nalt = 0;

	cl->gen_alt[s->unit] = 0;
	if (!want || want == CLI_GEN_UNKNOWN)
		return; /* never written by this run, or a failed write: no right answer */
	for (k = 0; k < cl->blks_per_io; k++) {
		e = blk_stamp_check(b + k * cl->g.bs, cl->g.bs, lba + k, want, &got);
		if (pc_unlikely(e == BLK_STAMP_GEN && alt && got == alt)) {
			e = BLK_STAMP_OK; /* the lost write had landed */
			nalt++;
		}
		cl->checked_blocks++;
		if (pc_likely(e == BLK_STAMP_OK))
			continue;
		if (cl->mismatches < CLI_MISM_MSGS)
			snprintf(cl->mism_msg[cl->mismatches], sizeof(cl->mism_msg[0]),
				 "lba %" PRIu64 ": %s (expected generation %u, found %u)", lba + k,
				 blk_stamp_err_str(e), want, got);
		cl->mismatches++;
	}
	if (nalt)
		cl->gen[s->unit] = nalt == cl->blks_per_io ? alt : CLI_GEN_UNKNOWN;
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	struct client *cl = arg;
	struct blk_cpl c;
	struct cslot *s;
	uint32_t idx;
	uint32_t len = m->len;
	int ret;

	ret = m->type == PC_MSG_RESPONSE ? blk_cpl_decode(m->data, len, &c) : -EPROTO;
	pc_msg_release(m);
	if (ret) {
		cli_fail(cl, "a message that is no completion (%u bytes)", len);
		return;
	}
	if (!(c.tag & CLI_DATA_TAG)) {
		if (atomic_load_explicit(&cl->sync_state, memory_order_relaxed) == SYNC_SENT) {
			cl->sync_cpl = c;
			atomic_store_explicit(&cl->sync_state, SYNC_ANSWERED, memory_order_release);
		} else {
			cli_fail(cl, "a completion nobody waits for (tag 0x%" PRIx64 ")", c.tag);
		}
		return;
	}
	idx = (uint32_t)c.tag;
	s = idx < cl->depth ? &cl->slots[idx] : NULL;
	if (!s || !s->busy || (uint32_t)(c.tag >> 32 & 0x3fffffff) != (s->seq & 0x3fffffff)) {
		cli_fail(cl, "completion with tag 0x%" PRIx64 " matches no command in flight", c.tag);
		return;
	}
	hist_add(&cl->lat, blk_now_ns() - s->t0);
	if (c.status != BLK_S_OK) {
		cl->errors++;
		cli_fail(cl, "%s of lba %" PRIu64 ": status %u (%s)",
			 s->op == BLK_OP_READ ? "read" : "write", s->unit * cl->blks_per_io,
			 c.status, blk_status_str(c.status));
		if (s->op == BLK_OP_WRITE) {
			cl->gen[s->unit] = CLI_GEN_UNKNOWN;
			cl->gen_alt[s->unit] = 0;
		}
	} else if (s->op == BLK_OP_WRITE) {
		cl->gen[s->unit] = s->gen;
		cl->gen_alt[s->unit] = 0;
		atomic_fetch_add_explicit(&cl->done_writes, 1, memory_order_relaxed);
	} else {
		if (cl->job.verify)
			check_read(cl, idx, s);
		atomic_fetch_add_explicit(&cl->done_reads, 1, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&cl->done_ios, 1, memory_order_relaxed);
	s->busy = false;
	cl->unit_busy[s->unit] = 0;
	cl->free_slots[cl->nfree++] = idx;
	cl->inflight--;
}

/*
 * Forgets what was in flight on a closed connection; its completions will
 * never come. With --reconnect the job goes on: a write in flight may or may
 * not have landed (check_read() takes either generation), and a counted
 * job (prefill, read-back, phases) issues the lost units again.
 */
static void cli_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct client *cl = arg;
	struct pc_conn *expect = conn;
	struct cslot *s;
	uint32_t i;

	if (ev != PC_CONN_DOWN)
		return;
	/* closed before the poller took it over: the handle must not reach it */
	if (atomic_compare_exchange_strong(&cl->new_conn, &expect, NULL)) {
		snprintf(cl->down_reason, sizeof(cl->down_reason), "%s", pc_last_error());
		atomic_store_explicit(&cl->down, true, memory_order_release);
		pc_conn_put(conn);
		return;
	}
	if (conn != cl->conn)
		return;
	snprintf(cl->down_reason, sizeof(cl->down_reason), "%s", pc_last_error());
	for (i = 0; i < cl->depth; i++) {
		s = &cl->slots[i];
		if (!s->busy)
			continue;
		s->busy = false;
		cl->unit_busy[s->unit] = 0;
		cl->free_slots[cl->nfree++] = i;
		if (!cl->reconnect)
			continue;
		if (s->op == BLK_OP_WRITE && cl->gen_alt[s->unit]) /* a third candidate */
			cl->gen[s->unit] = CLI_GEN_UNKNOWN;
		if (s->op == BLK_OP_WRITE && cl->gen[s->unit] != CLI_GEN_UNKNOWN)
			cl->gen_alt[s->unit] = s->gen;
		else if (s->op == BLK_OP_WRITE)
			cl->gen_alt[s->unit] = 0;
		if (cl->job.total)
			cl->redo[cl->nredo++] = (uint32_t)s->unit;
		cl->lost++;
	}
	if (!cl->reconnect &&
	    (cl->inflight || atomic_load_explicit(&cl->state, memory_order_relaxed) == JOB_RUN))
		cli_fail(cl, "the connection closed with %u commands in flight: %s", cl->inflight,
			 cl->down_reason);
	cl->inflight = 0;
	cl->conn = NULL;
	/* pc_connect()'s reference, which cli_poll() took over */
	pc_conn_put(conn);
	atomic_store_explicit(&cl->down, true, memory_order_release);
}

/* Every turn of the worker: the main thread's command, then the job's commands. */
static int cli_poll(void *arg)
{
	struct client *cl = arg;
	struct pc_conn *nc;
	struct pc_msg *m;
	int work = 0, st;

	if (!cl->conn) {
		nc = atomic_exchange_explicit(&cl->new_conn, NULL, memory_order_acquire);
		if (!nc) {
			/* closed, and no new connection will come: the job ends here */
			if (atomic_load_explicit(&cl->failed, memory_order_relaxed) &&
			    atomic_load_explicit(&cl->state, memory_order_relaxed) == JOB_RUN)
				atomic_store_explicit(&cl->state, JOB_DONE, memory_order_release);
			return 0;
		}
		cl->conn = nc;
	}
	if (atomic_load_explicit(&cl->sync_state, memory_order_acquire) == SYNC_REQ &&
	    (m = pc_msg_alloc(cl->conn))) {
		memcpy(m->data, cl->sync_raw, cl->sync_len);
		m->len = cl->sync_len;
		atomic_store_explicit(&cl->sync_state, SYNC_SENT, memory_order_relaxed);
		if (pc_call(m, NULL, NULL, 0, NULL)) {
			pc_msg_release(m);
			atomic_store_explicit(&cl->sync_state, SYNC_REQ, memory_order_relaxed);
		}
		work++;
	}
	st = atomic_load_explicit(&cl->state, memory_order_acquire);
	if (st != JOB_RUN)
		return work;
	if (!atomic_load_explicit(&cl->failed, memory_order_relaxed))
		work += issue(cl);
	if (!cl->inflight && (atomic_load_explicit(&cl->failed, memory_order_relaxed) ||
			      atomic_load_explicit(&cl->stop, memory_order_relaxed) ||
			      (cl->job.total && cl->issued >= cl->job.total && !cl->nredo)))
		atomic_store_explicit(&cl->state, JOB_DONE, memory_order_release);
	return work;
}

/* --- the main thread ------------------------------------------------------------------- */

int cli_sync_raw(struct client *cl, const void *raw, uint32_t len, struct blk_cpl *out,
		 int timeout_s)
{
	uint64_t t0 = blk_now_ns();

	memcpy(cl->sync_raw, raw, len);
	cl->sync_len = len;
	atomic_store_explicit(&cl->sync_state, SYNC_REQ, memory_order_release);
	for (;;) {
		if (atomic_load_explicit(&cl->sync_state, memory_order_acquire) == SYNC_ANSWERED) {
			*out = cl->sync_cpl;
			atomic_store_explicit(&cl->sync_state, SYNC_IDLE, memory_order_relaxed);
			return 0;
		}
		if (atomic_load_explicit(&cl->down, memory_order_acquire)) {
			atomic_store_explicit(&cl->sync_state, SYNC_IDLE, memory_order_relaxed);
			return -ENOTCONN;
		}
		if (blk_now_ns() - t0 > (uint64_t)timeout_s * 1000000000u)
			return -ETIMEDOUT;
		usleep(200);
	}
}

int cli_sync_cmd(struct client *cl, const struct blk_cmd *c, struct blk_cpl *out)
{
	uint8_t b[sizeof(*c)];

	blk_cmd_encode(c, b);
	return cli_sync_raw(cl, b, sizeof(b), out, STALL_S);
}

int cli_reconnect(struct client *cl, struct pc_engine *e, const char *addr, uint16_t port)
{
	struct pc_conn *c = pc_connect(e, addr, port, 0, 10000, cl);

	if (!c) {
		fprintf(stderr, PROG " client: cannot connect to %s port %u: %s (%s)\n", addr, port,
			strerror(errno), pc_last_error());
		return -1;
	}
	atomic_store_explicit(&cl->down, false, memory_order_relaxed);
	atomic_store_explicit(&cl->new_conn, c, memory_order_release);
	return 0;
}

/*
 * --reconnect: after a close, connects again for up to reconnect_s seconds.
 * Main thread. Return: 0 (connected again, or not closed), -1.
 */
static int cli_recover(struct client *cl)
{
	uint64_t t0 = blk_now_ns();

	if (!cl->reconnect || !atomic_load_explicit(&cl->down, memory_order_acquire))
		return 0;
	fprintf(stderr, PROG " client: the connection closed (%s); reconnecting for up to %u s\n",
		cl->down_reason, cl->reconnect_s);
	for (;;) {
		if (!cli_reconnect(cl, cl->e, cl->addr, cl->port)) {
			cl->reconnects++;
			fprintf(stderr, PROG " client: reconnected after %.1f s\n",
				(double)(blk_now_ns() - t0) / 1e9);
			return 0;
		}
		if (interrupted || blk_now_ns() - t0 >= (uint64_t)cl->reconnect_s * 1000000000u) {
			fprintf(stderr, PROG " client: no connection within %u s; giving up\n",
				cl->reconnect_s);
			return -1;
		}
		sleep(1);
	}
}

/* cli_sync_cmd(), and with --reconnect once more on every new connection. */
static int sync_cmd(struct client *cl, const struct blk_cmd *c, struct blk_cpl *out)
{
	int ret;

	while ((ret = cli_sync_cmd(cl, c, out)) == -ENOTCONN && cl->reconnect)
		if (cli_recover(cl))
			break;
	return ret;
}

struct cli_opts {
	const char *addr, *rw, *phase;
	uint32_t port, iobs, depth, time_s, gen, reconnect_s;
	uint64_t size, offset;
	bool verify, json, bad_cmds, no_numa;
};

struct run_result {
	double secs;
	uint64_t ios, reads, writes;
};

/* Runs @job until it is done, @time_s passed, or a failure; progress on stderr. */
static int run_job(struct client *cl, const struct job *job, uint32_t time_s, const char *what,
		   struct run_result *r)
{
	uint64_t t0 = blk_now_ns(), t, last_tick = t0, last_ios = 0, last_change = t0, ios,
		 prev_ios = 0;
	unsigned int sec = 0;

	cl->job = *job;
	cl->issued = cl->seq_pos = 0;
	memset(&cl->lat, 0, sizeof(cl->lat));
	atomic_store(&cl->done_ios, 0);
	atomic_store(&cl->done_reads, 0);
	atomic_store(&cl->done_writes, 0);
	atomic_store_explicit(&cl->stop, false, memory_order_relaxed);
	atomic_store_explicit(&cl->state, JOB_RUN, memory_order_release);
	while (atomic_load_explicit(&cl->state, memory_order_acquire) != JOB_DONE) {
		usleep(5000);
		if (atomic_load_explicit(&cl->down, memory_order_acquire) && cl->reconnect) {
			if (cli_recover(cl))
				return -1; /* the worker may still own the job: leave it */
			last_change = blk_now_ns(); /* the stall clock restarts */
		}
		t = blk_now_ns();
		if ((time_s && t - t0 >= (uint64_t)time_s * 1000000000u) || interrupted)
			atomic_store_explicit(&cl->stop, true, memory_order_relaxed);
		ios = atomic_load_explicit(&cl->done_ios, memory_order_relaxed);
		if (ios != prev_ios) {
			prev_ios = ios;
			last_change = t;
		} else if (t - last_change > STALL_S * 1000000000ull) {
			fprintf(stderr, PROG " client: %s: no completion for %d s; giving up\n",
				what, STALL_S);
			return -1; /* the worker may still own the job: leave it */
		}
		if (t - last_tick >= 1000000000ull) {
			sec++;
			fprintf(stderr,
				PROG " client: %s [%us] %.0f IOPS, %.2f MiB/s, %" PRIu64 " done\n",
				what, sec, (double)(ios - last_ios) * 1e9 / (double)(t - last_tick),
				(double)(ios - last_ios) * cl->iobs * 1e9 / (double)(t - last_tick) /
				    1048576.0,
				ios);
			last_tick = t;
			last_ios = ios;
		}
	}
	r->secs = (double)(blk_now_ns() - t0) / 1e9;
	r->ios = atomic_load(&cl->done_ios);
	r->reads = atomic_load(&cl->done_reads);
	r->writes = atomic_load(&cl->done_writes);
	atomic_store_explicit(&cl->state, JOB_IDLE, memory_order_relaxed);
	if (atomic_load_explicit(&cl->failed, memory_order_acquire)) {
		fprintf(stderr, PROG " client: %s FAILED: %s\n", what, cl->err);
		return -1;
	}
	if (interrupted) {
		fprintf(stderr, PROG " client: %s interrupted (%s)\n", what, strsignal(interrupted));
		return -1;
	}
	return 0;
}

/* A random order of every unit, for one-pass random jobs. */
static int make_perm(struct client *cl)
{
	uint64_t i, j;
	uint32_t t;

	if (cl->perm)
		return 0;
	cl->perm = malloc(cl->nunits * sizeof(*cl->perm));
	if (!cl->perm)
		return -1;
	for (i = 0; i < cl->nunits; i++)
		cl->perm[i] = (uint32_t)i;
	for (i = cl->nunits - 1; i > 0; i--) {
		j = rng_next(cl) % (i + 1);
		t = cl->perm[i];
		cl->perm[i] = cl->perm[j];
		cl->perm[j] = t;
	}
	return 0;
}

static int flush(struct client *cl)
{
	struct blk_cmd c = {.magic = BLK_CMD_MAGIC, .opcode = BLK_OP_FLUSH, .tag = 2};
	struct blk_cpl r;
	int ret = sync_cmd(cl, &c, &r);

	if (ret || r.status != BLK_S_OK) {
		fprintf(stderr, PROG " client: FLUSH failed: %s\n",
			ret ? strerror(-ret) : blk_status_str(r.status));
		return -1;
	}
	return 0;
}

static void print_mismatches(const struct client *cl)
{
	uint64_t i;

	for (i = 0; i < cl->mismatches && i < CLI_MISM_MSGS; i++)
		fprintf(stderr, PROG " client: MISMATCH %s\n", cl->mism_msg[i]);
}

static void report(const struct client *cl, const struct cli_opts *o, const struct run_result *r)
{
	double iops = r->secs > 0 ? (double)r->ios / r->secs : 0;
	double mibs = iops * cl->iobs / 1048576.0;

	if (o->json) {
		printf("{\"rw\": \"%s\", \"bs\": %u, \"iodepth\": %u, \"size\": %" PRIu64
		       ", \"secs\": %.3f, \"ios\": %" PRIu64 ", \"reads\": %" PRIu64
		       ", \"writes\": %" PRIu64 ", \"iops\": %.0f, \"bw_mib_s\": %.3f, "
		       "\"lat_us\": {\"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f}, "
		       "\"verify\": %s, \"blocks_checked\": %" PRIu64 ", \"mismatches\": %" PRIu64
		       ", \"errors\": %" PRIu64 ", \"reconnects\": %u, \"lost_in_flight\": %" PRIu64
		       "}\n",
		       o->rw, cl->iobs, cl->depth, cl->nunits * cl->iobs, r->secs, r->ios, r->reads,
		       r->writes, iops, mibs, hist_us(&cl->lat, 0.5), hist_us(&cl->lat, 0.99),
		       hist_us(&cl->lat, 0.999), (double)cl->lat.max / 1e3,
		       o->verify ? "true" : "false", cl->checked_blocks, cl->mismatches, cl->errors,
		       cl->reconnects, cl->lost);
		return;
	}
	printf("%-9s %s, bs %u, iodepth %u, size %" PRIu64 " KiB\n", "job", o->rw, cl->iobs,
	       cl->depth, cl->nunits * cl->iobs >> 10);
	printf("%-9s %" PRIu64 " I/Os in %.3f s (%" PRIu64 " reads, %" PRIu64 " writes)\n", "done",
	       r->ios, r->secs, r->reads, r->writes);
	printf("%-9s %.0f IOPS, %.3f MiB/s\n", "rate", iops, mibs);
	printf("%-9s p50 %.1f us  p99 %.1f us  p99.9 %.1f us  (max %.1f us)\n", "latency",
	       hist_us(&cl->lat, 0.5), hist_us(&cl->lat, 0.99), hist_us(&cl->lat, 0.999),
	       (double)cl->lat.max / 1e3);
	if (o->verify)
		printf("%-9s %" PRIu64 " mismatches in %" PRIu64 " blocks checked\n", "verify",
		       cl->mismatches, cl->checked_blocks);
	if (o->reconnect_s)
		printf("%-9s %u reconnects, %" PRIu64 " commands in flight at closes (their "
		       "writes taken as landed or not)\n",
		       "reconnect", cl->reconnects, cl->lost);
}

static int parse_opts(int argc, char **argv, struct cli_opts *o)
{
	static const struct option opts[] = {
	    {"port", required_argument, NULL, 'p'},  {"rw", required_argument, NULL, 'r'},
	    {"bs", required_argument, NULL, 'b'},    {"iodepth", required_argument, NULL, 'q'},
	    {"size", required_argument, NULL, 's'},  {"time", required_argument, NULL, 't'},
	    {"verify", no_argument, NULL, 'V'},      {"json", no_argument, NULL, 'j'},
	    {"phase", required_argument, NULL, 'P'}, {"gen", required_argument, NULL, 'g'},
	    {"bad-cmds", no_argument, NULL, 'B'},    {"no-numa", no_argument, NULL, 'N'},
	    {"offset", required_argument, NULL, 'o'}, {"reconnect", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},	     {0},
	};
	static const char *const rws[] = {"read", "write", "randread", "randwrite", "randrw"};
	uint64_t v;
	unsigned int i;
	int c;

	while ((c = getopt_long(argc, argv, "p:r:b:q:s:t:VjP:g:BNo:R:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (blk_parse_u32("--port", optarg, 1, 65535, &o->port))
				return 2;
			break;
		case 'r':
			for (i = 0; i < sizeof(rws) / sizeof(rws[0]); i++)
				if (!strcmp(optarg, rws[i]))
					o->rw = rws[i];
			if (strcmp(o->rw, optarg))
				return blk_bad_usage("--rw: '%s' is not one of read, write, randread, "
						     "randwrite, randrw", optarg);
			break;
		case 'b':
			if (blk_parse_size("--bs", optarg, 512, 1u << 20, &v))
				return 2;
			o->iobs = (uint32_t)v;
			break;
		case 'q':
			if (blk_parse_u32("--iodepth", optarg, 1, CLI_MAX_DEPTH, &o->depth))
				return 2;
			break;
		case 's':
			if (blk_parse_size("--size", optarg, 512, 1ull << 44, &o->size))
				return 2;
			break;
		case 't':
			if (blk_parse_u32("--time", optarg, 0, 86400, &o->time_s))
				return 2;
			break;
		case 'P':
			if (strcmp(optarg, "write") && strcmp(optarg, "check"))
				return blk_bad_usage("--phase: '%s' is not write or check", optarg);
			o->phase = optarg;
			break;
		case 'g':
			if (blk_parse_u32("--gen", optarg, 1, CLI_GEN_UNKNOWN - 1, &o->gen))
				return 2;
			break;
		case 'o':
			if (blk_parse_size("--offset", optarg, 0, 1ull << 44, &o->offset))
				return 2;
			break;
		case 'R':
			if (blk_parse_u32("--reconnect", optarg, 1, 3600, &o->reconnect_s))
				return 2;
			break;
		case 'V': o->verify = true; break;
		case 'j': o->json = true; break;
		case 'B': o->bad_cmds = true; break;
		case 'N': o->no_numa = true; break;
		case 'h':
			blk_usage(stdout);
			return 0;
		default:
			return blk_bad_usage("client: unknown option or missing value: '%s'",
					     argv[optind - 1]);
		}
	}
	if (optind == argc)
		return blk_bad_usage("client: the server address is missing (e.g. fe80::ff:fe00:1%%d0)");
	if (optind + 1 != argc)
		return blk_bad_usage("client: unexpected argument '%s'", argv[optind + 1]);
	o->addr = argv[optind];
	if (o->phase && o->bad_cmds)
		return blk_bad_usage("client: --phase and --bad-cmds do not go together");
	if (o->reconnect_s && o->bad_cmds)
		return blk_bad_usage("client: --reconnect and --bad-cmds do not go together");
	if (o->size < o->iobs)
		return blk_bad_usage("client: --size %" PRIu64 " is less than one I/O (--bs %u)",
				     o->size, o->iobs);
	if (o->iobs % 512)
		return blk_bad_usage("--bs: %u is not a multiple of 512", o->iobs);
	return -1;
}

/* After IDENTIFY: the I/O unit, the region and the per-unit state. */
static int setup_region(struct client *cl, const struct cli_opts *o)
{
	uint32_t i;

	if (o->iobs % cl->g.bs || o->iobs > cl->g.max_io) {
		fprintf(stderr,
			PROG " client: --bs %u does not fit the server: its blocks are %u bytes "
			     "and a command moves at most %u\n",
			o->iobs, cl->g.bs, cl->g.max_io);
		return -1;
	}
	if (o->offset % cl->g.bs) {
		fprintf(stderr, PROG " client: --offset %" PRIu64 " is not a multiple of the "
				     "server's block size (%u bytes)\n",
			o->offset, cl->g.bs);
		return -1;
	}
	if (o->offset + o->size > cl->g.nblocks * cl->g.bs) {
		fprintf(stderr,
			PROG " client: --offset %" PRIu64 " + --size %" PRIu64
			     " is larger than the device (%" PRIu64 " bytes)\n",
			o->offset, o->size, cl->g.nblocks * cl->g.bs);
		return -1;
	}
	cl->base_lba = o->offset / cl->g.bs;
	cl->iobs = o->iobs;
	cl->blks_per_io = o->iobs / cl->g.bs;
	cl->nunits = o->size / o->iobs;
	if (cl->nunits > UINT32_MAX) {
		fprintf(stderr, PROG " client: --size: more than 2^32 I/O units\n");
		return -1;
	}
	cl->gen = calloc(cl->nunits, sizeof(*cl->gen));
	cl->gen_alt = calloc(cl->nunits, sizeof(*cl->gen_alt));
	cl->unit_busy = calloc(cl->nunits, 1);
	if (!cl->gen || !cl->gen_alt || !cl->unit_busy)
		return -1;
	for (i = 0; i < cl->nunits && o->phase && !strcmp(o->phase, "check"); i++)
		cl->gen[i] = o->gen;
	return 0;
}

static int identify(struct client *cl)
{
	struct blk_cmd c = {.magic = BLK_CMD_MAGIC, .opcode = BLK_OP_IDENTIFY, .tag = 1};
	struct blk_cpl r;
	int ret = sync_cmd(cl, &c, &r);

	if (ret || r.status != BLK_S_OK) {
		fprintf(stderr, PROG " client: IDENTIFY failed: %s\n",
			ret ? strerror(-ret) : blk_status_str(r.status));
		return -1;
	}
	cl->g = (struct blk_geom){.bs = r.bs, .max_io = r.max_io, .nblocks = r.nblocks};
	if (!blk_geom_valid(&cl->g)) {
		fprintf(stderr, PROG " client: the server reports an invalid geometry\n");
		return -1;
	}
	return 0;
}

/* The workload, the phases, or the verified run around the workload. */
static int run(struct client *cl, const struct cli_opts *o)
{
	bool rand = !strncmp(o->rw, "rand", 4);
	uint32_t rpct = strstr(o->rw, "read") ? 100 : strstr(o->rw, "write") ? 0 : 50;
	struct job j = {.rand = rand, .read_pct = rpct, .verify = o->verify};
	struct run_result r = {0}, pre;
	uint64_t mism;

	if (o->phase && !strcmp(o->phase, "write")) {
		j = (struct job){.rand = rand, .perm = rand, .verify = true, .fixed_gen = o->gen,
				 .total = cl->nunits};
		if (rand && make_perm(cl))
			return 1;
		if (run_job(cl, &j, 0, "phase write", &r) || flush(cl))
			return 1;
		printf(PROG " client: phase write: %" PRIu64 " blocks of generation %u written in "
			    "%.3f s, FLUSH acknowledged\n",
		       cl->nunits * cl->blks_per_io, o->gen, r.secs);
		return 0;
	}
	if (o->phase) { /* check */
		j = (struct job){.read_pct = 100, .verify = true, .total = cl->nunits};
		if (run_job(cl, &j, 0, "phase check", &r))
			return 1;
		print_mismatches(cl);
		printf(PROG " client: phase check: %" PRIu64 " mismatches in %" PRIu64
			    " blocks of generation %u\n",
		       cl->mismatches, cl->checked_blocks, o->gen);
		return cl->mismatches || cl->checked_blocks != cl->nunits * cl->blks_per_io;
	}
	if (o->verify) {
		struct job fill = {.verify = true, .total = cl->nunits};

		if (run_job(cl, &fill, 0, "prefill", &pre))
			return 1;
		fprintf(stderr, PROG " client: prefill: %" PRIu64 " blocks stamped in %.3f s\n",
			cl->nunits * cl->blks_per_io, pre.secs);
	}
	if (!o->time_s) {
		j.total = cl->nunits;
		if (rand && !make_perm(cl))
			j.perm = true;
	}
	if (run_job(cl, &j, o->time_s, o->rw, &r))
		return 1;
	if (o->verify) {
		struct job check = {.read_pct = 100, .verify = true, .total = cl->nunits};
		struct run_result cr;
		struct tool_hist keep = cl->lat; /* the report shows the workload's latencies */

		mism = cl->mismatches;
		if (run_job(cl, &check, 0, "read-back", &cr))
			return 1;
		cl->lat = keep;
		fprintf(stderr,
			PROG " client: read-back: %" PRIu64 " blocks checked, %" PRIu64
			     " mismatches (%" PRIu64 " during the workload)\n",
			cl->nunits * cl->blks_per_io, cl->mismatches - mism, mism);
		print_mismatches(cl);
	}
	report(cl, o, &r);
	return cl->mismatches || cl->errors ? 1 : 0;
}

static int client_alloc(struct client *cl, uint32_t depth, uint32_t iobs)
{
	uint32_t i;

	cl->depth = depth;
	cl->slots = calloc(depth, sizeof(*cl->slots));
	cl->free_slots = calloc(depth, sizeof(*cl->free_slots));
	cl->redo = calloc(depth, sizeof(*cl->redo)); /* lost + in flight never exceed depth */
	if (posix_memalign((void **)&cl->buf, 4096, (size_t)depth * iobs) || !cl->slots ||
	    !cl->free_slots || !cl->redo)
		return -1;
	memset(cl->buf, 0, (size_t)depth * iobs);
	for (i = 0; i < depth; i++)
		cl->free_slots[i] = depth - 1 - i;
	cl->nfree = depth;
	cl->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 20 ^ blk_now_ns();
	return 0;
}

int blk_client_main(int argc, char **argv)
{
	struct cli_opts o = {.rw = "randread", .port = BLK_PORT, .iobs = 4096, .depth = 32,
			     .time_s = 10, .gen = 1, .size = 64ull << 20};
	struct sigaction sa = {.sa_handler = on_signal};
	struct pc_engine_params p = { .size = sizeof(p) };
	struct pc_engine *e = NULL;
	struct pc_poller *poller = NULL;
	struct client *cl;
	uint32_t lkey;
	int rc;

	rc = parse_opts(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = 1;
	cl = calloc(1, sizeof(*cl)); /* the histogram is large: not on the stack */
	if (!cl || client_alloc(cl, o.depth, o.iobs)) {
		fprintf(stderr, PROG " client: out of memory\n");
		goto out;
	}
	cl->json = o.json;
	cl->iobs = o.iobs;
	cl->reconnect = o.reconnect_s > 0;
	cl->reconnect_s = o.reconnect_s;
	cl->addr = o.addr;
	cl->port = (uint16_t)o.port;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	p.workers_per_device = 1;
	p.msg_size = 256;
	p.rx_bufs = 256;
	p.tx_bufs = 256;
	p.no_numa = o.no_numa;
	p.on_conn = cli_on_conn;
	p.on_msg = cli_on_msg;
	p.arg = cl;
	e = pc_engine_create(&p);
	if (!e) {
		fprintf(stderr, PROG " client: cannot start the engine: %s\n", pc_last_error());
		goto out;
	}
	cl->e = e;
	if (cli_reconnect(cl, e, o.addr, (uint16_t)o.port))
		goto out;
	cl->mr = pc_mem_reg(atomic_load(&cl->new_conn), cl->buf, (size_t)o.depth * o.iobs,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ,
			    &lkey, &cl->rkey);
	if (!cl->mr) {
		fprintf(stderr, PROG " client: %s\n", pc_last_error());
		goto out;
	}
	poller = pc_worker_add_poller(pc_engine_worker(e, 0), cli_poll, cl);
	if (!poller) {
		fprintf(stderr, PROG " client: pc_worker_add_poller: %s\n", pc_last_error());
		goto out;
	}
	if (identify(cl))
		goto out;
	if (!o.json)
		printf(PROG " client: connected to %s port %u: %" PRIu64 " blocks of %u bytes, "
			    "at most %u bytes per command\n",
		       o.addr, o.port, cl->g.nblocks, cl->g.bs, cl->g.max_io);
	fflush(stdout);
	if (o.bad_cmds) {
		rc = cli_bad_cmds(cl, e, o.addr, (uint16_t)o.port);
		goto out;
	}
	if (setup_region(cl, &o))
		goto out;
	rc = run(cl, &o);
out:
	fflush(stdout);
	if (poller)
		pc_worker_remove_poller(poller);
	/* before the engine lets go of the device; nothing is in flight any more */
	pc_mem_dereg(cl ? cl->mr : NULL);
	pc_engine_destroy(e);
	if (cl) {
		/* handles outlive the engine: whichever is still ours */
		pc_conn_put(cl->conn);
		pc_conn_put(atomic_load(&cl->new_conn));
		free(cl->buf);
		free(cl->slots);
		free(cl->free_slots);
		free(cl->gen);
		free(cl->gen_alt);
		free(cl->unit_busy);
		free(cl->redo);
		free(cl->perm);
		free(cl);
	}
	return rc;
}
