// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/store.c - NUMA-placed memory and the per-worker staging pool
 * (store.h) of pollcore-nvmf.
 *
 * The pool is a stack of free buffer indexes and a FIFO of waiters: a
 * command that finds no buffer waits and is handed one, in arrival order,
 * when one comes back (backpressure, never a drop). It is registered on
 * the device at its first connection and deregistered when its last one
 * is DOWN, so that the registration never outlives the engine's use of
 * the device.
 */
#include "store.h"

#include <pollcore/numa.h>

#include <errno.h>
#include <stdio.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

static struct pc_topo *mem_topo; /* NULL: first touch */

/* store.h */
void blk_mem_topo(struct pc_topo *topo)
{
	mem_topo = topo;
}

/* store.h */
void *blk_mem_alloc(size_t len, int node)
{
	void *p;

	if (mem_topo)
		return pc_numa_alloc(mem_topo, len, node);
	if (posix_memalign(&p, 4096, len))
		return NULL;
	memset(p, 0, len); /* touched now: placed by first touch, not on the I/O path */
	return p;
}

/* store.h */
void blk_mem_free(void *p, size_t len)
{
	if (!p)
		return;
	if (mem_topo)
		pc_numa_free(mem_topo, p, len);
	else
		free(p);
}

/* store.h */
int blk_stage_init(struct blk_stage *s, uint32_t n, uint32_t buf_size, int node)
{
	uint32_t k;

	s->n = n;
	s->buf_size = buf_size;
	s->len = (size_t)n * buf_size;
	s->free = calloc(n, sizeof(*s->free));
	s->mem = blk_mem_alloc(s->len, node);
	if (!s->free || !s->mem)
		return -ENOMEM;
	for (k = 0; k < n; k++)
		s->free[k] = n - 1 - k;
	s->nfree = n;
	s->reg = (struct blk_mreg){.mem = s->mem, .len = s->len, .access = IBV_ACCESS_LOCAL_WRITE};
	return 0;
}

/* store.h */
void blk_stage_fini(struct blk_stage *s)
{
	blk_mem_free(s->mem, s->len);
	free(s->free);
	s->mem = NULL;
	s->free = NULL;
}

/* store.h */
int blk_mreg_attach(struct blk_mreg *r, struct pc_conn *conn)
{
	uint32_t rkey;

	if (!r->mr) {
		r->mr = pc_mem_reg(conn, r->mem, r->len, r->access, &r->lkey, &rkey);
		if (!r->mr)
			return -errno;
	}
	r->users++;
	return 0;
}

/* store.h */
void blk_mreg_detach(struct blk_mreg *r)
{
	if (!--r->users && r->mr) {
		pc_mem_dereg(r->mr);
		r->mr = NULL;
	}
}

/* store.h */
int blk_stage_attach(struct blk_stage *s, struct pc_conn *conn)
{
	return blk_mreg_attach(&s->reg, conn);
}

/* store.h */
void blk_stage_detach(struct blk_stage *s)
{
	blk_mreg_detach(&s->reg);
}

/* store.h */
bool blk_stage_get(struct blk_stage *s, struct blk_stage_waiter *w, uint8_t **buf, uint32_t *idx)
{
	if (pc_likely(s->nfree && !s->wait_head)) {
		*idx = s->free[--s->nfree];
		*buf = s->mem + (size_t)*idx * s->buf_size;
		return true;
	}
	s->waits++;
	w->next = NULL;
	if (s->wait_tail)
		s->wait_tail->next = w;
	else
		s->wait_head = w;
	s->wait_tail = w;
	if (++s->nwaiting > s->max_waiting)
		s->max_waiting = s->nwaiting;
	return false;
}

/* store.h; not reentrant: a put from a ready() lets the loop below go on */
void blk_stage_put(struct blk_stage *s, uint32_t idx)
{
	struct blk_stage_waiter *w;
	uint32_t k;

	s->free[s->nfree++] = idx;
	if (s->running)
		return;
	s->running = true;
	while (s->wait_head && s->nfree) {
		w = s->wait_head;
		s->wait_head = w->next;
		if (!s->wait_head)
			s->wait_tail = NULL;
		s->nwaiting--;
		w->next = NULL;
		k = s->free[--s->nfree];
		w->ready(w, s->mem + (size_t)k * s->buf_size, k);
	}
	s->running = false;
}

#if !BLK_HAVE_URING
/* store.h: built without liburing */
int blk_uring_open(struct blk_backend *b, const char *prog, const char *path, uint32_t bs)
{
	(void)b;
	(void)bs;
	fprintf(stderr, "%s: --file %s: built without liburing (meson -Dliburing, "
			"Debian liburing-dev): only --ram is available\n", prog, path);
	return -ENOTSUP;
}
#endif
