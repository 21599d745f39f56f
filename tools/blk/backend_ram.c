// SPDX-License-Identifier: MIT
/*
 * tools/blk/backend_ram.c - pollcore-blk's RAM disk: one NUMA-local area,
 * placed at start on the workers' node; a command is a memcpy on the
 * worker and completes at once. FLUSH has nothing to do (nothing survives
 * the process: use --file for durability).
 */
#include "blk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct ram {
	uint8_t *mem;
	uint64_t size;
};

static int ram_wq_init(struct blk_backend *b, struct blk_wq *wq)
{
	(void)b;
	(void)wq;
	return 0;
}

static void ram_wq_fini(struct blk_backend *b, struct blk_wq *wq)
{
	(void)b;
	(void)wq;
}

static void ram_submit(struct blk_backend *b, struct blk_wq *wq, struct blk_io *io)
{
	struct ram *r = b->priv;
	uint64_t off = io->cmd.lba * b->bs;

	(void)wq;
	if (io->cmd.opcode == BLK_OP_READ)
		memcpy(io->stage, r->mem + off, io->cmd.len);
	else if (io->cmd.opcode == BLK_OP_WRITE)
		memcpy(r->mem + off, io->stage, io->cmd.len);
	blk_io_stored(io, 0);
}

static void ram_close(struct blk_backend *b)
{
	struct ram *r = b->priv;

	blk_mem_free(r->mem, r->size);
	r->mem = NULL;
}

int blk_ram_open(struct blk_backend *b, uint64_t size, uint32_t bs, int node)
{
	static struct ram r;

	r.size = size;
	r.mem = blk_mem_alloc(size, node);
	if (!r.mem) {
		fprintf(stderr, PROG " server: --ram: cannot allocate %" PRIu64 " bytes%s\n", size,
			node >= 0 ? " on the workers' NUMA node" : "");
		return -ENOMEM;
	}
	b->name = "ram";
	snprintf(b->desc, sizeof(b->desc), "RAM disk of %" PRIu64 " MiB", size >> 20);
	b->size = size;
	b->bs = bs;
	b->wq_init = ram_wq_init;
	b->wq_fini = ram_wq_fini;
	b->submit = ram_submit;
	b->close = ram_close;
	b->priv = &r;
	return 0;
}
