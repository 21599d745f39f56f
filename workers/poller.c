// SPDX-License-Identifier: MIT
/*
 * Pollers (pollcore/poller.h): the application's functions a worker calls
 * every loop turn.
 *
 * A worker has a fixed array of slots. A slot goes FREE -> CLAIMED (the
 * adder fills it) -> ACTIVE (the worker calls it) -> REMOVING -> FREE.
 * Adders and removers are any threads; only the worker calls. Removal from
 * another thread waits out a call in progress with a sequence count the
 * worker makes odd around its calls (and around reading the fds before it
 * sleeps): no lock, and on the worker's side two atomic increments per
 * turn, and per sleep, only while it has pollers.
 *
 * A remover that is itself a worker must not wait: two workers removing
 * each other's pollers from their pollers would each wait for the other's
 * count to turn even, for ever. It marks the slot DETACHED instead, and the
 * owner, the only thread that calls or reads the slot, frees it when it
 * next walks its slots, after any call in progress has returned.
 */
#include <errno.h>
#include <sched.h>

#include "worker_pvt.h"

unsigned int worker_run_pollers(struct pc_worker *w, unsigned int hi)
{
	unsigned int i, work = 0;

	/*
	 * seq_cst, with the state loads below: a Dekker pair with the state
	 * exchange and seq load in pc_worker_remove_poller(). Either the
	 * remover sees this odd count and waits, or these loads see REMOVING.
	 */
	atomic_fetch_add(&w->poller_seq, 1);
	for (i = 0; i < hi; i++) {
		struct pc_poller *p = &w->pollers[i];
		int ret;

		uint32_t st = atomic_load(&p->state);

		if (pc_unlikely(st != POLLER_ACTIVE)) {
			/* release: the adder that takes the slot writes after our last use */
			if (st == POLLER_DETACHED)
				atomic_store_explicit(&p->state, POLLER_FREE, memory_order_release);
			continue;
		}
		ret = p->fn(p->arg);
		if (pc_likely(ret >= 0))
			work += (unsigned int)ret;
		else
			STAT_ADD(w->st.poller_errors, 1);
	}
	/* release: the calls above happen before a waiting remover returns */
	atomic_fetch_add_explicit(&w->poller_seq, 1, memory_order_release);
	STAT_ADD(w->st.poller_work, work);
	return work;
}

unsigned int worker_poller_fds(struct pc_worker *w, struct pollfd *pfd, unsigned int max)
{
	unsigned int i, n = 0, hi = atomic_load_explicit(&w->pollers_hi, memory_order_acquire);

	if (!hi)
		return 0;
	/*
	 * Reading fd is a use of the slot like a call: inside the odd count, so
	 * that a remover on another thread waits it out before the slot can be
	 * freed and an adder can write a new fd into it. Outside it, a poller
	 * removed while its worker sleeps and its slot taken again was a data
	 * race with the read before the sleep (ThreadSanitizer, test_pollers).
	 * seq_cst, with the state loads below: the same Dekker pair.
	 */
	atomic_fetch_add(&w->poller_seq, 1);
	for (i = 0; i < hi && n < max; i++) {
		struct pc_poller *p = &w->pollers[i];

		/* also acquire: fd was written before the slot became ACTIVE */
		if (atomic_load(&p->state) == POLLER_ACTIVE && p->fd >= 0)
			pfd[n++] = (struct pollfd){ .fd = p->fd, .events = POLLIN };
	}
	/* release: the reads above happen before a waiting remover returns */
	atomic_fetch_add_explicit(&w->poller_seq, 1, memory_order_release);
	return n;
}

struct pc_worker *pc_conn_worker(const struct pc_conn *conn)
{
	return ((const struct conn *)conn)->w;
}

struct pc_worker *pc_worker_self(void)
{
	return self_worker;
}

unsigned int pc_worker_index(const struct pc_worker *w)
{
	return w->idx;
}

struct pc_poller *pc_worker_add_poller_fd(struct pc_worker *w, pc_poller_fn fn, void *arg, int fd)
{
	unsigned int i, hi;

	if (!w || !fn || fd < -1) {
		errno = EINVAL;
		return NULL;
	}
	/* a released worker was stopped first (worker_release_device()) */
	if (atomic_load(&w->stop)) {
		errno = ESHUTDOWN;
		return NULL;
	}
	for (i = 0; i < PC_WORKER_MAX_POLLERS; i++) {
		struct pc_poller *p = &w->pollers[i];
		uint32_t free_ = POLLER_FREE;

		if (!atomic_compare_exchange_strong(&p->state, &free_, POLLER_CLAIMED))
			continue;
		p->fn = fn;
		p->arg = arg;
		p->fd = fd;
		p->w = w;
		hi = atomic_load(&w->pollers_hi);
		while (hi < i + 1 && !atomic_compare_exchange_weak(&w->pollers_hi, &hi, i + 1))
			;
		/* release: the worker sees fn, arg and fd once it sees ACTIVE */
		atomic_store_explicit(&p->state, POLLER_ACTIVE, memory_order_release);
		/* a sleeping worker rebuilds its poll set and makes its first call */
		worker_wake(w);
		return p;
	}
	errno = ENOSPC;
	return NULL;
}

struct pc_poller *pc_worker_add_poller(struct pc_worker *w, pc_poller_fn fn, void *arg)
{
	return pc_worker_add_poller_fd(w, fn, arg, -1);
}

int pc_worker_remove_poller(struct pc_poller *p)
{
	uint32_t active = POLLER_ACTIVE;
	struct pc_worker *w;
	uint32_t seq;

	if (!p)
		return -EINVAL;
	/* seq_cst: the other half of the Dekker pair in worker_run_pollers() */
	if (!atomic_compare_exchange_strong(&p->state, &active, POLLER_REMOVING))
		return -EINVAL;
	w = p->w;
	if (self_worker && self_worker != w) {
		/* another worker: never wait (see the top); the owner frees the slot */
		atomic_store_explicit(&p->state, POLLER_DETACHED, memory_order_relaxed);
		worker_wake(w);
		return 0;
	}
	if (self_worker != w) {
		seq = atomic_load(&w->poller_seq);
		/* acquire: pairs with the release that ends the worker's calls */
		while ((seq & 1) && atomic_load_explicit(&w->poller_seq, memory_order_acquire) == seq)
			sched_yield();
	}
	/* release: an adder reusing the slot writes after we are done with it */
	atomic_store_explicit(&p->state, POLLER_FREE, memory_order_release);
	return 0;
}
