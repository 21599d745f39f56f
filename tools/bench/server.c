// SPDX-License-Identifier: MIT
/*
 * pollcore-bench server: handler mode, one record per connection.
 *
 * On its worker it counts the data messages and bytes of each connection,
 * checks their sequence numbers, answers requests in place (pc_reply of
 * the received buffer) and one-way messages not at all, or every Nth one
 * when the client asked for acknowledgements (CTL_ACKS), and answers the
 * control requests CTL_REPORT, CTL_ACKS and CTL_DIGEST itself. What needs a syscall
 * (registering a region for CTL_REGION, freeing one when its connection
 * closes) goes to the main thread through a small locked queue and a pipe;
 * the main thread is attached to application slot 0 so that it can
 * pc_reply() there.
 */
#include "../cli.h"
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <infiniband/verbs.h>

struct sconn {
	/* the worker's */
	uint64_t msgs, bytes, disorder, next;
	uint64_t bad_want, bad_got;	/* the first message out of order */
	uint32_t ack_every, ack_left;	/* send mode, worker producer: acknowledge every Nth */
	uint32_t undercount;	/* countdown to the next message left uncounted */
	/* set by the main thread before it answers CTL_REGION */
	uint8_t *region;
	uint64_t region_len;
	void *mr;
	/* identity, for the closing line */
	struct pc_conn *conn;
	char device[64];
	uint32_t qpn;
	struct sconn *next_live;
};

enum job_kind { JOB_REGION, JOB_CLOSED };

struct job {
	enum job_kind kind;
	struct sconn *sc;
	struct pc_msg *req;	/* JOB_REGION: the request, answered in place */
	struct job *next;
};

struct server {
	const struct bench_opts *o;
	pthread_mutex_t lock;	/* jobs and live */
	struct job *jobs, **jobs_tail;
	struct sconn *live;
	int pipe[2];		/* worker -> main: jobs are waiting */
	uint64_t conns, msgs, bytes, disorder;	/* main thread: closed connections' totals */
};

static void enqueue(struct server *s, enum job_kind kind, struct sconn *sc, struct pc_msg *req)
{
	struct job *j = calloc(1, sizeof(*j));
	char one = 1;

	if (!j) {
		fprintf(stderr, PROG " server: out of memory for a job; connection dropped\n");
		if (req)
			pc_msg_release(req);
		return;
	}
	*j = (struct job){ .kind = kind, .sc = sc, .req = req };
	pthread_mutex_lock(&s->lock);
	*s->jobs_tail = j;
	s->jobs_tail = &j->next;
	pthread_mutex_unlock(&s->lock);
	if (write(s->pipe[1], &one, 1) < 0 && errno != EAGAIN)
		fprintf(stderr, PROG " server: waking the main thread: %s\n", strerror(errno));
}

/*
 * The record of @conn, made by whichever comes first on its worker: on_conn
 * (PC_CONN_UP) or the first message. On rxe the passive side has been seen
 * to deliver the client's first messages before PC_CONN_UP.
 */
static struct sconn *sconn_get(struct server *s, struct pc_conn *conn)
{
	struct sconn *sc = pc_conn_user(conn);
	struct pc_conn_info ci;

	if (sc)
		return sc;
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		fprintf(stderr, PROG " server: out of memory; closing a connection\n");
		pc_close(conn);
		return NULL;
	}
	pc_conn_info(conn, &ci);
	sc->conn = conn;
	sc->qpn = ci.qp_num;
	sc->undercount = s->o->undercount_every;
	snprintf(sc->device, sizeof(sc->device), "%s", ci.device);
	pthread_mutex_lock(&s->lock);
	sc->next_live = s->live;
	s->live = sc;
	pthread_mutex_unlock(&s->lock);
	pc_conn_set_user(conn, sc);
	return sc;
}

static void srv_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct server *s = arg;
	struct sconn *sc = pc_conn_user(conn);

	if (ev == PC_CONN_UP)
		sconn_get(s, conn);
	else if (sc)
		enqueue(s, JOB_CLOSED, sc, NULL);
}

static void reply_ctl(struct pc_msg *m, const struct bench_ctl *c)
{
	int ret;

	memcpy(m->data, c, sizeof(*c));
	m->len = sizeof(*c);
	ret = pc_reply(m);
	if (ret) {
		fprintf(stderr, PROG " server: control reply: %s\n", pc_last_error());
		if (ret != -ENOTCONN)
			pc_msg_release(m);
	}
}

/* On the worker: a control request. */
static void srv_ctl(struct server *s, struct sconn *sc, struct pc_msg *m)
{
	struct bench_ctl c;

	memcpy(&c, m->data, sizeof(c));
	c.status = 0;
	switch (c.op) {
	case CTL_REPORT:
		c.msgs = sc->msgs;
		c.bytes = sc->bytes;
		c.disorder = sc->disorder;
		break;
	case CTL_DIGEST:
		if (sc->region)
			c.digest = bench_digest(sc->region, sc->region_len);
		else
			c.status = -ENOENT;
		break;
	case CTL_ACKS:
		sc->ack_every = sc->ack_left = c.slots;
		break;
	case CTL_REGION:
		enqueue(s, JOB_REGION, sc, m);
		return;
	default:
		c.status = -EOPNOTSUPP;
	}
	reply_ctl(m, &c);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	struct server *s = arg;
	struct sconn *sc = sconn_get(s, m->conn);
	int ret;

	if (pc_unlikely(!sc)) {
		pc_msg_release(m);
		return;
	}
	if (pc_unlikely(bench_is_ctl(m))) {
		srv_ctl(s, sc, m);
		return;
	}
	if (pc_unlikely(bench_stamp_of(m->data, m->len) != (sc->next & bench_stamp_mask(m->len))) &&
	    !sc->disorder++) {
		sc->bad_want = sc->next;
		sc->bad_got = bench_stamp_of(m->data, m->len);
	}
	sc->next++;
	if (pc_unlikely(sc->undercount) && !--sc->undercount)
		sc->undercount = s->o->undercount_every; /* testing clients: not counted */
	else {
		sc->msgs++;
		sc->bytes += m->len;
	}
	if (m->type == PC_MSG_REQUEST) {
		ret = pc_reply(m);
	} else if (pc_unlikely(sc->ack_every) && !--sc->ack_left) {
		/* the received buffer goes back with the count */
		sc->ack_left = sc->ack_every;
		memcpy(m->data, &sc->next, sizeof(sc->next));
		m->len = sizeof(sc->next);
		ret = pc_send(m);
	} else {
		pc_msg_release(m);
		return;
	}
	if (pc_unlikely(ret)) {
		fprintf(stderr, PROG " server: answer failed: %s\n", pc_last_error());
		if (ret != -ENOTCONN)
			pc_msg_release(m);
	}
}

/* --- the main thread --------------------------------------------------------------------- */

/* CTL_REGION: a region of slots x size that the client may write or read, nothing more. */
static void do_region(struct sconn *sc, struct pc_msg *m)
{
	struct bench_ctl c;
	uint64_t len;
	uint32_t lkey, rkey;
	int access;

	memcpy(&c, m->data, sizeof(c));
	len = (uint64_t)c.slots * c.size;
	access = c.mode == MODE_WRITE ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
				      : IBV_ACCESS_REMOTE_READ;
	c.status = 0;
	if (sc->region || !len || len > BENCH_MAX_REGION ||
	    (c.mode != MODE_WRITE && c.mode != MODE_READ)) {
		c.status = sc->region ? -EEXIST : -EINVAL;
		goto reply;
	}
	sc->region = aligned_alloc(4096, (len + 4095) & ~4095ull);
	if (!sc->region) {
		c.status = -ENOMEM;
		goto reply;
	}
	/* read: the client checks the bytes; write: anything but what it will write */
	bench_pattern_fill(sc->region, len, c.mode == MODE_READ ? c.seed : ~c.seed);
	sc->mr = pc_mem_reg(sc->conn, sc->region, len, access, &lkey, &rkey);
	if (!sc->mr) {
		fprintf(stderr, PROG " server: %s\n", pc_last_error());
		c.status = -errno;
		free(sc->region);
		sc->region = NULL;
		goto reply;
	}
	sc->region_len = len;
	c.addr = (uintptr_t)sc->region;
	c.rkey = rkey;
reply:
	memcpy(m->data, &c, sizeof(c));
	while (pc_reply(m) == -ENOBUFS)
		usleep(100);
}

static void unlink_live(struct server *s, struct sconn *sc)
{
	struct sconn **p;

	pthread_mutex_lock(&s->lock);
	for (p = &s->live; *p && *p != sc; p = &(*p)->next_live)
		;
	if (*p)
		*p = sc->next_live;
	pthread_mutex_unlock(&s->lock);
}

static void do_closed(struct server *s, struct sconn *sc)
{
	printf(PROG " server: %s qp 0x%x closed: %" PRIu64 " messages, %" PRIu64
		    " bytes, %" PRIu64 " out of order",
	       sc->device, sc->qpn, sc->msgs, sc->bytes, sc->disorder);
	if (sc->disorder)
		printf(" (the first: message %" PRIu64 " carried sequence number %" PRIu64 ")",
		       sc->bad_want, sc->bad_got);
	printf("\n");
	fflush(stdout);
	s->conns++;
	s->msgs += sc->msgs;
	s->bytes += sc->bytes;
	s->disorder += sc->disorder;
	unlink_live(s, sc);
	pc_mem_dereg(sc->mr);
	free(sc->region);
	free(sc);
}

/* @engine_gone: after pc_engine_destroy(), which took back every held request. */
static void run_jobs(struct server *s, bool engine_gone)
{
	struct job *j, *next;
	char buf[64];

	while (read(s->pipe[0], buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&s->lock);
	j = s->jobs;
	s->jobs = NULL;
	s->jobs_tail = &s->jobs;
	pthread_mutex_unlock(&s->lock);
	for (; j; j = next) {
		next = j->next;
		if (j->kind == JOB_REGION && !engine_gone)
			do_region(j->sc, j->req);
		else if (j->kind == JOB_CLOSED)
			do_closed(s, j->sc);
		free(j);
	}
}

/* Waits for a signal, serving jobs meanwhile; returns the signal. */
static int serve(struct server *s, const sigset_t *sigs)
{
	struct signalfd_siginfo si = { .ssi_signo = SIGTERM };
	struct pollfd pf[2];
	int sfd = signalfd(-1, sigs, SFD_CLOEXEC);

	if (sfd < 0) {
		fprintf(stderr, PROG " server: signalfd: %s\n", strerror(errno));
		return SIGTERM;
	}
	pf[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = s->pipe[0], .events = POLLIN };
	for (;;) {
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			run_jobs(s, false);
		if (pf[0].revents && read(sfd, &si, sizeof(si)) == sizeof(si))
			break;
	}
	close(sfd);
	return (int)si.ssi_signo;
}

int bench_server(const struct bench_opts *o, const char *bind, uint32_t max_size)
{
	struct server s = { .o = o, .lock = PTHREAD_MUTEX_INITIALIZER };
	struct pc_engine_params p;
	struct pc_engine *e;
	struct sconn *sc;
	sigset_t sigs;
	int sig, ret = -1;

	s.jobs_tail = &s.jobs;
	if (pipe2(s.pipe, O_NONBLOCK | O_CLOEXEC)) {
		fprintf(stderr, PROG " server: pipe: %s\n", strerror(errno));
		return -1;
	}
	/* the engine's threads inherit this: signals reach the signalfd */
	cli_block_stop_signals(&sigs);

	bench_params(o, PC_MAX(max_size, (uint32_t)sizeof(struct bench_ctl)), &p);
	p.window = o->window;
	p.tx_bufs = 64; /* answers travel in the received buffers */
	p.on_conn = srv_on_conn;
	p.on_msg = srv_on_msg;
	p.arg = &s;
	e = cli_engine_start("server", &p);
	if (!e)
		goto out;
	if (pc_app_attach(e, 0) || pc_listen(e, bind, (uint16_t)o->port)) {
		fprintf(stderr, PROG " server: cannot listen on %s port %u: %s\n",
			bind ? bind : "any address", o->port, pc_last_error());
		goto out;
	}
	printf(PROG " server: listening on %s port %u (%u worker%s, messages up to %u B, "
		    "window %u, %u receive buffers)\n",
	       bind ? bind : "any address", pc_listen_port(e), o->workers,
	       o->workers > 1 ? "s" : "", p.msg_size, p.window, p.rx_bufs);
	fflush(stdout);
	sig = serve(&s, &sigs);
	ret = 0;
	printf(PROG " server: %s: %" PRIu64 " connections closed, %" PRIu64 " messages, %" PRIu64
		    " bytes, %" PRIu64 " out of order\n",
	       strsignal(sig), s.conns, s.msgs, s.bytes, s.disorder);
	pc_engine_print_stats(e, stdout);
	fflush(stdout);
	/* regions go before their protection domain does */
	pthread_mutex_lock(&s.lock);
	for (sc = s.live; sc; sc = sc->next_live) {
		pc_mem_dereg(sc->mr);
		sc->mr = NULL;
	}
	pthread_mutex_unlock(&s.lock);
out:
	pc_engine_destroy(e);
	run_jobs(&s, true);
	close(s.pipe[0]);
	close(s.pipe[1]);
	return ret;
}
