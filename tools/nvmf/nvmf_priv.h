/* SPDX-License-Identifier: MIT */
/*
 * tools/nvmf/nvmf_priv.h - the protocol core's own structures, shared by
 * nvmf_ctrl.c (target, controllers, Fabrics), nvmf_queue.c (capsules, SGLs,
 * completions), nvmf_admin.c and nvmf_io.c. Not for the transport glue.
 *
 * Locking: t->lock guards every field marked [L]. Fields marked [W] belong
 * to the worker of the queue (the admin queue's, for a controller's [W]).
 * [A] fields are atomics any thread may read.
 */
#ifndef NVMF_PRIV_H
#define NVMF_PRIV_H

#include <pthread.h>
#include <stdatomic.h>

#include "nvmf_ctrl.h"

#define NVMF_CAP_TO	    15	/* CAP.TO: 7.5 s to ready */
#define NVMF_KAS	    10	/* KAS: 100 ms units, 1 s */
#define NVMF_KAS_MS	    (NVMF_KAS * 100u)
#define NVMF_VS		    NVME_VS(1, 3, 0)
#define NVMF_ABORT_LIMIT    3	/* ACL, 0's based */
#define NVMF_EVENTS_MAX	    8	/* events waiting for an AER, per controller */
#define NVMF_ANA_GRPID	    1	/* the one ANA group: every namespace, Optimized */
#define NVMF_ANATT	    10	/* ANATT, seconds (no transition ever happens) */

struct nvmf_ns {
	uint32_t nsid;
	uint8_t lbads; /* log2(block size) */
	uint64_t nblocks;
	void *backend;
	uint8_t nguid[16];
	_Atomic bool wp; /* [A] write protected (written with t->lock held) */
};

struct nvmf_subsys {
	bool discovery;
	char nqn[NVMF_NQN_FIELD];
	uint32_t nr_ns;
	struct nvmf_ns *ns;
};

enum nvmf_ctrl_state { NVMF_CTRL_LIVE = 1, NVMF_CTRL_DEAD = 2 };

struct nvmf_err {
	struct nvme_err_entry e[NVMF_ERR_LOG_LEN]; /* ring, newest at (head - 1) */
	uint32_t head;
	uint64_t count; /* errors ever logged */
};

struct nvmf_ctrl {
	struct nvmf_tgt *tgt;
	struct nvmf_subsys *subsys;
	uint16_t cntlid;
	uint8_t hostid[16];
	char hostnqn[NVMF_NQN_FIELD];
	_Atomic int state;     /* [A] enum nvmf_ctrl_state */
	_Atomic uint32_t csts; /* [A] written by the admin worker */
	uint32_t cc;	       /* [W] */
	_Atomic uint64_t ka_count; /* [A] Keep Alives (and the Connect) received */

	int refs;		   /* [L] attached queues */
	struct nvmf_queue *admin;  /* [L] */
	struct nvmf_queue **ioq;   /* [L] by qid, max_io_queues + 1 */
	uint16_t nr_ioq;	   /* [L] I/O queues attached */
	uint16_t nr_io_granted;	   /* [L] Number of Queues: I/O queues allowed */
	uint32_t kato_ms;	   /* [L] 0: no keep-alive */
	uint32_t aec;		   /* [L] Asynchronous Event Configuration */
	uint64_t ka_seen;	   /* [L] ka_count at the last check */
	uint64_t ka_deadline;	   /* [L] 0: not armed yet */
	bool ka_reported;	   /* [L] */
	uint32_t ev[NVMF_EVENTS_MAX]; /* [L] completion DW0s waiting for an AER */
	uint8_t ev_head, ev_count;    /* [L] */
	uint32_t ev_masked;	      /* [L] log pages whose event awaits a read (bit per LID < 32) */
	bool ev_disc_masked;	      /* [L] the discovery log's (LID 70h) */
	uint32_t changed_ns[NVME_CHANGED_NS_MAX]; /* [L] */
	uint32_t nr_changed;			  /* [L] > NVME_CHANGED_NS_MAX: overflowed */
	struct nvmf_err err;			  /* [L] */
	uint64_t gone_stats[5];			  /* [L] counters of queues that left */
};

/* per-queue counters, written by the worker only, summed for SMART */
enum { NVMF_ST_RD_CMDS, NVMF_ST_WR_CMDS, NVMF_ST_RD_BYTES, NVMF_ST_WR_BYTES, NVMF_ST_MEDIA_ERR,
       NVMF_ST_NR };

struct nvmf_queue {
	struct nvmf_tgt *tgt;
	struct nvmf_ctrl *ctrl; /* [W] set by Connect; [L] to clear */
	uint16_t qid;
	uint16_t sqsize; /* 0's based */
	uint16_t sqhd;	 /* [W] */
	bool sqflow_off; /* [W] */
	bool connecting; /* [W] a Connect is fetching its data */
	uint32_t inflight; /* [W] */
	_Atomic uint64_t stats[NVMF_ST_NR]; /* [W] written, [A] read */
	struct nvmf_req *aer[NVMF_AER_MAX]; /* [W] held AERs */
	uint8_t nr_aer;			    /* [W] */
	_Atomic bool ev_pending;	    /* [A] an event waits in ctrl->ev */
	uint8_t *scratch;		    /* [W] admin queues: a log page is built here */
	uint32_t scratch_len;
};

struct nvmf_tgt {
	pthread_mutex_t lock;
	struct nvmf_tgt_config cfg; /* strings below */
	struct nvmf_subsys disc;
	struct nvmf_subsys nvm;
	char serial[21], model[41], firmware[9];
	char traddr[NVMF_TRADDR_FIELD], trsvcid[NVMF_TRSVCID_FIELD];
	uint32_t icd;	   /* in-capsule data bytes */
	uint8_t mdts_log;  /* Identify MDTS */
	struct nvmf_ctrl **ctrls; /* [L] max_ctrls slots */
	uint16_t next_cntlid;	  /* [L] */
	uint64_t genctr;	  /* [L] discovery log generation */
	int nr_queues;		  /* [L] queues alive, for nvmf_tgt_destroy() */
	atomic_uint dead_gen;	  /* bumped [L] after a controller went DEAD */
};

/* @c is dead from now on; its queues' workers see it at their next look (t->lock held). */
void nvmf_ctrl_kill_locked(struct nvmf_ctrl *c);

/* req->state: where a command is in its cycle */
enum nvmf_req_state {
	NVMF_RS_FREE = 0,
	NVMF_RS_FETCH,	/* waiting for nvmf_req_data() */
	NVMF_RS_FILL,	/* waiting for nvmf_req_fill() */
	NVMF_RS_BACKEND, /* waiting for nvmf_req_complete() */
	NVMF_RS_HELD,	/* an AER */
};

/*
 * Internal calls. All run on the worker of @q; none is called with t->lock
 * held unless its name ends in _locked.
 */

/**
 * nvmf_complete - end a command: fill req->cqe, log a failure in the
 * controller's error log (takes t->lock), free the queue slot.
 * @q: the queue.
 * @req: the command.
 * @status: enum nvme_status, with NVME_DNR where it applies.
 * @result: CQE DW0-1.
 *
 * Return: NVMF_ACT_COMPLETE.
 */
enum nvmf_act nvmf_complete(struct nvmf_queue *q, struct nvmf_req *req, uint16_t status,
			    uint64_t result);

/**
 * nvmf_sgl_parse - decode req->sqe.dptr into req->xfer (type, in-capsule bounds).
 * @q: the queue.
 * @req: the command.
 * @capsule_len: bytes received.
 * @close: set if the capsule is malformed (in-capsule data that did not arrive).
 *
 * Return: 0, or the SGL status (with DNR).
 */
uint16_t nvmf_sgl_parse(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
			bool *close);

/**
 * nvmf_sgl_expect - check the decoded SGL against the command's transfer.
 * @req: the command, after nvmf_sgl_parse().
 * @dir: enum nvmf_xfer_dir of the data.
 * @want: bytes the command moves (0: none).
 *
 * Return: 0 (req->xfer.dir set), or Invalid Field / Data SGL Length Invalid.
 */
uint16_t nvmf_sgl_expect(struct nvmf_req *req, uint8_t dir, uint32_t want);

/**
 * nvmf_err_log - add an Error Information entry for @req (takes t->lock).
 * @c: the controller.
 * @q: the queue.
 * @req: the failed command.
 * @status: its status.
 */
void nvmf_err_log(struct nvmf_ctrl *c, const struct nvmf_queue *q, const struct nvmf_req *req,
		  uint16_t status);

/**
 * nvmf_queue_stat_add - add @v to the queue's counter @which (single writer).
 * @q: the queue.
 * @which: NVMF_ST_*.
 * @v: the amount.
 */
void nvmf_queue_stat_add(struct nvmf_queue *q, int which, uint64_t v);

/**
 * nvmf_fabrics - a Fabrics command (Connect, Property Get/Set, the rest).
 * @q: the queue.
 * @req: the command.
 * @capsule_len: bytes received.
 * @close: set for a malformed capsule.
 *
 * Return: the action.
 */
enum nvmf_act nvmf_fabrics(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
			   bool *close);

/**
 * nvmf_connect_data - a Connect's 1024 bytes arrived: bind @q to a new or
 * existing controller (takes t->lock).
 * @q: the queue.
 * @req: the Connect.
 * @data: struct nvmf_connect_data, any alignment.
 * @len: 1024.
 *
 * Return: NVMF_ACT_COMPLETE.
 */
enum nvmf_act nvmf_connect_data(struct nvmf_queue *q, struct nvmf_req *req, const void *data,
				size_t len);

/**
 * nvmf_ns_get - namespace @nsid of @s.
 * @s: the subsystem.
 * @nsid: 1..nr_ns.
 *
 * Return: the namespace, or NULL.
 */
struct nvmf_ns *nvmf_ns_get(struct nvmf_subsys *s, uint32_t nsid);

/**
 * nvmf_kato_round - a KATO rounded up to the KAS granularity (1 s), clamped.
 * @kato: milliseconds, from Connect or Set Features.
 *
 * Return: milliseconds, a multiple of NVMF_KAS_MS.
 */
uint32_t nvmf_kato_round(uint32_t kato);

/**
 * nvmf_post_event_locked - queue an asynchronous event for @c and wake its
 * admin queue's worker. t->lock held.
 * @c: the controller.
 * @dw0: the AER completion's DW0.
 */
void nvmf_post_event_locked(struct nvmf_ctrl *c, uint32_t dw0);

/**
 * nvmf_ns_changed_locked - namespace @nsid's attributes changed: add it to
 * the Changed Namespace List of every live controller of the NVM subsystem
 * and post the notice where the host enabled it. t->lock held.
 * @t: the target.
 * @nsid: a namespace of t->nvm.
 */
void nvmf_ns_changed_locked(struct nvmf_tgt *t, uint32_t nsid);

/**
 * nvmf_ctrl_stats - sum the counters of @c's queues, present and gone.
 * t->lock held.
 * @c: the controller.
 * @sum: NVMF_ST_NR sums.
 */
void nvmf_ctrl_stats(struct nvmf_ctrl *c, uint64_t sum[NVMF_ST_NR]);

/**
 * nvmf_admin - an admin command on an admin queue bound to a controller.
 * @q: the queue.
 * @req: the command.
 * @capsule_len: bytes received.
 * @close: set for a malformed capsule.
 *
 * Return: the action (COMPLETE, FILL or HOLD).
 */
enum nvmf_act nvmf_admin(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
			 bool *close);

/**
 * nvmf_admin_fill - write a FILL's data (Identify, log page) into @buf.
 * @q: the admin queue.
 * @req: the command.
 * @buf: req->xfer.len bytes, 8-byte aligned.
 * @len: req->xfer.len.
 *
 * Return: NVMF_ACT_COMPLETE.
 */
enum nvmf_act nvmf_admin_fill(struct nvmf_queue *q, struct nvmf_req *req, void *buf, size_t len);

/**
 * nvmf_io - an I/O command on an I/O queue bound to a controller.
 * @q: the queue.
 * @req: the command.
 * @capsule_len: bytes received.
 * @close: set for a malformed capsule.
 *
 * Return: the action.
 */
enum nvmf_act nvmf_io(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
		      bool *close);

/**
 * nvmf_io_data - a DSM's ranges arrived: validate them all.
 * @q: the queue.
 * @req: the command.
 * @data: the ranges.
 * @len: their bytes.
 *
 * Return: NVMF_ACT_DISCARD, NVMF_ACT_COMPLETE (LBA Out of Range) or CLOSE.
 */
enum nvmf_act nvmf_io_data(struct nvmf_queue *q, struct nvmf_req *req, const void *data,
			   size_t len);

/**
 * nvmf_io_complete - the backend finished: the status from @err.
 * @q: the queue.
 * @req: the command.
 * @err: 0 or a negative errno (see nvmf_req_complete()).
 *
 * Return: NVMF_ACT_COMPLETE.
 */
enum nvmf_act nvmf_io_complete(struct nvmf_queue *q, struct nvmf_req *req, int err);

static inline bool nvmf_ctrl_ready(const struct nvmf_ctrl *c)
{
	return atomic_load_explicit(&c->csts, memory_order_acquire) & NVME_CSTS_RDY;
}

#endif /* NVMF_PRIV_H */
