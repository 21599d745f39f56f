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
 * A remover that is itself a worker waits too (the application may free
 * arg once it returns, whoever called), but two workers whose pollers
 * remove each other's pollers at the same moment would each wait for the
 * other's count to turn even, for ever (three or more can form the same
 * ring). So a worker that is about to wait says so in a small table (who
 * waits for whom), and while it waits it follows the chain from the worker
 * it waits for: when the chain comes back to itself, the workers of the
 * ring wait for each other, and the one of them at the highest address
 * gives its removal up (-EDEADLK; the poller stays) and returns, which
 * lets the others' waits end. Every waiter of the ring keeps following the
 * chain, so the one that must give up sees the ring even if it joined it
 * first. Only workers whose count is odd (inside their pollers) are waited
 * for, so a ring is made only of removals from inside pollers.
 */
#include "thread_pvt.h"

#include <errno.h>
#include <sched.h>

#include "log_pvt.h"

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

		if (pc_unlikely(st != POLLER_ACTIVE))
			continue;
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

static_assert(sizeof(struct wr_ctx) <= sizeof(((struct pc_work *)0)->priv),
	      "a submission context fits pc_work.priv");

int pc_worker_post(struct pc_worker *w, struct pc_work *work)
{
	struct wr_ctx *ctx = (struct wr_ctx *)(void *)work->priv;

	if (pc_unlikely(!work->fn))
		return set_error(-EINVAL, "pc_worker_post: work without a function");
	/* a stopped worker (its engine destroyed, its device gone) would never run it */
	if (pc_unlikely(atomic_load_explicit(&w->stop, memory_order_relaxed)))
		return set_error(-ESHUTDOWN, "pc_worker_post: %s has stopped", w->name);
	*ctx = (struct wr_ctx){ .action = ACT_WORK };
	/* release (the queue's push): the caller's writes to its context reach fn */
	mpscq_push(&w->submit, &ctx->qnode);
	worker_wake(w);
	return 0;
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

/*
 * Who waits for whom: a worker that waits in pc_worker_remove_poller() for
 * another worker's calls to end. Entries are claimed by the waiter (CAS on
 * waiter), written and cleared by it only; read by any waiting worker.
 * seq_cst throughout: of two workers that both enter a ring, the one whose
 * entry is written last sees the other's.
 */
#define WAITS_MAX 256
static struct {
	_Atomic(struct pc_worker *) waiter;
	_Atomic(struct pc_worker *) target;
} waits[WAITS_MAX];

static struct pc_worker *waits_target(const struct pc_worker *w)
{
	unsigned int i;

	for (i = 0; i < WAITS_MAX; i++)
		if (atomic_load(&waits[i].waiter) == w)
			return atomic_load(&waits[i].target);
	return NULL;
}

/* True when @self must give up: the chain from @t comes back to it, and it is the ring's highest. */
static bool waits_must_yield(struct pc_worker *self, struct pc_worker *t)
{
	uintptr_t top = (uintptr_t)self;
	unsigned int k;

	for (k = 0; t && k < WAITS_MAX; k++) {
		if (t == self)
			return top == (uintptr_t)self;
		if ((uintptr_t)t > top)
			top = (uintptr_t)t;
		t = waits_target(t);
	}
	return false;	/* no ring, or a ring that self waits on but is not part of */
}

/*
 * On a worker thread (@self), removing a poller of another worker @w whose
 * count was @seq (odd): waits until it changes, or returns -EDEADLK when
 * @self must give up to break a ring of waiting workers.
 */
static int wait_worker(struct pc_worker *self, struct pc_worker *w, uint32_t seq)
{
	struct pc_worker *none;
	unsigned int i;
	int ret = 0;

	for (i = 0;; i = (i + 1) % WAITS_MAX) {
		none = NULL;
		if (atomic_compare_exchange_strong(&waits[i].waiter, &none, self))
			break;
		if (i == WAITS_MAX - 1)
			sched_yield();	/* WAITS_MAX workers waiting at once: one is done soon */
	}
	atomic_store(&waits[i].target, w);
	/* acquire: pairs with the release that ends the worker's calls */
	while (atomic_load_explicit(&w->poller_seq, memory_order_acquire) == seq) {
		if (waits_must_yield(self, w)) {
			ret = -EDEADLK;
			break;
		}
		sched_yield();
	}
	atomic_store(&waits[i].target, NULL);
	atomic_store(&waits[i].waiter, NULL);
	return ret;
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
	if (self_worker != w) {
		seq = atomic_load(&w->poller_seq);
		if (!(seq & 1)) {
			/* not inside its calls: the next round sees REMOVING */
		} else if (self_worker) {
			/* another worker: wait too, unless that closes a ring of waiters */
			if (wait_worker(self_worker, w, seq)) {
				/* the owner is inside a call and has not looked at the slot since */
				atomic_store(&p->state, POLLER_ACTIVE);
				return set_errorl(PC_LOG_DEBUG, -EDEADLK, "%s: poller not removed: "
						     "its worker waits, inside a poller, for this "
						     "one's calls to end", w->name);
			}
		} else {
			/* acquire: pairs with the release that ends the worker's calls */
			while (atomic_load_explicit(&w->poller_seq, memory_order_acquire) == seq)
				sched_yield();
		}
	}
	/* release: an adder reusing the slot writes after we are done with it */
	atomic_store_explicit(&p->state, POLLER_FREE, memory_order_release);
	return 0;
}
