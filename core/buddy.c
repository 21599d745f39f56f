// SPDX-License-Identifier: MIT
/* A buddy allocator over offsets; see buddy.h. */
#include "buddy.h"

#include <errno.h>
#include <stdlib.h>

#define NONE UINT32_MAX
#define TAG_FREE 0x40u
#define TAG_USED 0x80u
#define TAG_ORDER 0x3fu

static void list_push(struct buddy *b, uint32_t i, uint32_t order)
{
	b->next[i] = b->head[order];
	b->prev[i] = NONE;
	if (b->head[order] != NONE)
		b->prev[b->head[order]] = i;
	b->head[order] = i;
	b->tag[i] = (uint8_t)(TAG_FREE | order);
}

static void list_del(struct buddy *b, uint32_t i, uint32_t order)
{
	if (b->prev[i] != NONE)
		b->next[b->prev[i]] = b->next[i];
	else
		b->head[order] = b->next[i];
	if (b->next[i] != NONE)
		b->prev[b->next[i]] = b->prev[i];
	b->tag[i] = 0;
}

int buddy_init(struct buddy *b, uint64_t size, uint32_t min_shift)
{
	uint64_t n = min_shift < 64 ? size >> min_shift : 0;
	uint32_t i, o;

	*b = (struct buddy){ 0 };
	if (!n || n > (1ull << BUDDY_MAX_ORDER))
		return -EINVAL;
	b->nblocks = (uint32_t)n;
	b->min_shift = min_shift;
	b->next = calloc(n, sizeof(*b->next));
	b->prev = calloc(n, sizeof(*b->prev));
	b->tag = calloc(n, sizeof(*b->tag));
	if (!b->next || !b->prev || !b->tag) {
		buddy_fini(b);
		return -ENOMEM;
	}
	for (o = 0; o <= BUDDY_MAX_ORDER; o++)
		b->head[o] = NONE;
	/* the largest aligned blocks that fit, from the start */
	for (i = 0; i < b->nblocks;) {
		o = 0;
		while (o < BUDDY_MAX_ORDER && !(i & (1u << o)) && i + (2u << o) <= b->nblocks)
			o++;
		list_push(b, i, o);
		if (o > b->max_order)
			b->max_order = o;
		i += 1u << o;
	}
	return 0;
}

void buddy_fini(struct buddy *b)
{
	free(b->next);
	free(b->prev);
	free(b->tag);
	b->next = b->prev = NULL;
	b->tag = NULL;
}

int buddy_order(const struct buddy *b, uint64_t len)
{
	uint64_t blocks = (len + (1ull << b->min_shift) - 1) >> b->min_shift;
	uint32_t o = 0;

	if (!len)
		blocks = 1;
	while ((1ull << o) < blocks)
		o++;
	if (o > b->max_order)
		return -EMSGSIZE;
	return (int)o;
}

int64_t buddy_alloc(struct buddy *b, uint64_t len, uint64_t *off)
{
	int want = buddy_order(b, len);
	uint32_t o, i;

	if (want < 0)
		return want;
	for (o = (uint32_t)want; o <= b->max_order && b->head[o] == NONE; o++)
		;
	if (o > b->max_order)
		return -ENOBUFS;
	i = b->head[o];
	list_del(b, i, o);
	/* split: the upper halves go back free, the lower one is kept */
	while (o > (uint32_t)want) {
		o--;
		list_push(b, i + (1u << o), o);
	}
	b->tag[i] = (uint8_t)(TAG_USED | o);
	b->used += 1u << o;
	*off = (uint64_t)i << b->min_shift;
	return (int64_t)((1ull << o) << b->min_shift);
}

int64_t buddy_free(struct buddy *b, uint64_t off)
{
	uint64_t idx = off >> b->min_shift;
	uint32_t i, o, bud;
	int64_t size;

	if ((idx << b->min_shift) != off || idx >= b->nblocks || !(b->tag[idx] & TAG_USED))
		return -EINVAL;
	i = (uint32_t)idx;
	o = b->tag[i] & TAG_ORDER;
	size = (int64_t)((1ull << o) << b->min_shift);
	b->used -= 1u << o;
	b->tag[i] = 0;
	while (o < b->max_order) {
		bud = i ^ (1u << o);
		if (bud >= b->nblocks || b->tag[bud] != (TAG_FREE | o))
			break;
		list_del(b, bud, o);
		i &= ~(1u << o);
		o++;
	}
	list_push(b, i, o);
	return size;
}
