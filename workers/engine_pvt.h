/* SPDX-License-Identifier: MIT */
/*
 * Engine internals shared by engine.c (API, lifecycle) and control.c (the
 * control thread): the top of workers/. The control thread owns the rdma_cm
 * event channel, the listener, the devices' async event queues and the
 * destruction of connections.
 *
 *   field                 | control thread | workers      | app threads
 *   ----------------------+----------------+--------------+------------------
 *   ch                    | events         | -            | create (connect)
 *   listen_id             | listen_lock    | -            | listen_lock
 *   inbox (ctl_inbox)     | dequeue        | enqueue      | enqueue (pc_close, pc_connect)
 *   conns (rculfhash)     | add / del      | lookup (RCU) | lookup (RCU)
 *   live_conns            | inc / dec      | -            | read
 *   connecting            | all            | -            | -
 *   dlife[].state         | all            | -            | -
 *   dlife[].fatal         | set, take      | -            | -  (any engine's control)
 *   workers' stop/release | workers_lock   | -            | workers_lock (destroy)
 */
#ifndef PC_ENGINE_PVT_H
#define PC_ENGINE_PVT_H

#include "thread_pvt.h"

/* A device's life in the engine (devloss.c). */
enum dev_state { DEV_OK = 0, DEV_LOST, DEV_RELEASED };

struct dev_life {
	enum dev_state state;
	const char *what;	/* what said it was lost (static string) */
	atomic_bool fatal;	/* IBV_EVENT_DEVICE_FATAL read by some engine's control thread */
	bool watch;		/* its uverbs device was in sysfs at start: watch it go */
};

struct pc_engine {
	struct pc_engine_params p;
	char **devnames;
	struct pc_device_params *devp;	/* the caller's device parameters, during pc_engine_create() */
	struct pc_dev **devs;
	unsigned int ndevs;
	struct ibv_context **cm_ctxs;	/* rdma_get_devices(); refreshed when a device is released */
	struct dev_life *dlife;		/* per device */
	uint64_t devcheck_ns;
	pthread_mutex_t workers_lock;
	struct pc_worker *workers;
	unsigned int nworkers;
	struct pc_topo *topo;
	struct pc_plan *plan;

	/* control thread */
	pthread_t ctl_thread;
	bool ctl_started;
	int ctl_efd;
	struct rdma_event_channel *ch;
	pthread_mutex_t listen_lock;	/* listen_id: pc_listen(), pc_listen_stop(), a device lost */
	struct rdma_cm_id *listen_id;
	uint16_t listen_port;
	struct ctl_inbox inbox;
	struct cds_lfht *conns;
	atomic_uint live_conns;
	struct conn *connecting;	/* active conns not answered yet (deadlines) */
	atomic_int ctl_stop;
	atomic_int ctl_ready;
	/*
	 * Every worker is set up (pc_engine_create()). The workers write their
	 * own state on their threads, after the control thread started; a CM
	 * event reaches it through the kernel, which orders nothing for it.
	 */
	atomic_bool complete;

	atomic_int *slot_taken;
	uint32_t *slot_seq;	/* a slot's call sequence while no thread holds it (submit.c) */
	atomic_uint call_seq_any;	/* call ids of threads neither attached nor a worker */
	struct stats_seg seg;		/* the stats segment (stats.c); base NULL: none */
	struct pc_engine *next_engine;	/* the process's engines (control.c), under its lock */
	uint64_t serial;		/* unique in the process: an engine at a reused address differs */
	bool listed;
};

/* control.c */
int control_start(struct pc_engine *e);
void control_publish(struct pc_engine *e);
void control_stop(struct pc_engine *e);
void control_close_conn(struct conn *c, int err, const char *why);
/* whether @e, created with @serial, is a live engine of the process (any thread) */
bool control_engine_live(const struct pc_engine *e, uint64_t serial);

/* devloss.c (control thread) */
void engine_dev_lost(struct pc_engine *e, struct ibv_context *ctx, const char *what);
void engine_dev_poll(struct pc_engine *e);
void engine_dev_watch(struct pc_engine *e);
bool engine_dev_usable(const struct pc_engine *e, const struct pc_dev *dev);
const char *engine_dev_gone(const struct pc_engine *e, struct ibv_context *ctx);

#endif /* PC_ENGINE_PVT_H */
