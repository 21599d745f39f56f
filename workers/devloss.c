// SPDX-License-Identifier: MIT
/*
 * A device that goes away while the engine runs (control thread).
 *
 *   OK --lost--> LOST --its last connection retired--> RELEASED
 *
 * A device is lost when rdma_cm says RDMA_CM_EVENT_DEVICE_REMOVAL for one of
 * the engine's ids on it, when any engine reads IBV_EVENT_DEVICE_FATAL on its
 * context, or when its uverbs device vanished from sysfs (checked once a
 * second: an engine with no rdma_cm id on the device gets no event).
 *
 * LOST: every connection on it closes (-ENODEV, "device removed"), the
 * listener bound to it is dropped, and no new connection is admitted on it.
 * The workers drain as for any close, so each UP gets its DOWN.
 *
 * RELEASED, once none of its connections is left (DOWN delivered and every
 * buffer back from the application): its workers stop and give back their
 * CQ, SRQ, completion channel and MRs, its PD goes, and the engine drops its
 * reference on librdmacm's device list, which then closes the context. Only
 * then can a provider that cannot disassociate (rxe) finish the removal:
 * `rdma link delete` waits until every process has closed the device.
 *
 * The workers' memory (pools, rings, stats) stays until pc_engine_destroy(),
 * for application threads that may still read it. A device that comes back
 * is a new device: this engine does not use it again (a new engine does).
 */
#include "engine_pvt.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "log_pvt.h"

#define DEVCHECK_NS (1000ull * 1000 * 1000)

static bool dev_is(const struct pc_engine *e, unsigned int d, enum dev_state s)
{
	return e->dlife[d].state == s;
}

bool engine_dev_usable(const struct pc_engine *e, const struct pc_dev *dev)
{
	unsigned int d;

	for (d = 0; d < e->ndevs; d++)
		if (e->devs[d] == dev)
			return dev_is(e, d, DEV_OK);
	return false;
}

const char *engine_dev_gone(const struct pc_engine *e, struct ibv_context *ctx)
{
	const char *name = ibv_get_device_name(ctx->device);
	unsigned int d;

	for (d = 0; d < e->ndevs; d++)
		if (!dev_is(e, d, DEV_OK) && strcmp(e->devs[d]->name, name) == 0)
			return e->devs[d]->name;
	return NULL;
}

/* Closes every connection of device @d, the listener on it, the connects going through it. */
static unsigned int close_all_on(struct pc_engine *e, unsigned int d)
{
	struct pc_dev *dev = e->devs[d];
	struct cds_lfht_node *node;
	struct rdma_cm_id *lid;
	struct cds_lfht_iter it;
	struct conn *c, *next;
	unsigned int n = 0;

	/* RCU read side: the control thread is an online qsbr reader */
	for (cds_lfht_first(e->conns, &it); (node = cds_lfht_iter_get_node(&it));
	     cds_lfht_next(e->conns, &it)) {
		c = conn_of_node(node);
		if (c->w && c->w->dev == dev) {
			control_close_conn(c, -ENODEV, "device removed");
			n++;
		}
	}
	for (c = e->connecting; c; c = next) {
		next = c->connecting_next;
		if (!c->attached && c->id && c->id->verbs == dev->ctx) {
			set_error(-ENODEV, "%s: device removed while connecting", dev->name);
			control_close_conn(c, -ENODEV, "device removed");
		}
	}
	pthread_mutex_lock(&e->listen_lock);
	lid = e->listen_id && e->listen_id->verbs == dev->ctx ? e->listen_id : NULL;
	if (lid)
		e->listen_id = NULL;
	pthread_mutex_unlock(&e->listen_lock);
	if (lid) {
		pc_warn("%s: the listener was bound to it; no longer listening", dev->name);
		rdma_destroy_id(lid);
	}
	return n;
}

void engine_dev_lost(struct pc_engine *e, struct ibv_context *ctx, const char *what)
{
	unsigned int d;

	for (d = 0; d < e->ndevs; d++) {
		if (!ctx || e->devs[d]->ctx != ctx || !dev_is(e, d, DEV_OK))
			continue;
		e->dlife[d].state = DEV_LOST;
		e->dlife[d].what = what;
		pc_err("%s port %u: device lost (%s); closing its %u connections, then releasing it",
		       e->devs[d]->name, e->devs[d]->port, what, close_all_on(e, d));
	}
}

/* Connections of device @d still in the table or connecting. */
static unsigned int conns_on(struct pc_engine *e, unsigned int d)
{
	struct pc_dev *dev = e->devs[d];
	struct cds_lfht_node *node;
	struct cds_lfht_iter it;
	unsigned int n = 0;
	struct conn *c;

	for (cds_lfht_first(e->conns, &it); (node = cds_lfht_iter_get_node(&it));
	     cds_lfht_next(e->conns, &it))
		n += conn_of_node(node)->w->dev == dev;
	for (c = e->connecting; c; c = c->connecting_next)
		n += c->id && c->id->verbs == dev->ctx;
	return n;
}

/* Everything the engine holds on device @d goes, so that its context can close. */
static void release(struct pc_engine *e, unsigned int d)
{
	struct pc_dev *dev = e->devs[d];
	struct ibv_context **list;
	unsigned int i;
	int n = 0;

	pthread_mutex_lock(&e->workers_lock);
	for (i = 0; i < e->nworkers; i++) {
		struct pc_worker *w = &e->workers[i];

		if (w->dev != dev || w->released)
			continue;
		worker_release_device(w);
		w->released = true;
	}
	pthread_mutex_unlock(&e->workers_lock);
	if (dev->pd && !ibv_dealloc_pd(dev->pd))
		dev->pd = NULL;
	/*
	 * librdmacm closes a removed device's context once nobody holds it:
	 * a fresh list no longer has it (and marks it dead), and the old one
	 * gives its reference back.
	 */
	list = rdma_get_devices(&n);
	if (list) {
		rdma_free_devices(e->cm_ctxs);
		e->cm_ctxs = list;
	}
	e->dlife[d].state = DEV_RELEASED;
	pc_warn("%s port %u: released (%s): its workers stopped and its verbs objects are "
		"destroyed; this engine does not use it again%s", dev->name, dev->port,
		e->dlife[d].what, dev->pd ? " (its PD could not be freed)" : "");
}

/* Whether device @d's uverbs device is still the one we opened. */
static bool still_there(const struct pc_dev *dev)
{
	char path[IBV_SYSFS_PATH_MAX + 8], name[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/ibdev", dev->ctx->device->dev_path);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(name, sizeof(name), f))
		name[0] = 0;
	fclose(f);
	name[strcspn(name, "\n")] = 0;
	return strcmp(name, dev->name) == 0;
}

void engine_dev_poll(struct pc_engine *e)
{
	uint64_t now = now_ns();
	unsigned int d;
	bool check = now - e->devcheck_ns >= DEVCHECK_NS;

	if (check)
		e->devcheck_ns = now;
	for (d = 0; d < e->ndevs; d++) {
		struct dev_life *l = &e->dlife[d];

		if (l->state == DEV_OK && atomic_load(&l->fatal))
			engine_dev_lost(e, e->devs[d]->ctx, "IBV_EVENT_DEVICE_FATAL");
		else if (l->state == DEV_OK && check && l->watch && !still_there(e->devs[d]))
			engine_dev_lost(e, e->devs[d]->ctx, "its uverbs device is gone");
		if (l->state == DEV_LOST && !conns_on(e, d))
			release(e, d);
	}
}

void engine_dev_watch(struct pc_engine *e)
{
	unsigned int d;

	for (d = 0; d < e->ndevs; d++)
		e->dlife[d].watch = still_there(e->devs[d]);
}
