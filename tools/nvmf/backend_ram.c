// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/backend_ram.c - the RAM disk (store.h): one NUMA-local area,
 * placed at start on the workers' node; an operation is a memcpy (or
 * memset) on the worker and completes at once. FLUSH has nothing to do
 * (nothing survives the process: use a file for durability).
 */
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ram {
	uint8_t *mem;
	uint64_t size;
};

static int ram_wq_init(struct blk_backend *b, struct pc_worker *pw, unsigned int idx, void **wq)
{
	(void)b;
	(void)pw;
	(void)idx;
	*wq = NULL;
	return 0;
}

static void ram_wq_fini(struct blk_backend *b, void *wq)
{
	(void)b;
	(void)wq;
}

/* Worker thread. The caller checked the range against b->size. */
static void ram_submit(struct blk_backend *b, void *wq, struct blk_bio *bio)
{
	struct ram *r = b->priv;

	(void)wq;
	switch (bio->op) {
	case BLK_BIO_READ:
		memcpy(bio->buf, r->mem + bio->off, bio->len);
		break;
	case BLK_BIO_WRITE:
		memcpy(r->mem + bio->off, bio->buf, bio->len);
		break;
	case BLK_BIO_ZEROES:
	case BLK_BIO_DISCARD:
		memset(r->mem + bio->off, 0, bio->len);
		break;
	default: /* FLUSH: RAM is as durable as it gets */
		break;
	}
	bio->done(bio, 0);
}

static void ram_close(struct blk_backend *b)
{
	struct ram *r = b->priv;

	blk_mem_free(r->mem, r->size);
	free(r);
	b->priv = NULL;
}

/* store.h */
int blk_ram_open(struct blk_backend *b, const char *prog, uint64_t size, uint32_t bs, int node)
{
	struct ram *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->size = size;
	r->mem = blk_mem_alloc(size, node);
	if (!r->mem) {
		fprintf(stderr, "%s: --ram: cannot allocate %" PRIu64 " bytes%s\n", prog, size,
			node >= 0 ? " on the workers' NUMA node" : "");
		free(r);
		return -ENOMEM;
	}
	b->name = "ram";
	b->prog = prog;
	snprintf(b->desc, sizeof(b->desc), "RAM disk of %" PRIu64 " MiB", size >> 20);
	b->size = size;
	b->bs = bs;
	b->wq_init = ram_wq_init;
	b->wq_fini = ram_wq_fini;
	b->submit = ram_submit;
	b->close = ram_close;
	b->mem = r->mem;
	b->priv = r;
	return 0;
}
