/* SPDX-License-Identifier: MIT */
/*
 * tools/nvmf/nvmf_ctrl.h - pollcore-nvmf's protocol core: an NVMe-oF
 * target's controllers, as pure logic. It touches no network, no device and
 * no clock; the transport glue feeds it capsules and carries out what it
 * answers.
 *
 * Objects
 *   struct nvmf_tgt    one target: the discovery subsystem, one NVM
 *                      subsystem with its namespaces, one port address.
 *   struct nvmf_queue  one host queue (one rdma_cm connection). Created when
 *                      the connection is accepted, bound to a controller by
 *                      the Fabrics Connect it must send first.
 *   struct nvmf_req    one command in flight, owned by the caller (an array
 *                      per queue, hsqsize + 1 deep, allocated at accept): the
 *                      core writes its decision into it and keeps its own
 *                      state there, so no command path allocates.
 *
 * The command cycle
 *   nvmf_queue_submit() takes a received capsule and answers an action
 *   (enum nvmf_act); the details are in req->xfer and req->io:
 *
 *   COMPLETE  send req->cqe. If req->xfer.dir is NVMF_XFER_TO_HOST and the
 *             status is success, first RDMA WRITE the data (the buffer given
 *             to nvmf_req_fill() or read from the backend) to
 *             (xfer.addr, xfer.key), in the same chain.
 *   HOLD      nothing to send now (an Asynchronous Event Request): the req
 *             stays in use until nvmf_queue_poll_event() returns it.
 *   CLOSE     a malformed capsule or a protocol violation: close this queue
 *             (and only it), send nothing.
 *   FETCH     get req->xfer.len bytes from the host - RDMA READ from
 *             (xfer.addr, xfer.key), or the in-capsule bytes at
 *             capsule + xfer.icd_off - and pass them to nvmf_req_data().
 *   FILL      take a buffer of xfer.len bytes, let nvmf_req_fill() write the
 *             reply data into it, then do as COMPLETE says.
 *   READ      read io.len bytes at byte io.off of namespace io.nsid
 *             (backend io.backend) into a buffer, then nvmf_req_complete();
 *             on success RDMA WRITE the buffer and send the CQE in one chain.
 *   WRITE     get the data as for FETCH, write io.len bytes at io.off,
 *             then nvmf_req_complete().
 *   FLUSH     make every acknowledged write of io.nsid (NVME_NSID_ALL: of
 *             every namespace) durable, then nvmf_req_complete().
 *   ZEROES    zero io.len bytes at io.off (NVMF_IO_DEALLOCATE: may discard),
 *             then nvmf_req_complete().
 *   DISCARD   deallocate the io.nr_ranges ranges nvmf_req_range() decodes
 *             from the data given to nvmf_req_data(), then
 *             nvmf_req_complete().
 *
 *   The continuations (nvmf_req_data, nvmf_req_fill, nvmf_req_complete)
 *   answer an action the same way. Every path ends in COMPLETE (or CLOSE):
 *   the command then leaves the queue and its req may be reused.
 *
 * What the transport owes the core
 *   - Accept a connection only after nvmf_cm_request() says so, with its
 *     accept private data; post hsqsize + 1 receives of 64 + in-capsule
 *     bytes (nvmf_tgt_in_capsule()); at most hrqsize responses in flight.
 *   - One req per received capsule; keep the capsule's buffer until the
 *     command completes when the action reads in-capsule data (WRITE,
 *     FETCH from the capsule), otherwise it may be reposted at once.
 *   - RDMA READ / WRITE exactly (xfer.addr, xfer.key, xfer.len); send the
 *     CQE with Invalidate of xfer.key when xfer.invalidate (else the host
 *     invalidates itself).
 *   - Close a queue on CLOSE, on nvmf_queue_dead() (look again whenever
 *     nvmf_tgt_dead_gen() changed), on a transfer error;
 *     then nvmf_queue_destroy() once no backend operation of it is pending.
 *   - Drive nvmf_tgt_keepalive() with a monotonic clock (every second).
 *
 * Reserved and unused fields are ignored, as the specification lets a
 * controller do, except where a status below names them (CC's reserved
 * bits, CATTR's, PSDT and FUSE). Ignored: MPTR; Identify's CNTID, and
 * its CSI but for CNS 06h; Get Log Page's LSI and UUID index, its LSP but
 * the ANA log's RGO, its CSI but for Commands Supported and Effects, its
 * NSID but for SMART / Health; Read/Write's LR, PRINFO
 * (no namespace has protection information), DSM hints, tags; the NSID of
 * Keep Alive, AER and Abort; the cntlid of the rdma_cm request.
 *
 * Statuses (all validation failures carry DNR; the first failing check wins)
 *   every command   capsule < 64 bytes or > 64 + in-capsule size, in-capsule
 *                   data that did not arrive, more than sqsize + 1 in flight,
 *                   a dead controller: CLOSE.
 *                   FUSE set or PSDT not 01b: Invalid Field.
 *   before Connect  anything but Connect: Command Sequence Error.
 *   SGL             not keyed (subtype 0h/Fh) nor data block (subtype 1h):
 *                   SGL Descriptor Type Invalid; in-capsule offset past the
 *                   in-capsule size: SGL Offset Invalid; its end past it, or
 *                   any length other than the command's transfer: Data SGL
 *                   Length Invalid; in-capsule data for controller-to-host:
 *                   Invalid Field.
 *   Connect         RECFMT != 0: Connect Incompatible Format. Invalid
 *                   Parameters with DW0 = IATTR << 16 | IPO for: QID other
 *                   than the rdma_cm one (SQE 42), SQSIZE 0, above MQES (I/O)
 *                   or 31 (admin) or other than hsqsize (SQE 44), reserved
 *                   CATTR bits (SQE 46), unknown/unterminated SUBNQN (data
 *                   256), empty/long HOSTNQN (data 512), admin CNTLID not
 *                   FFFFh or I/O CNTLID not a live controller of that host
 *                   (data 16), HOSTID not the controller's (data 0).
 *                   I/O queue: controller not ready or QID connected
 *                   already: Command Sequence Error; QID above the queues
 *                   granted (Number of Queues; before Set Features all of
 *                   max_io_queues): Invalid Queue Identifier (IPO SQE 42).
 *                   No free controller: Connect Controller Busy (no DNR).
 *                   A second Connect on a queue: Command Sequence Error.
 *   Property Get/Set  only CAP (8 bytes), VS, CC, CSTS (4 bytes); Set only
 *                   CC, no reserved bits: else Invalid Field. On an I/O
 *                   queue, and other Fabrics types: Invalid Opcode.
 *   admin           opcodes other than Identify, Get Log Page, Set/Get
 *                   Features, AER, Keep Alive, Abort: Invalid Opcode; before
 *                   CSTS.RDY: Command Sequence Error; bad NSID: Invalid
 *                   Namespace or Format; unsupported CNS/LID/FID/SEL, bad
 *                   log offset, transfer above MDTS: Invalid Field; SV set:
 *                   Feature Not Saveable; NSID on a controller feature:
 *                   Feature Not Namespace Specific; Number of Queues with
 *                   I/O queues present: Command Sequence Error; an AER
 *                   beyond the limit: Asynchronous Event Request Limit
 *                   Exceeded. Identify CNS 06h of a command set other
 *                   than NVM, SMART / Health with an NSID other than 0 or
 *                   FFFFFFFFh (no per-namespace SMART), Set Features
 *                   Volatile Write Cache (WCE is fixed), a write protection
 *                   state other than none and on, Get Features Host
 *                   Identifier without EXHID: Invalid Field; Commands
 *                   Supported and Effects of another command set: Invalid
 *                   Log Page; Set Features Host Identifier (Connect gave
 *                   it): Command Sequence Error; Namespace Write Protection
 *                   Config without an active NSID: Invalid Namespace or
 *                   Format.
 *   I/O             see nvmf_io.c: Invalid Opcode, Command Sequence Error,
 *                   SGL statuses, Invalid Namespace or Format, Namespace is
 *                   Write Protected (Write, Write Zeroes, deallocation of a
 *                   namespace a host protected), Invalid Field
 *                   (DTYPE, MDTS), LBA Out of Range, Data SGL Length Invalid.
 *                   Backend errors: Unrecovered Read Error / Write Fault,
 *                   Data Transfer Error, Capacity Exceeded, Internal Error
 *                   (no DNR).
 *
 * Threads
 *   A queue and its reqs belong to one worker thread: only that thread calls
 *   nvmf_queue_*() and nvmf_req_*() on them. Controller-wide state (the
 *   cntlid table, queue membership, features, AER events, the error log,
 *   keep-alive deadlines) lives in the target and is guarded by one mutex per
 *   target, taken on Connect, queue destruction, admin commands that read or
 *   change that state, failed commands (error log), event posting and the
 *   keep-alive check - never by a successful I/O command. What the I/O path
 *   reads of its controller (alive, ready) is atomic. nvmf_tgt_*() may be
 *   called from any thread.
 */
#ifndef NVMF_CTRL_H
#define NVMF_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme_wire.h"

struct nvmf_tgt;
struct nvmf_queue;

/* ---- configuration ------------------------------------------------------- */

#define NVMF_MAX_NS	  32
#define NVMF_AER_MAX	  16 /* the most Asynchronous Event Requests a controller holds */
#define NVMF_ERR_LOG_LEN  16 /* Error Information log entries kept per controller */

/**
 * struct nvmf_ns_config - one namespace; its NSID is its index + 1.
 * @nblocks: size in logical blocks (> 0).
 * @block_size: 512 or 4096.
 * @backend: the caller's handle, returned in req->io.backend.
 * @nguid: namespace globally unique identifier; all zero: derived from the
 *         subsystem NQN and the NSID.
 */
struct nvmf_ns_config {
	uint64_t nblocks;
	uint32_t block_size;
	void *backend;
	uint8_t nguid[16];
};

/**
 * struct nvmf_tgt_config - a target.
 * @subnqn: the NVM subsystem's NQN (at most NVMF_NQN_MAX bytes, not the discovery NQN).
 * @serial: Identify's SN (at most 20 ASCII characters).
 * @model: Identify's MN (at most 40).
 * @firmware: Identify's FR (at most 8).
 * @ns: the namespaces (1 to NVMF_MAX_NS).
 * @nr_ns: how many.
 * @adrfam: NVMF_ADRFAM_IPV4 or NVMF_ADRFAM_IPV6, for the discovery log.
 * @traddr: the listening address as the discovery log shows it.
 * @trsvcid: the port, e.g. "4420".
 * @portid: the port's identifier in the discovery log.
 * @max_io_queues: I/O queues a controller may have (1 to 1024).
 * @max_queue_depth: entries of an I/O queue, CAP.MQES + 1 (2 to 1024).
 * @in_capsule: in-capsule data bytes a capsule may carry after its SQE
 *              (multiple of 16, may be 0); receive buffers are 64 + this.
 * @mdts: largest data transfer, bytes (a power of two, 4 KiB to 16 MiB).
 * @max_ctrls: controllers alive at once (1 to 1024).
 * @aer_limit: Asynchronous Event Requests held per controller (1 to NVMF_AER_MAX).
 * @volatile_cache: report a volatile write cache (the host then sends Flush).
 * @event_notify: called, with the target lock held, when an event waits for
 *                @admin's worker: nvmf_queue_poll_event() there will find it.
 *                May be NULL (the worker then polls). Must not call back in.
 * @event_arg: its first argument.
 */
struct nvmf_tgt_config {
	const char *subnqn;
	const char *serial;
	const char *model;
	const char *firmware;
	const struct nvmf_ns_config *ns;
	uint32_t nr_ns;
	uint8_t adrfam;
	const char *traddr;
	const char *trsvcid;
	uint16_t portid;
	uint16_t max_io_queues;
	uint16_t max_queue_depth;
	uint32_t in_capsule;
	uint32_t mdts;
	uint16_t max_ctrls;
	uint8_t aer_limit;
	bool volatile_cache;
	void (*event_notify)(void *arg, struct nvmf_queue *admin);
	void *event_arg;
};

/**
 * nvmf_tgt_create - a target from @cfg (copied; strings too).
 * @cfg: the configuration, validated field by field.
 *
 * Context: any thread.
 * Return: the target, or NULL with errno EINVAL (a bad field) or ENOMEM.
 */
struct nvmf_tgt *nvmf_tgt_create(const struct nvmf_tgt_config *cfg);

/**
 * nvmf_tgt_destroy - free @t. Every queue must have been destroyed first.
 * @t: the target, or NULL.
 *
 * Context: any thread, once no other thread uses @t.
 */
void nvmf_tgt_destroy(struct nvmf_tgt *t);

/**
 * nvmf_tgt_keepalive - expire controllers whose keep-alive timer ran out.
 * @t: the target.
 * @now_ms: a monotonic clock, milliseconds; the caller drives it, calling at
 *          least every KAS (1 s). A controller expires when a call finds
 *          that no Keep Alive reached it for more than KATO + KAS since the
 *          call that last saw one (or its Connect) - the timer has KAS
 *          granularity, and a host may send a Keep Alive every KATO.
 * @expired: where the expired controllers' cntlids go.
 * @max: room in @expired.
 *
 * An expired controller is dead: its queues answer CLOSE to their next
 * capsule, and the caller should close them now (nvmf_queue_cntlid() tells
 * which). A cntlid is reported once.
 *
 * Context: any thread.
 * Return: the number of controllers that expired (at most @max reported;
 * the rest are reported by the next call).
 */
int nvmf_tgt_keepalive(struct nvmf_tgt *t, uint64_t now_ms, uint16_t *expired, int max);

/**
 * nvmf_tgt_ns_changed - report a change to namespace @nsid (its attributes or
 * size) to every controller of the NVM subsystem: the Changed Namespace List
 * log gains it and, where the host enabled the notice, an asynchronous event
 * (Notice, Namespace Attribute Changed) goes out.
 * @t: the target.
 * @nsid: the namespace.
 *
 * Context: any thread.
 * Return: 0, or -EINVAL for an NSID the subsystem does not have.
 */
int nvmf_tgt_ns_changed(struct nvmf_tgt *t, uint32_t nsid);

/**
 * nvmf_tgt_disc_changed - the discovery log changed: bump its generation and
 * notify discovery controllers that enabled the notice.
 * @t: the target.
 *
 * Context: any thread.
 */
void nvmf_tgt_disc_changed(struct nvmf_tgt *t);

/**
 * nvmf_tgt_in_capsule - the in-capsule data bytes the target accepts.
 * @t: the target.
 *
 * Return: cfg->in_capsule; a receive buffer needs 64 more bytes.
 */
uint32_t nvmf_tgt_in_capsule(const struct nvmf_tgt *t);

/* ---- rdma_cm private data ------------------------------------------------ */

/**
 * struct nvmf_cm_params - what a valid connect request asks for.
 * @qid: the queue (0: admin).
 * @hsqsize: the host's SQ size, 0's based: the queue holds @hsqsize + 1
 *           commands, so post that many receives.
 * @hrqsize: the host's receive queue size: at most this many completions
 *           may be in flight towards the host.
 */
struct nvmf_cm_params {
	uint16_t qid;
	uint16_t hsqsize;
	uint16_t hrqsize;
};

/**
 * nvmf_cm_request - check an NVMe/RDMA connect request's private data.
 * @t: the target.
 * @pd: the private data as rdma_cm delivered it.
 * @len: its length (the CM may pad it).
 * @p: on success, the request's parameters.
 * @rep: on success, the accept private data to send.
 * @rej: on failure, the reject private data to send.
 *
 * Context: any thread.
 * Return: 0 to accept, -EPROTO to reject with @rej.
 */
int nvmf_cm_request(const struct nvmf_tgt *t, const void *pd, size_t len,
		    struct nvmf_cm_params *p, struct nvmf_rdma_cm_rep *rep,
		    struct nvmf_rdma_cm_rej *rej);

/* ---- queues -------------------------------------------------------------- */

/**
 * nvmf_queue_create - the core's state for one accepted connection.
 * @t: the target.
 * @qid: from the connect request.
 * @hsqsize: from the connect request (0's based). The Connect must agree.
 *
 * Allocates (this is connection setup, not a command path).
 * Context: any thread; from then on the queue's worker.
 * Return: the queue, or NULL with errno ENOMEM.
 */
struct nvmf_queue *nvmf_queue_create(struct nvmf_tgt *t, uint16_t qid, uint16_t hsqsize);

/**
 * nvmf_queue_destroy - the connection is gone. Detaches from the
 * controller: the admin queue's going kills the controller (its I/O queues
 * then CLOSE); the controller is freed with its last queue. Held AERs are
 * dropped: their reqs are the caller's again. No other req of this queue may
 * be passed to the core afterwards.
 * @q: the queue, or NULL.
 *
 * Context: the queue's worker.
 */
void nvmf_queue_destroy(struct nvmf_queue *q);

/**
 * nvmf_queue_cntlid - the controller this queue is bound to.
 * @q: the queue.
 *
 * Context: the queue's worker.
 * Return: its cntlid, or 0 before a successful Connect.
 */
uint16_t nvmf_queue_cntlid(const struct nvmf_queue *q);

/**
 * nvmf_queue_dead - whether the queue's controller is gone (keep-alive
 * expiry, admin queue lost): the caller should close the queue.
 * @q: the queue.
 *
 * Context: the queue's worker.
 * Return: true if the queue should be closed.
 */
bool nvmf_queue_dead(const struct nvmf_queue *q);

/**
 * nvmf_tgt_dead_gen - a number that changes whenever a controller of @t
 * goes dead (keep-alive expiry, admin queue destroyed).
 * @t: the target.
 *
 * A worker keeps the value it last saw and, when it differs, looks at its
 * queues with nvmf_queue_dead(): one load per loop turn instead of a clock
 * read. A controller that died before the value was read is seen dead.
 *
 * Context: any thread.
 * Return: the generation.
 */
uint32_t nvmf_tgt_dead_gen(struct nvmf_tgt *t);

/* ---- commands ------------------------------------------------------------ */

enum nvmf_act {
	NVMF_ACT_COMPLETE = 1,
	NVMF_ACT_HOLD,
	NVMF_ACT_CLOSE,
	NVMF_ACT_FETCH,
	NVMF_ACT_FILL,
	NVMF_ACT_READ,
	NVMF_ACT_WRITE,
	NVMF_ACT_FLUSH,
	NVMF_ACT_ZEROES,
	NVMF_ACT_DISCARD,
};

enum nvmf_xfer_dir {
	NVMF_XFER_NONE = 0,
	NVMF_XFER_FROM_HOST, /* RDMA READ, or in-capsule */
	NVMF_XFER_TO_HOST,   /* RDMA WRITE */
};

/**
 * struct nvmf_xfer - a command's data transfer, decoded from its SGL.
 * @dir: direction, NVMF_XFER_NONE without data.
 * @in_capsule: FROM_HOST only: the data is in the capsule at @icd_off.
 * @invalidate: the host asked for SEND with Invalidate of @key in the response.
 * @len: bytes.
 * @icd_off: in-capsule data's offset from the capsule's first byte.
 * @key: the host's rkey (keyed).
 * @addr: the host's address (keyed).
 */
struct nvmf_xfer {
	uint8_t dir;
	bool in_capsule;
	bool invalidate;
	uint32_t len;
	uint32_t icd_off;
	uint32_t key;
	uint64_t addr;
};

#define NVMF_IO_FUA	   (1u << 0) /* write through: durable before completion */
#define NVMF_IO_DEALLOCATE (1u << 1) /* ZEROES: the range may be deallocated */

/**
 * struct nvmf_io - a backend operation.
 * @backend: the namespace's nvmf_ns_config.backend (NULL for a flush of all).
 * @nsid: the namespace (NVME_NSID_ALL: every namespace, FLUSH only).
 * @flags: NVMF_IO_*.
 * @nr_ranges: DISCARD: ranges to decode with nvmf_req_range().
 * @off: byte offset.
 * @len: bytes.
 */
struct nvmf_io {
	void *backend;
	uint32_t nsid;
	uint32_t flags;
	uint32_t nr_ranges;
	uint64_t off;
	uint64_t len;
};

/**
 * struct nvmf_req - one command in flight: the caller allocates it (per
 * queue slot), the core fills it. Fields the caller reads: @cqe, @xfer, @io.
 * @cqe: the completion to send (COMPLETE).
 * @xfer: the data transfer.
 * @io: the backend operation.
 * @sqe: the command, copied at submit.
 * @state: the core's: where in its cycle the command is.
 * @lbads: the core's: the namespace's block size shift (DISCARD).
 * @arg: the core's: command specific (a log page offset, an Identify CNS).
 */
struct nvmf_req {
	struct nvme_cqe cqe;
	struct nvmf_xfer xfer;
	struct nvmf_io io;
	struct nvme_sqe sqe;
	uint8_t state;
	uint8_t lbads;
	uint64_t arg;
};
static_assert(sizeof(struct nvmf_xfer) == 24, "nvmf_xfer");
static_assert(sizeof(struct nvmf_io) == 40, "nvmf_io");
static_assert(sizeof(struct nvmf_req) == 160, "nvmf_req: a few per queue slot, keep it small");

/**
 * nvmf_queue_submit - a capsule arrived on @q.
 * @q: the queue.
 * @capsule: the received bytes (SQE, then any in-capsule data); they must
 *           stay readable until the command completes if the action reads
 *           in-capsule data.
 * @len: how many were received.
 * @req: a free req of this queue.
 *
 * Validates every field and answers the exact NVMe status for a bad command
 * (COMPLETE with an error CQE) or CLOSE for a capsule the queue cannot
 * survive: shorter than an SQE, longer than an SQE plus the in-capsule size,
 * in-capsule data beyond what arrived, more commands in flight than the
 * queue holds, or any command on a queue whose controller died.
 *
 * Context: the queue's worker.
 * Return: the action; see the top of this file.
 */
enum nvmf_act nvmf_queue_submit(struct nvmf_queue *q, const void *capsule, size_t len,
				struct nvmf_req *req);

/**
 * nvmf_req_data - the data a FETCH asked for has arrived.
 * @q: the queue.
 * @req: the command.
 * @data: the bytes (in the capsule or in the caller's buffer; for DISCARD
 *        they must stay readable until nvmf_req_complete()).
 * @len: req->xfer.len.
 *
 * Context: the queue's worker.
 * Return: COMPLETE, DISCARD or CLOSE (called out of turn).
 */
enum nvmf_act nvmf_req_data(struct nvmf_queue *q, struct nvmf_req *req, const void *data,
			    size_t len);

/**
 * nvmf_req_fill - write a FILL's reply data (an Identify structure, a log
 * page) into @buf.
 * @q: the queue.
 * @req: the command.
 * @buf: req->xfer.len bytes, 8-byte aligned.
 * @len: req->xfer.len.
 *
 * Context: the queue's worker.
 * Return: COMPLETE (then RDMA WRITE @buf and send the CQE), or CLOSE
 * (called out of turn).
 */
enum nvmf_act nvmf_req_fill(struct nvmf_queue *q, struct nvmf_req *req, void *buf, size_t len);

/**
 * nvmf_req_complete - a backend operation (or the transfer before it) ended.
 * @q: the queue.
 * @req: the command (READ, WRITE, FLUSH, ZEROES or DISCARD).
 * @err: 0, or a negative errno: -EIO (media: Unrecovered Read Error or
 *       Write Fault), -ECOMM (the RDMA transfer failed: Data Transfer
 *       Error), -ENOSPC (Capacity Exceeded), anything else Internal Error.
 *
 * Context: the queue's worker.
 * Return: COMPLETE (or CLOSE, called out of turn).
 */
enum nvmf_act nvmf_req_complete(struct nvmf_queue *q, struct nvmf_req *req, int err);

/**
 * nvmf_req_range - one DISCARD range, decoded and already validated.
 * @req: the command.
 * @data: the bytes given to nvmf_req_data().
 * @i: the range, below req->io.nr_ranges.
 * @off: its byte offset.
 * @len: its bytes (0: an empty range, skip it).
 *
 * Context: the queue's worker.
 * Return: 0, or -EINVAL if @i is out of range.
 */
int nvmf_req_range(const struct nvmf_req *req, const void *data, uint32_t i, uint64_t *off,
		   uint64_t *len);

/**
 * nvmf_queue_poll_event - a held Asynchronous Event Request that an event
 * has completed: send its req->cqe. Cheap when nothing waits (one atomic
 * load); call it on the admin queue's worker after event_notify, or when
 * idle.
 * @q: the admin queue.
 *
 * Context: the queue's worker.
 * Return: the req to send, or NULL. Call again until NULL.
 */
struct nvmf_req *nvmf_queue_poll_event(struct nvmf_queue *q);

#endif /* NVMF_CTRL_H */
