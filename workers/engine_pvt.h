/* SPDX-License-Identifier: MIT */
/*
 * Engine internals shared by engine.c (API, lifecycle) and control.c (the
 * control thread): the top of workers/. The control thread owns the rdma_cm
 * event channel, the listener, the devices' async event queues and the
 * destruction of connections.
 *
 *   field                 | control thread | workers      | app threads
 *   ----------------------+----------------+--------------+------------------
 *   ch, listen_id         | events         | -            | create (listen/connect)
 *   inbox (ctl_inbox)     | dequeue        | enqueue      | enqueue (pc_close, pc_connect)
 *   conns (rculfhash)     | add / del      | lookup (RCU) | lookup (RCU)
 *   live_conns            | inc / dec      | -            | read
 *   connecting            | all            | -            | -
 */
#ifndef PC_ENGINE_PVT_H
#define PC_ENGINE_PVT_H

#include "worker_pvt.h"

struct pc_engine {
	struct pc_engine_params p;
	char **devnames;
	struct pc_dev **devs;
	unsigned int ndevs;
	struct ibv_context **cm_ctxs;	/* rdma_get_devices() */
	struct pc_worker *workers;
	unsigned int nworkers;
	struct pc_topo *topo;
	struct pc_plan *plan;

	/* control thread */
	pthread_t ctl_thread;
	bool ctl_started;
	int ctl_efd;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id;
	uint16_t listen_port;
	struct ctl_inbox inbox;
	struct cds_lfht *conns;
	atomic_uint live_conns;
	struct conn *connecting;	/* active conns not answered yet (deadlines) */
	atomic_int ctl_stop;
	atomic_int ctl_ready;

	atomic_int *slot_taken;
	struct stats_seg seg;		/* the stats segment (stats.c); base NULL: none */
	struct pc_engine *next_engine;	/* the process's engines (control.c), under its lock */
	bool listed;
};

/* control.c */
int control_start(struct pc_engine *e);
void control_publish(struct pc_engine *e);
void control_stop(struct pc_engine *e);

#endif /* PC_ENGINE_PVT_H */
