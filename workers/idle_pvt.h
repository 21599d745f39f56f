/* SPDX-License-Identifier: MIT */
/*
 * Layer "worker" (docs/architecture.md): how long a hybrid worker spins
 * before it sleeps, adapted to what its sleeps show. Pure arithmetic on
 * ticks, no verbs: tests/test_idle_spin.c runs it on the host.
 */
#ifndef PC_IDLE_PVT_H
#define PC_IDLE_PVT_H

#include <stdbool.h>
#include <stdint.h>

/* The adaptive spin's ceiling: 20 times idle_spin_us, at most 1 ms, never below idle_spin_us. */
#define IDLE_SPIN_CAP_MULT 20u
#define IDLE_SPIN_CAP_US 1000u

/* The ceiling for a base spin of @base ticks, @one_ms being 1 ms in ticks. */
static inline uint64_t idle_spin_cap(uint64_t base, uint64_t one_ms)
{
	uint64_t cap = base * IDLE_SPIN_CAP_MULT;

	if (cap > one_ms)
		cap = one_ms;
	return cap > base ? cap : base;
}

/*
 * The spin before the next sleep, from how the last sleep ended. @spin: the
 * spin before it; @gap: the time from the first empty turn to the wake-up
 * (the spin and the sleep); @woken: an event ended the sleep (a completion,
 * a submission, a poller's fd), not its timeout. Woken within @cap: spin a
 * quarter longer than that gap next time, so that a gap like it ends while
 * the worker still spins, but at most twice as long as @spin (the spin
 * grows only while sleeps keep ending soon, not on one gap); a timeout, or
 * a gap past @cap (real idleness): back to @base.
 */
static inline uint64_t idle_spin_next(uint64_t spin, uint64_t base, uint64_t cap, uint64_t gap,
				      bool woken)
{
	uint64_t s;

	if (!woken || gap > cap)
		return base;
	s = gap + gap / 4;
	if (s > 2 * spin)
		s = 2 * spin;
	return s < base ? base : s > cap ? cap : s;
}

#endif /* PC_IDLE_PVT_H */
