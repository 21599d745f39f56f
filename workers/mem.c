// SPDX-License-Identifier: MIT
/*
 * Memory the application registers for RDMA: on one connection's device
 * (pc_mem_reg()), or on every device of an engine or a named one
 * (pc_engine_mem_reg()), without a connection. A handle is one
 * registration per device; pc_mem_keys() gives a connection's keys.
 */
#include "engine_pvt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"

/* A registration: one MR per device it covers (worker_pvt.h's struct mem is opaque outside). */
static struct mem *mem_new(uint32_t n, void *addr, size_t len)
{
	struct mem *m = calloc(1, sizeof(*m) + n * sizeof(m->reg[0]));

	if (m) {
		m->addr = addr;
		m->len = len;
	}
	return m;
}

/*
 * Registers [@addr, +@len) on @dev (one of @m's), adding MW_BIND where
 * rendezvous may bind windows on it (@mw), so that pc_msg_wrap() can send
 * from it: local only, the peer reaches it only through a window bound for
 * one message.
 */
static int mem_add(struct mem *m, const struct pc_dev *dev, int access, bool mw)
{
	struct ibv_mr *mr;

	if (mw)
		access |= IBV_ACCESS_MW_BIND;
	mr = ibv_reg_mr(dev->pd, m->addr, m->len, access);
	if (!mr)
		return set_error(pc_neg_errno(-1), "%s: ibv_reg_mr(%zu bytes, access 0x%x): %s",
				 dev->name, m->len, access, strerror(errno));
	m->reg[m->n].pd = dev->pd;
	m->reg[m->n].mr = mr;
	m->n++;
	return 0;
}

void *pc_mem_reg(struct pc_conn *pconn, void *addr, size_t len, int access, uint32_t *lkey,
		 uint32_t *rkey)
{
	struct conn *c = (struct conn *)pconn;
	struct mem *m;
	int ret;

	/* the reference keeps the device's protection domain while we use it */
	if (!conn_ref_app(c)) {
		set_error(-ENOTCONN, "%s qp 0x%x: pc_mem_reg on a closed connection", c->devname,
			  c->qpn);
		errno = ENOTCONN;
		return NULL;
	}
	m = mem_new(1, addr, len);
	ret = m ? mem_add(m, c->w->dev, access, c->w->rv != NULL) : -ENOMEM;
	conn_unref_app(c);
	if (ret) {
		free(m);
		errno = -ret;
		return NULL;
	}
	m->magic = MEM_MAGIC;
	*lkey = m->reg[0].mr->lkey;
	*rkey = m->reg[0].mr->rkey;
	return m;
}

void *pc_engine_mem_reg(struct pc_engine *e, const char *device, void *addr, size_t len,
			int access)
{
	struct mem *m;
	unsigned int d, found = 0;
	int ret = 0;

	if (!e || !addr || !len) {
		set_error(-EINVAL, "pc_engine_mem_reg: an engine, an address and a length are needed");
		errno = EINVAL;
		return NULL;
	}
	m = mem_new(e->ndevs, addr, len);
	if (!m)
		return NULL;
	for (d = 0; d < e->ndevs && !ret; d++) {
		if (device && strcmp(device, e->devnames[d]))
			continue;
		found++;
		if (!engine_dev_usable(e, e->devs[d])) {
			ret = set_error(-ENODEV, "%s: the device was removed", e->devnames[d]);
			break;
		}
		/* the device's first worker says whether it has rendezvous (its workers agree) */
		ret = mem_add(m, e->devs[d], access, e->workers[d * e->p.workers_per_device].rv);
	}
	if (!ret && !found)
		ret = set_error(-ENODEV, "pc_engine_mem_reg: the engine has no device '%s'", device);
	if (ret) {
		m->magic = MEM_MAGIC;
		pc_mem_dereg(m);
		errno = -ret;
		return NULL;
	}
	m->magic = MEM_MAGIC;
	return m;
}

int pc_mem_keys(const void *handle, const struct pc_conn *pconn, uint32_t *lkey, uint32_t *rkey)
{
	const struct conn *c = (const struct conn *)pconn;
	const struct mem *h = handle;
	struct ibv_mr *mr;

	if (!h || h->magic != MEM_MAGIC || !c)
		return set_error(-EINVAL, "pc_mem_keys: not a handle from pc_mem_reg() or "
				 "pc_engine_mem_reg()");
	if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) >= CONN_DRAINING)
		return set_error(-ENOTCONN, "%s qp 0x%x: pc_mem_keys on a closed connection",
				 c->devname, c->qpn);
	mr = mem_mr(h, c->w->dev->pd);
	if (!mr)
		return set_error(-EXDEV, "%s qp 0x%x: the memory is not registered on this "
				 "connection's device", c->devname, c->qpn);
	if (lkey)
		*lkey = mr->lkey;
	if (rkey)
		*rkey = mr->rkey;
	return 0;
}

void pc_mem_dereg(void *handle)
{
	struct mem *m = handle;
	uint32_t i;

	if (!m || m->magic != MEM_MAGIC)
		return;
	for (i = 0; i < m->n; i++)
		ibv_dereg_mr(m->reg[i].mr);
	m->magic = 0;
	free(m);
}
