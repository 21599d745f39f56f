// SPDX-License-Identifier: MIT
/*
 * pc_listen(), pc_listen_stop(), pc_listen_port() and pc_connect()
 * (application threads): the rdma_cm ids they make are handed to the
 * control thread (control.c), which takes every event on them.
 */
#include "engine_pvt.h"

#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include "log_pvt.h"

/* --- listen and connect (application threads) ------------------------------------------- */

static int resolve(const char *addr, uint16_t port, bool passive, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP };
	char sport[8];
	int ret;

	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	snprintf(sport, sizeof(sport), "%u", port);
	ret = rdma_getaddrinfo(addr, sport, &hints, res);
	if (ret)
		return set_error(-EADDRNOTAVAIL, "cannot resolve '%s' port %u: %s",
				    addr ? addr : "(any)", port,
				    ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
	return 0;
}

int pc_listen(struct pc_engine *e, const char *addr, uint16_t port)
{
	struct rdma_cm_id *id = NULL;
	struct rdma_addrinfo *res;
	int ret;

	if (!e)
		return set_error(-EINVAL, "pc_listen: no engine");

	/* held across the setup: a second pc_listen() waits, then finds this one */
	pthread_mutex_lock(&e->listen_lock);
	if (e->listen_id) {
		ret = set_error(-EALREADY, "already listening on port %u", e->listen_port);
		goto unlock;
	}
	/*
	 * Any address: the IPv6 wildcard, which rdma_cm also matches for IPv4
	 * (its ids are not AF-only by default). rdma_getaddrinfo(NULL) gives
	 * 0.0.0.0, which no IPv6 request reaches: they were rejected.
	 */
	ret = resolve(addr ? addr : "::", port, true, &res);
	if (ret)
		goto unlock;
	ret = rdma_create_id(e->ch, &id, NULL, RDMA_PS_TCP);
	if (ret) {
		ret = set_error(pc_neg_errno(-1), "rdma_create_id: %s", strerror(errno));
		goto out;
	}
	if (rdma_bind_addr(id, res->ai_src_addr) || rdma_listen(id, 128)) {
		ret = set_error(pc_neg_errno(-1), "cannot listen on %s port %u: %s",
				addr ? addr : "(any)", port, strerror(errno));
		rdma_destroy_id(id);
		goto out;
	}
	e->listen_port = ntohs(rdma_get_src_port(id));
	e->listen_id = id;
	pc_info("listening on %s port %u", addr ? addr : "(any)", e->listen_port);
out:
	rdma_freeaddrinfo(res);
unlock:
	pthread_mutex_unlock(&e->listen_lock);
	return ret;
}

int pc_listen_stop(struct pc_engine *e)
{
	struct rdma_cm_id *id;

	if (!e)
		return set_error(-EINVAL, "pc_listen_stop: no engine");

	pthread_mutex_lock(&e->listen_lock);
	id = e->listen_id;
	e->listen_id = NULL;
	pthread_mutex_unlock(&e->listen_lock);
	if (!id)
		return set_error(-EINVAL, "pc_listen_stop: not listening");
	/* outside the lock: it waits for the control thread to ack the listener's events */
	rdma_destroy_id(id);
	pc_info("no longer listening on port %u", e->listen_port);
	return 0;
}

uint16_t pc_listen_port(struct pc_engine *e)
{
	uint16_t port;

	if (!e)
		return 0;

	pthread_mutex_lock(&e->listen_lock);
	port = e->listen_id ? e->listen_port : 0;
	pthread_mutex_unlock(&e->listen_lock);
	return port;
}

struct pc_conn *pc_connect(struct pc_engine *e, const char *addr, uint16_t port, int worker,
			   int timeout_ms, void *user)
{
	struct connect_req req = { 0 };
	struct rdma_addrinfo *res;
	struct conn *c;
	int ret;

	if (!e || !addr) {
		set_error(-EINVAL, "pc_connect: no engine or no address");
		errno = EINVAL;
		return NULL;
	}
	ret = resolve(addr, port, false, &res);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	c = conn_alloc();
	if (!c) {
		rdma_freeaddrinfo(res);
		return NULL;
	}
	/* the caller's reference, returned with the handle */
	conn_hold(c);
	c->e = e;
	c->user = user;
	c->want_worker = worker;
	c->creq = &req;
	c->res = res;
	c->connect_timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
	c->connect_deadline_ns = now_ns() + (uint64_t)c->connect_timeout_ms * 1000000;
	sem_init(&req.done, 0, 0);
	/*
	 * The control thread creates the id, resolves, connects and enforces
	 * the deadline; it (or the worker, on UP) always answers through req.
	 * Our reference keeps c whatever happens meanwhile: it may be DOWN,
	 * even retired, by the time we return it.
	 */
	ctl_post(&e->inbox, c, CTL_CONNECT);
	while (sem_wait(&req.done) && errno == EINTR)
		;
	sem_destroy(&req.done);
	if (req.err) {
		conn_drop(c);
		set_error(req.err, "connect to %s port %u: %s", addr, port, req.why);
		errno = -req.err;
		return NULL;
	}
	return (struct pc_conn *)c;
}
