/* SPDX-License-Identifier: MIT */
/*
 * The ids of a connection's requests that await a response: pure logic, no
 * verbs calls, unit-tested on the host (tests/test_reqset.c).
 *
 * pc_call() keeps at most a window of requests in flight, so the set holds
 * at most @max ids. It is an open-addressing table of twice that many
 * slots, linear probing, deletion by backward shift (no tombstones). Ids
 * are sequential per connection, so the identity hash spreads them
 * perfectly while they span less than the table; 0 marks an empty slot
 * (request ids start at 1, so a response naming id 0 is unknown). Each id
 * carries a value (the engine: when the request was made) and a pointer
 * (the engine: the call it completes), which move with it.
 *
 * Owner: one worker thread; no concurrency.
 */
#ifndef PC_REQSET_H
#define PC_REQSET_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <pollcore/common.h>

struct reqent {
	uint64_t id;
	uint64_t val;
	void *ptr;	/* the engine: the call's request (pc_call() with a completion), or NULL */
};

struct reqset {
	struct reqent *slot;
	uint32_t mask;
	uint32_t n;
	uint32_t max;
};

/* Room for @max ids; 0 or -ENOMEM. */
static inline int reqset_init(struct reqset *s, uint32_t max)
{
	uint32_t cap = 8;

	while (cap < 2 * (uint64_t)max)
		cap *= 2;
	s->slot = calloc(cap, sizeof(*s->slot));
	if (!s->slot)
		return -ENOMEM;
	s->mask = cap - 1;
	s->n = 0;
	s->max = max;
	return 0;
}

static inline void reqset_free(struct reqset *s)
{
	free(s->slot);
	s->slot = NULL;
}

/* Adds @id with @val and @ptr; false if it is 0, already there, or the set is full. */
static inline bool reqset_add_ptr(struct reqset *s, uint64_t id, uint64_t val, void *ptr)
{
	uint32_t i = (uint32_t)id & s->mask;

	if (!id || s->n >= s->max)
		return false;
	for (; s->slot[i].id; i = (i + 1) & s->mask)
		if (s->slot[i].id == id)
			return false;
	s->slot[i] = (struct reqent){ id, val, ptr };
	s->n++;
	return true;
}

static inline bool reqset_add(struct reqset *s, uint64_t id, uint64_t val)
{
	return reqset_add_ptr(s, id, val, NULL);
}

/* The entry of @id, to read or change its value and pointer in place; NULL if none. */
static inline struct reqent *reqset_find(struct reqset *s, uint64_t id)
{
	uint32_t i = (uint32_t)id & s->mask;

	if (!id)
		return NULL;
	for (; s->slot[i].id; i = (i + 1) & s->mask)
		if (s->slot[i].id == id)
			return &s->slot[i];
	return NULL;
}

/*
 * Removes @id, giving its entry in @out (unless NULL); false if it was not
 * there (a response nobody asked for).
 */
static inline bool reqset_take(struct reqset *s, uint64_t id, struct reqent *out)
{
	uint32_t i = (uint32_t)id & s->mask, j, home;

	if (!id)
		return false;
	for (; s->slot[i].id != id; i = (i + 1) & s->mask)
		if (!s->slot[i].id)
			return false;
	if (out)
		*out = s->slot[i];
	/* shift back every later entry of the run that may move into the hole */
	for (j = i;;) {
		j = (j + 1) & s->mask;
		if (!s->slot[j].id)
			break;
		home = (uint32_t)s->slot[j].id & s->mask;
		/* stays when its home lies cyclically in (i, j] */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		s->slot[i] = s->slot[j];
		i = j;
	}
	s->slot[i] = (struct reqent){ 0, 0, NULL };
	s->n--;
	return true;
}

/* reqset_take(), giving only the value. */
static inline bool reqset_del(struct reqset *s, uint64_t id, uint64_t *val)
{
	struct reqent e;

	if (!reqset_take(s, id, &e))
		return false;
	if (val)
		*val = e.val;
	return true;
}

#endif /* PC_REQSET_H */
