/* SPDX-License-Identifier: MIT */
/*
 * pollcore/engine.h - workers, connections, messages, RPC and one-sided
 * operations.
 *
 * An engine owns a control thread (rdma_cm listener and connector, async
 * events) and a set of pinned workers. Each worker owns one CQ, one SRQ,
 * two buffer pools (receive, send) and the RC QPs of the connections it was
 * given; only its own thread touches them after setup.
 *
 * Threads and what they may call:
 *
 *   function                         | app thread | worker (handler) | control
 *   ---------------------------------+------------+------------------+--------
 *   pc_engine_create/destroy         |   yes (1)  |        no        |   no
 *   pc_listen, pc_connect            |   yes      |        no        |   no
 *   pc_listen_stop, pc_engine_mem_reg|   yes      |        no        |   no
 *   pc_msg_alloc, pc_msg_alloc_size  |   yes (2)  |   yes (3)        |   no
 *   pc_msg_wrap                      |   yes      |   yes            |   no
 *   pc_send, pc_call, pc_reply,      |   yes (2)  |   yes (3)        |   no
 *   pc_msg_release, pc_rdma,         |            |                  |
 *   pc_call_cancel                   |            |                  |
 *   pc_close, pc_conn_get/put,       |   yes      |   yes            |   yes
 *   pc_conn_user, pc_conn_info       |            |                  |
 *   pc_app_attach, pc_app_detach,    |   yes (2)  |        no        |   no
 *   pc_app_poll                      |            |                  |
 *   pc_engine_stats, pc_engine_info  |   yes      |   yes            |   yes
 *   pc_mem_reg, pc_mem_dereg,        |   yes      |   yes (4)        |   no
 *   pc_mem_keys                      |            |                  |
 *
 *   (1) one thread, not concurrently with anything else on the engine.
 *   (2) pc_msg_alloc needs a thread attached with pc_app_attach() (either
 *       mode: the slot keeps its stock of send buffers); the calls on a
 *       message, pc_rdma and pc_call_cancel go to the worker through its
 *       submission queue, from any thread, attached or not: the queue is
 *       intrusive (each submission carries its own node), so it is never
 *       full and these calls never fail for lack of room.
 *       pc_msg_alloc_size() above msg_size needs no attach: the large
 *       pool is shared under a spinlock. pc_msg_wrap() needs none either
 *       (a lock-free stack of entries).
 *   (3) on the worker that owns the connection: direct, no queue.
 *   (4) pc_mem_reg and pc_mem_dereg are system calls: in a callback such
 *       as on_conn(UP), never per message. pc_mem_keys is none.
 *
 *   docs/api.md ("Every call") gives, for every call, its threads, whether
 *   it blocks and its errors.
 *
 * Callbacks (on_conn, on_msg, on_large, pc_op.done, pc_release_fn) run
 * on the worker that owns the connection, inside its loop, in an RCU read-side critical section
 * (urcu-qsbr, online): keep them short and never block.
 *
 * Ownership of a struct pc_msg: whoever holds it must give it back exactly
 * once, with pc_send()/pc_call()/pc_reply() (the buffer then travels) or
 * pc_msg_release(). Buffers the application keeps show in the stats as
 * held; nothing is dropped silently.
 *
 * Lifetime of a connection handle (struct pc_conn):
 *  - A handle is a reference. pc_connect() returns one that the caller
 *    owns; pc_conn_get() takes another (in on_conn(UP), for example, or on
 *    any handle the caller may use); pc_conn_put() drops one. While a
 *    reference is held the handle stays valid, past DOWN and past
 *    pc_engine_destroy(), and the last pc_conn_put() frees it. Holding one
 *    never keeps a connection open: pc_close(), the peer, an error or the
 *    engine close it whatever references are held.
 *  - Without a reference of its own, code may use the handle that a
 *    callback was given until that callback returns, msg->conn while it
 *    holds the message, and a handle met in pc_engine_for_each_conn()
 *    during the visit. The engine holds the handle itself until on_conn(DOWN)
 *    returns, so a handler-mode server that keeps no handle needs no
 *    reference and no lock.
 *  - On a handle whose connection is closing or closed, calls that need a
 *    live connection fail without touching it: pc_msg_alloc() and
 *    pc_mem_reg() return NULL with errno ENOTCONN, pc_rdma() and a send of
 *    a message to it return -ENOTCONN, pc_close() returns -EALREADY.
 *    pc_conn_user() and pc_conn_info() (the final counters) keep working.
 *  - Messages keep their connection alive: a received message, and a send
 *    buffer from pc_msg_alloc(), stay valid, msg->conn included, until
 *    given back, before or after DOWN. After DOWN, pc_send(), pc_call()
 *    and pc_reply() on them return -ENOTCONN and release them;
 *    pc_msg_release() works as before.
 *  - So does whatever pollcore accepted: a submission still in a worker's
 *    ring, a message in the backlog or on the wire, an operation until its
 *    done() returned. The worker retires a connection (destroys its QP)
 *    only after DOWN, once all of these and all its messages came back.
 *  - Cost: pc_msg_alloc() and pc_rdma() from a thread other than the owning
 *    worker, and a pc_send() to a connection other than the message's own,
 *    add one atomic increment, on a cache line of the connection that only
 *    application threads write. pc_conn_get() and pc_conn_put() are one
 *    atomic each, on the same line. Nothing else on the hot path.
 *
 * A device removed while the engine runs (rdma_cm's DEVICE_REMOVAL, the
 * device's IBV_EVENT_DEVICE_FATAL, or its uverbs device gone from sysfs):
 * every connection on it closes (DOWN with -ENODEV, "device removed"), the
 * listener bound to it (if any) goes, and no new connection is admitted on
 * it. Once every connection of the device is retired (its DOWN delivered
 * and its messages given back), the engine destroys everything it has on
 * the device and lets go of its context, so that the removal completes
 * (rxe and other providers that cannot disassociate wait for that). Memory
 * the application registered there with pc_mem_reg() must be deregistered
 * by it. The engine does not use that device again, even when a device of
 * the same name comes back (connections to it fail with ENODEV, saying
 * so); a new engine does. The other devices are not affected.
 *
 * Every function returns 0 or a negative errno (constructors: NULL with
 * errno set). Where a failure needs explaining (a parameter refused, a
 * device, peer or verbs error, a connection refused), pc_last_error() on
 * the calling thread says why, naming device, port, GID index, QP number
 * and ibv_wc_status_str() where they apply. The outcomes a data path
 * meets in normal running (ENOBUFS, EAGAIN, ENOTCONN, EALREADY) are the
 * return value or errno alone: no message is formatted for them, and
 * pc_last_error() may still hold an older one.
 */
#ifndef POLLCORE_ENGINE_H
#define POLLCORE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <pollcore/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pc_engine;
struct pc_conn;
struct pc_worker;

/* How received work reaches the application. */
enum pc_handoff {
	PC_HANDOFF_HANDLER = 0,	/* on_msg runs on the worker (run to completion) */
	PC_HANDOFF_RING,	/* SPSC ring per (worker, app thread); pc_app_poll() */
};

/* pc_engine_params.window when left 0: receive credits one peer may hold. */
#define PC_WINDOW_DEFAULT 64u

/* pc_engine_params.max_msg_size's default: 16 MiB. */
#define PC_MAX_MSG_DEFAULT (16u << 20)

/* What a worker does when there is nothing to do. */
enum pc_idle {
	PC_IDLE_AUTO = 0,	/* busy when pinned to a core of its own, hybrid otherwise */
	PC_IDLE_BUSY,		/* busy-poll forever (lowest latency) */
	PC_IDLE_HYBRID,		/* after idle_spin_us of empty turns, sleep on CQ event + eventfd */
};

enum pc_msg_type {
	PC_MSG_ONEWAY = 0,	/* plain message */
	PC_MSG_REQUEST,		/* pc_call(): expects a pc_reply() with the same req_id */
	PC_MSG_RESPONSE,	/* answer to a request */
};

/**
 * struct pc_msg - a message buffer, handed over zero-copy.
 * @data: payload (registered memory of the owning worker).
 * @len: payload bytes; set it before sending.
 * @cap: payload capacity.
 * @conn: connection it arrived on / will be sent on.
 * @type: enum pc_msg_type.
 * @req_id: request id (PC_MSG_REQUEST/RESPONSE).
 * @user: free for the application.
 *
 * Messages are allocated by pollcore (pc_msg_alloc(), or received); the
 * library keeps its own state beside this structure.
 */
struct pc_msg {
	void *data;
	uint32_t len;
	uint32_t cap;
	struct pc_conn *conn;
	uint8_t type;
	uint64_t req_id;
	void *user;
};

/**
 * typedef pc_release_fn - pollcore is done with an application buffer
 * (pc_msg_wrap(), on_large's struct pc_large_buf).
 * @arg: the pointer given with the buffer.
 * @status: 0 when the buffer's last use succeeded: sent, the peer's DONE
 *          came (it read every byte) or, at most msg_size bytes, the SEND
 *          completed; received, the message was read into it and given
 *          back. Otherwise a negative errno: -ENOTCONN (the connection
 *          closed first: the peer may have read some, all or none of it),
 *          -ECANCELED (given back with pc_msg_release() and never sent),
 *          -EINVAL, -ERANGE or -EXDEV (on_large's answer was refused,
 *          pc_last_error() saying why), or the peer's error in its DONE.
 *
 * Runs exactly once per buffer, on the worker that owns the connection,
 * once nothing of pollcore's touches the memory any more (no READ of the
 * peer's can reach it: its window invalidated, or the connection's QP
 * flushed): the application may reuse, free or deregister it from then
 * on. A callback: keep it short, never block. It may wrap the buffer
 * again (pc_msg_wrap()). A received message that pc_engine_destroy()
 * finds undelivered (still in a ring-mode handoff) has its released()
 * run there, with 0.
 */
typedef void (*pc_release_fn)(void *arg, int status);

/**
 * struct pc_large_buf - on_large's answer: where an incoming large
 * message is read to.
 * @addr: the destination, at least as long as the message, inside @mem's
 *        registration.
 * @mem: a handle from pc_mem_reg() on the connection's device, registered
 *       with IBV_ACCESS_LOCAL_WRITE (a READ into memory without it fails,
 *       which closes the connection).
 * @released: runs once when pollcore is done with @addr (pc_release_fn),
 *            or NULL.
 * @arg: for @released.
 */
struct pc_large_buf {
	void *addr;
	void *mem;
	pc_release_fn released;
	void *arg;
};

enum pc_op_code {
	PC_OP_WRITE = 1,	/* RDMA WRITE local -> remote */
	PC_OP_READ,		/* RDMA READ remote -> local */
};

/**
 * struct pc_op - a one-sided operation; embed it in your own context.
 * @code: PC_OP_WRITE or PC_OP_READ.
 * @local: local buffer, registered with pc_mem_reg() on the connection's
 *         device (READ needs IBV_ACCESS_LOCAL_WRITE).
 * @lkey: its lkey.
 * @len: bytes to move.
 * @remote_addr: peer's address.
 * @rkey: peer's rkey (the peer granted REMOTE_WRITE and/or REMOTE_READ).
 * @done: called once on the owning worker with 0 or a negative errno
 *        (-ECANCELED when the connection closed while the operation was
 *        accepted but not done: waiting for room in the send queue, or
 *        posted and never completed by the device; -EIO etc. with
 *        pc_last_error() naming QP and ibv_wc_status_str()).
 * @arg: for @done.
 */
struct pc_op {
	uint8_t code;
	void *local;
	uint32_t lkey;
	uint32_t len;
	uint64_t remote_addr;
	uint32_t rkey;
	void (*done)(struct pc_op *op, int status);
	void *arg;
	/* private */
	uint64_t priv[4];
};

/* pc_engine_params.keepalive_ms: no probes. */
#define PC_KEEPALIVE_OFF UINT32_MAX

enum pc_conn_event {
	PC_CONN_UP = 1,		/* established; sending allowed */
	PC_CONN_DOWN,		/* closed and drained; no more callbacks for it */
};

/* Private data a raw peer's connect request carries at most, as kept (pc_conn_info()). */
#define PC_CONNECT_DATA_MAX 56u

/* Largest private data an accept (IB CM REP) and a reject (REJ) carry. */
#define PC_ACCEPT_DATA_MAX 196u
#define PC_REJECT_DATA_MAX 148u

/* pc_conn_request.recv_depth when the engine answers (no on_request). */
#define PC_RAW_DEPTH_DEFAULT 64u

/**
 * struct pc_conn_request - a peer that speaks the application's protocol
 * asks to connect (pc_engine_params.on_request).
 * @device: device the request arrived on.
 * @port: its port.
 * @peer: the peer's numeric address.
 * @private_data: what the peer's rdma_cm connect carried (NVMe-oF: recfmt,
 *                qid, hrqsize, hsqsize, cntlid); untrusted.
 * @private_len: its length (rdma_cm pads it to the transport's size: 56
 *               bytes on InfiniBand and RoCE).
 * @worker: the worker that will own the connection.
 * @max_recv_depth: receive buffers free on that worker (raw_bufs less
 *                  what its other raw connections hold): the most
 *                  @recv_depth may be.
 * @msg_size: pc_engine_params.msg_size, the most @recv_size may be.
 * @recv_depth: answer: receives posted on the connection's own receive
 *              queue, 1 .. @max_recv_depth (NVMe-oF: the host's queue
 *              size). Every one is posted before the accept leaves, and a
 *              receive the application gives back (pc_msg_release(), or a
 *              send of it once that send completed) is posted again
 *              before anything the connection sends next: a peer that
 *              never has more than @recv_depth messages unanswered never
 *              meets RNR. Preset: min(PC_RAW_DEPTH_DEFAULT, @max_recv_depth).
 * @recv_size: answer: bytes one receive holds, 1 .. @msg_size (NVMe-oF: 64
 *             plus the in-capsule data advertised). A longer message fails
 *             its receive and closes only this connection. Preset: @msg_size.
 * @reply: answer: private data for the accept (at most
 *         PC_ACCEPT_DATA_MAX bytes) or the reject (PC_REJECT_DATA_MAX);
 *         NULL for none; copied before the engine goes on.
 * @reply_len: its length.
 * @user: answer: the connection's pc_conn_user() pointer.
 */
struct pc_conn_request {
	const char *device;
	uint8_t port;
	const char *peer;
	const void *private_data;
	uint8_t private_len;
	unsigned int worker;
	uint32_t max_recv_depth;
	uint32_t msg_size;
	uint32_t recv_depth;
	uint32_t recv_size;
	const void *reply;
	uint8_t reply_len;
	void *user;
};

/**
 * struct pc_device_params - settings of one device; zero means default.
 * @size: sizeof(struct pc_device_params) as the caller compiled it, in
 *        every entry (the ABI: see struct pc_engine_params' @size).
 * @port: port number (1-based) the device is used on; 0 means 1.
 * @cpus: PUs for this device's workers, as operating-system indexes in
 *        hwloc list syntax (e.g. "2,4,8-9"): worker k of the device runs on
 *        the k-th lowest; at least workers_per_device of them, allowed to
 *        the process, none shared with another device. NULL: NIC-local
 *        cores chosen by the planner (docs/placement.md).
 */
struct pc_device_params {
	uint32_t size;
	uint8_t port;
	const char *cpus;
};

/* pc_engine_params.max_inline: never post inline. */
#define PC_INLINE_NONE UINT32_MAX

/**
 * struct pc_engine_params - engine configuration; zero means default.
 * @size: sizeof(struct pc_engine_params), as the caller compiled it:
 *        required. Fields are only ever added at the end of the structure;
 *        the library reads @size bytes, takes what it does not find there
 *        as 0 (default), and refuses a larger structure whose extra bytes
 *        it does not know and are not 0 (E2BIG). So a program built
 *        against an older header runs with a newer library, and one built
 *        against a newer header gets an error, not a surprise, from an
 *        older library that cannot honour a field it sets.
 * @devices: verbs device names, NULL-terminated; NULL: the first device.
 * @device_params: NULL for defaults, or one entry per name in @devices (one
 *                 entry when @devices is NULL).
 * @workers_per_device: default 1.
 * @handoff: PC_HANDOFF_HANDLER (default) or PC_HANDOFF_RING.
 * @app_threads: application threads that will pc_app_attach() (both modes;
 *               each slot keeps a stock of send buffers), default 1.
 * @msg_size: largest payload, default 4096.
 * @rx_bufs: receive buffers per worker, default 1024.
 * @tx_bufs: send buffers per worker, default 1024.
 * @srq_depth: SRQ size, and the worker's credit budget: the credits it has
 *             granted and not seen used, over all its connections, never
 *             exceed the buffers posted there; default rx_bufs - raw_bufs.
 * @srq_watermark: SRQ refill threshold and srq_limit; default srq_depth / 4.
 * @sq_depth: send queue depth per QP, default 256.
 * @max_inline: largest send (header included) or pc_rdma() WRITE posted
 *              inline, asked of each QP as max_inline_data; default 128
 *              (a 64-byte payload and its header); PC_INLINE_NONE for
 *              none. Where the device takes less, each worker halves it at
 *              its start until the device takes it (logged at info); the
 *              provider may grant more, and what it grants is used.
 * @signal_every: signal every Nth send-queue WR, sends and pc_rdma() operations
 *                alike (and the last of each chain, but for an inline
 *                response, one-way send or request of a pc_call()
 *                without a completion, to a pollcore peer, while the CQ
 *                has room to spare), default 16.
 * @poll_batch: ibv_poll_cq batch, default 32.
 * @window: the most receive credits one peer may hold (messages in flight
 *          per connection and direction, requests included), default
 *          PC_WINDOW_DEFAULT (64).
 *          Connections of a worker share its srq_depth: each may hold
 *          min(@window, srq_depth / connections), so windows shrink as
 *          connections join and grow back as they leave; within that, a
 *          connection starts at @min_window and earns one credit per credit
 *          it uses (an idle peer that never sent holds only its floor;
 *          one that went idle keeps what it earned until it sends again).
 * @min_window: credits every connection is guaranteed, default 1 (at most
 *              @window). A connection is admitted only when its floor is
 *              free now: it is refused when connections x @min_window
 *              would exceed srq_depth, or while the credits its peers hold
 *              (nothing takes granted credits back) leave less than
 *              @min_window of srq_depth (rdma_reject with the reason;
 *              pc_connect() fails with ECONNREFUSED and says why; retry
 *              later).
 * @raw_bufs: receive buffers per worker set aside for raw connections,
 *            whose wire protocol the application owns (peers that send no
 *            pollcore private data: NVMe-oF hosts, rdmacm-utils), default
 *            0: raw peers are refused. Each raw connection gets its own
 *            receive queue of the depth on_request() chose, taken from
 *            these, apart from the SRQ: a raw peer that floods meets RNR
 *            on its own queue and never takes the buffers promised to
 *            others. A worker admits raw connections while their depths
 *            fit; srq_depth + @raw_bufs <= rx_bufs.
 * @ring_size: capacity of each handoff ring (worker to application slot,
 *             ring mode; power of two), default 1024. Submissions go
 *             through a queue that is never full.
 * @max_conns_per_worker: default 1024; an accept beyond it is rejected.
 *                        The worker's CQ must also hold a completion for
 *                        every WR that can be outstanding: a connection is
 *                        refused when it would not (send WRs in flight
 *                        share what receives and drain markers leave).
 * @max_unanswered: places of a connection's window held by calls that
 *                  timed out or were cancelled and whose response never
 *                  came: when there are this many, the connection closes
 *                  (-ETIMEDOUT, "N calls unanswered"); default and at most
 *                  @window (then the window holds nothing else: no call
 *                  could ever be answered again).
 * @max_msg_size: largest message, default PC_MAX_MSG_DEFAULT (16 MiB).
 *                Above @msg_size a message goes by rendezvous: the
 *                receiver RDMA-READs it from the sender's buffer, which
 *                the sender exposes for that one read through a memory
 *                window bound on the connection's own QP. A device without
 *                type-2 memory windows gets none (said once in the log):
 *                its limit is @msg_size. Set it to @msg_size to turn
 *                rendezvous off (no large pool then).
 * @large_pool_size: bytes of each worker's large-message pool (NUMA-local,
 *                   registered, in blocks of 64 KiB: a message of L bytes
 *                   takes one run of ceil(L / 64 KiB) of them, so at most
 *                   L + 64 KiB), from which large messages are sent
 *                   and into which they are read; default 2 x
 *                   @max_msg_size, at least @max_msg_size. A peer can
 *                   hold only its own connection's part of it: the
 *                   blocks allocated to send on one connection
 *                   (pc_msg_alloc_size(), back once the peer's DONE came
 *                   and the window was invalidated) stay within its fair
 *                   share, @large_pool_size / the worker's credited
 *                   connections, but one message is always allowed
 *                   whatever its size; beyond, pc_msg_alloc_size() fails
 *                   with ENOBUFS for that connection only. A peer that
 *                   stops answering descriptors with DONE is closed by
 *                   the DONE deadline (see @keepalive_ms). When the pool
 *                   holds fewer max-size messages than there are
 *                   connections, several stalled peers sending at once
 *                   can still fill it until that deadline. Received large
 *                   messages are read into the pool one at a time per
 *                   connection, more only within the same share.
 * @idle: PC_IDLE_AUTO (default): a worker bound to a core of the plan's
 *        busy-polls; an unbound one (no_numa, no topology, more workers
 *        than cores) would take its core from the application, the
 *        device's kernel work and the other workers, so it runs hybrid.
 *        PC_IDLE_BUSY and PC_IDLE_HYBRID force one. The log's line for
 *        each worker and pc_worker_stats.busy_poll say which applies.
 * @idle_spins: a count instead of a time: empty turns before a hybrid worker
 *               sleeps. Default 0: the time rule alone (@idle_spin_us).
 * @grant_delay_us: how long receive credits earned on a connection may
 *                  wait for a message going back to the peer to carry
 *                  them (in its header, at no cost) before they go by an
 *                  RDMA WRITE of their own; a peer that knows of less than
 *                  half the credits it has earned gets its WRITE at once,
 *                  whatever this says. Default 1000 (1 ms), at most
 *                  10,000,000 (10 s). Longer means fewer WRITEs when
 *                  replies are slow to come; it never stalls a sender.
 * @keepalive_ms: a connection on which nothing arrived for between this
 *                and twice this long gets a probe: its credit word written
 *                again to the peer (8 bytes, answered by the peer's NIC, not
 *                its CPU). A peer that vanished without a disconnect (a
 *                crash, a lost DREQ during a link outage) fails the probe
 *                after the QP's retries, and the connection closes, DOWN
 *                saying so ("retry counter exceeded"). The same look
 *                closes a connection whose send queue had WRs in flight
 *                and completed none for 8 × this (endless RNR retries, a
 *                stalled provider): -ETIMEDOUT, "no send completed".
 *                The same look holds the DONE deadline: a connection on
 *                which rendezvous descriptors (messages above @msg_size)
 *                wait closes when the peer sent no DONE for 8 × this
 *                (16 s by default), counted from the oldest descriptor
 *                or the last DONE, whichever is later, or when its
 *                oldest descriptor has waited 32 × this (64 s) whatever
 *                else was answered (checked every half period):
 *                -ETIMEDOUT, "N rendezvous descriptors unanswered"; its
 *                blocks of the large pool come back once its drain
 *                ended, when no READ can reach them. The receiver posts
 *                DONE before its handler sees the message, but a
 *                receiver whose application keeps its own pool full
 *                that long (so that it reads nothing) is closed the
 *                same way: the sender cannot tell it from a peer that
 *                hoards.
 *                Default 2000; PC_KEEPALIVE_OFF disables probes and the
 *                send-queue rule; the DONE deadline then keeps the
 *                default period (16 s and 64 s).
 *                Not for raw peers.
 * @no_numa: do not bind workers or allocate NUMA-local memory (then no
 *           placement override may be given).
 * @housekeeping_pus: PUs kept free of planned workers for the rest of the
 *                    application (os indexes, hwloc list syntax, e.g. "0-1"):
 *                    every core with one of them is left out. NULL: the first
 *                    core of the machine; "": none. Explicit device cpus are
 *                    not restricted by it.
 * @choose_worker: accepting side: return the index of the worker that
 *                 should own a new connection on @device (a worker of that
 *                 device), or -1 for the least-loaded one. Control thread.
 * @on_conn: connection up/down, on the owning worker. Once DOWN returns the
 *           handle may be used only through a reference (pc_conn_get()
 *           in UP, or pc_connect()'s; see "Lifetime" above); DOWN
 *           follows every UP, and no callback comes for a connection that
 *           never was UP. During DOWN, pc_last_error() says why it closed,
 *           naming device, port and QP (the peer disconnected, pc_close(),
 *           a protocol error of the peer, a failed completion, the device
 *           removed, ...): the same reason as the log line of the close.
 * @on_request: a peer without pollcore private data asks to connect
 *              (raw_bufs must be set): control thread, never blocking. Read
 *              @req's private data, fill in its answer (recv_depth,
 *              recv_size, reply, user), and return 0 to accept or a
 *              negative errno to reject (with @req->reply as the reject's
 *              private data). An answer out of range is refused with
 *              -EINVAL, saying why in the log. NULL: every raw peer that
 *              fits is accepted with the preset answer. Messages on a raw
 *              connection are exact bytes both ways: no pollcore header, no
 *              credits, no pc_call() completions (the application's
 *              protocol does flow control: a peer that sends past
 *              recv_depth meets RNR, on its own connection only).
 * @on_msg: handler mode: a message arrived, on the owning worker; never
 *          before on_conn(UP) of its connection (messages that arrive
 *          earlier are held back until then).
 * @on_large: where a message above msg_size is read to (both handoff
 *            modes), or NULL for the large pool. Runs on the owning
 *            worker before the READ, with the message's @len, @type
 *            (enum pc_msg_type) and @req_id (a response's: match it to
 *            your pc_call()), in the connection's order: fill @buf and
 *            return true to have it read into your registered memory, no
 *            copy (the delivered message's data is @buf->addr, cap its
 *            length; given back with pc_msg_release() or sent on, after
 *            which @buf->released runs with 0); false to decline (the
 *            large pool, as without the hook). A message that waits for
 *            room in the pool may be asked about again. An answer out of
 *            range (no handle, another device's, @addr outside it) falls
 *            back to the pool, its released() running at once with the
 *            errno. At most 128 application buffers (sent and received)
 *            are in use per worker; beyond, the hook is not asked.
 * @arg: passed to the callbacks.
 * @max_calls: calls per connection that pc_call() has accepted and that
 *             have not ended (completed, or a response delivered) at most:
 *             those beyond the window wait in the engine, their deadlines
 *             running; pc_call() says -EAGAIN beyond. Default 2 x @window.
 * @idle_spin_us: how long a hybrid worker keeps polling with nothing to do
 *                (no completion, submission, control message or poller
 *                work) before it sleeps on completion events, in
 *                microseconds; the clock is read on empty turns only.
 *                Default 50 when @idle_spins is 0 too, at most 1,000,000
 *                (1 s). Precedence: only @idle_spins set, the count rule
 *                alone (as before this field); only @idle_spin_us (or
 *                neither), the time rule; both set, whichever bound comes
 *                first.
 * @no_pack: send one message per SEND, and tell peers to do the same. By
 *           default, one-way messages that wait together for the same
 *           connection (a burst within one turn of its worker, or while
 *           the peer's credits ran out) go to a pollcore peer up to 8 per
 *           SEND, as long as they fit in one of its receive buffers
 *           (msg_size): one receive, one credit and far fewer packets than
 *           messages. Every message but the last of a SEND must have a
 *           length that is a multiple of 8 to be followed by another. The
 *           receiver hands each over as a message of its own, in order;
 *           its cap is its own length (it shares the buffer with the
 *           others, which goes back once all are released). Requests,
 *           responses and messages by rendezvous are never packed.
 */
struct pc_engine_params {
	uint32_t size;
	const char *const *devices;
	const struct pc_device_params *device_params;
	unsigned int workers_per_device;
	enum pc_handoff handoff;
	unsigned int app_threads;
	uint32_t msg_size;
	uint32_t rx_bufs;
	uint32_t tx_bufs;
	uint32_t srq_depth;
	uint32_t srq_watermark;
	uint32_t sq_depth;
	uint32_t max_inline;
	uint32_t signal_every;
	uint32_t poll_batch;
	uint32_t window;
	uint32_t min_window;
	uint32_t raw_bufs;
	uint32_t ring_size;
	uint32_t max_conns_per_worker;
	uint32_t max_unanswered;
	uint32_t max_msg_size;
	uint64_t large_pool_size;
	enum pc_idle idle;
	uint32_t idle_spins;
	uint32_t grant_delay_us;
	uint32_t keepalive_ms;
	bool no_numa;
	const char *housekeeping_pus;
	int (*choose_worker)(const char *device, unsigned int nworkers, void *arg);
	void (*on_conn)(struct pc_conn *conn, enum pc_conn_event ev, void *arg);
	int (*on_request)(struct pc_conn_request *req, void *arg);
	void (*on_msg)(struct pc_msg *msg, void *arg);
	bool (*on_large)(struct pc_conn *conn, uint32_t len, uint8_t type, uint64_t req_id,
			 struct pc_large_buf *buf, void *arg);
	void *arg;
	uint32_t max_calls;
	uint32_t pad0;		/* unused: the first 0.2 layout's tail padding */
	uint32_t idle_spin_us;
	bool no_pack;
};

/**
 * pc_engine_create - open devices, place and start the workers and the
 * control thread.
 * @params: configuration; copied. The device names, device params and
 *          housekeeping string are read during the call only.
 *
 * Without placement overrides, a plan that cannot be made (more workers than
 * free cores, no topology) leaves the workers unpinned, with a warning. With
 * @params->housekeeping_pus or a device's cpus, it fails the call instead, as
 * does a worker that cannot bind to its PU.
 *
 * One application thread, never a worker or a callback. It waits for the
 * control thread and every worker to finish their setup.
 *
 * Return: the engine, or NULL with errno set and pc_last_error() saying
 * why: EINVAL (no @params, a @size below the first layout's, a parameter
 * out of range, a PU list that does not parse or names too few, disallowed
 * or shared PUs, no_numa with a placement override, an empty device list),
 * E2BIG (@params or a device's params larger than this library's, with
 * unknown bytes set), ENODEV (no such device, no device at all, a port
 * beyond the device's ports; with a placement override, no topology),
 * ENETDOWN (a port not ACTIVE), ENOSPC (with a placement override: more
 * workers than free cores), EINVAL, EPERM or EIO (with a placement
 * override: a worker's binding refused, or the worker found elsewhere),
 * EAGAIN (a thread could not be created), ENOMEM, EIO (a verbs, rdma_cm
 * or hwloc call failed without an errno); other errno values of verbs,
 * rdma_cm and hwloc are passed on.
 */
PC_API struct pc_engine *pc_engine_create(const struct pc_engine_params *params);

/**
 * struct pc_engine_info - what an engine runs with: its parameters after
 * defaults, and what its devices allow.
 * @size: in: sizeof(struct pc_engine_info) as the caller compiled it (the
 *        library fills that much, and no more).
 * @workers: workers in all.
 * @devices: devices.
 * @msg_size: largest message in one receive buffer.
 * @max_msg_size: largest message at all: max_msg_size where every device has
 *                rendezvous, @msg_size where none has (no type-2 memory
 *                windows), else the smaller.
 * @window: receive credits one peer may hold, and requests in flight per
 *          connection.
 * @min_window: credits every connection is guaranteed.
 * @max_calls: calls per connection not ended that pc_call() accepts.
 * @max_unanswered: unanswered calls that close a connection.
 * @rx_bufs: receive buffers per worker.
 * @tx_bufs: send buffers per worker.
 * @srq_depth: SRQ depth per worker.
 * @raw_bufs: receive buffers per worker set aside for raw peers.
 * @sq_depth: send queue depth per QP.
 * @max_conns_per_worker: connections per worker at most.
 * @app_threads: application slots.
 * @handoff: enum pc_handoff.
 * @idle: enum pc_idle as asked for (pc_worker_stats.busy_poll says what applies).
 * @keepalive_ms: keepalive period (PC_KEEPALIVE_OFF: none).
 * @grant_delay_us: how long a grant may wait for a message to carry it.
 * @large_pool_size: bytes of each worker's large-message pool (0: none).
 */
struct pc_engine_info {
	uint32_t size;
	uint32_t workers;
	uint32_t devices;
	uint32_t msg_size;
	uint32_t max_msg_size;
	uint32_t window;
	uint32_t min_window;
	uint32_t max_calls;
	uint32_t max_unanswered;
	uint32_t rx_bufs;
	uint32_t tx_bufs;
	uint32_t srq_depth;
	uint32_t raw_bufs;
	uint32_t sq_depth;
	uint32_t max_conns_per_worker;
	uint32_t app_threads;
	uint32_t handoff;
	uint32_t idle;
	uint32_t keepalive_ms;
	uint32_t grant_delay_us;
	uint64_t large_pool_size;
};

/**
 * pc_engine_info - the engine's effective parameters.
 * @e: engine.
 * @info: its @size set; filled up to it.
 *
 * Any thread; no system call.
 *
 * Return: 0; -EINVAL for a NULL @e or @info, or a @size below the first
 * layout's (this one's).
 */
PC_API int pc_engine_info(const struct pc_engine *e, struct pc_engine_info *info);

/**
 * pc_engine_destroy - close every connection, drain, stop and free.
 * @e: the engine, or NULL.
 *
 * One application thread, never a worker or a callback, with no other call
 * on the engine in flight. It waits for the connections to drain (10 s at
 * most), then joins the workers and the control thread.
 *
 * Messages still held by the application are reported (count) and freed;
 * pollers still registered are dropped; work posted with pc_worker_post()
 * and not run yet never runs. Connection handles the application holds
 * references to stay valid (see "Lifetime" above). docs/api.md
 * ("Destroying things, in order") says what to do first.
 */
PC_API void pc_engine_destroy(struct pc_engine *e);

/**
 * pc_listen - accept connections on @addr:@port (rdma_cm).
 * @e: engine.
 * @addr: local address, e.g. "fe80::ff:fe00:1%d0" or "0.0.0.0"; NULL: any
 *        address, IPv6 and IPv4 ("::").
 * @port: TCP-style port number.
 *
 * Accepted connections go to the least-loaded worker of the device the
 * request arrived on, if it can admit them (max_conns_per_worker,
 * min_window and the receive buffers its peers' credits leave free, its
 * CQ); otherwise they are rejected with the reason in the
 * reject and in the log. Raw peers (no pollcore private data: NVMe-oF
 * hosts, rdmacm-utils' rdma_client) are accepted only when raw_bufs is
 * set, as on_request() answers: their messages are exact bytes, and they
 * receive into their own queue, posted in full before the accept.
 *
 * An application thread, not a worker; a second pc_listen() on another
 * thread waits for this one.
 *
 * Return: 0; -EINVAL without @e; -EALREADY when @e listens already; -EADDRNOTAVAIL when
 * @addr:@port does not resolve or is not local; -EADDRINUSE when the port
 * is taken; another errno of rdma_cm's, passed on (-EIO when it sets
 * none).
 */
PC_API int pc_listen(struct pc_engine *e, const char *addr, uint16_t port);

/**
 * pc_listen_port - the port pc_listen() bound (useful with port 0).
 * @e: engine.
 *
 * Any thread; it waits for a pc_listen() in progress on another thread.
 *
 * Return: the port, or 0 when not listening.
 */
PC_API uint16_t pc_listen_port(struct pc_engine *e);

/**
 * pc_listen_stop - undo pc_listen(): accept no new connection.
 * @e: engine.
 *
 * Any thread but a worker's: it waits for the control thread to let go of
 * the listener. Connections already accepted stay; a request that arrives
 * from now on is refused by the device's connection manager. pc_listen()
 * may be called again.
 *
 * Return: 0; -EINVAL when @e is not listening.
 */
PC_API int pc_listen_stop(struct pc_engine *e);

/**
 * pc_connect - connect to a pollcore server and wait until established.
 * @e: engine.
 * @addr: server address.
 * @port: server port.
 * @worker: worker index to own the connection, or -1 for least loaded.
 * @timeout_ms: give up after this long.
 * @user: stored in the connection (pc_conn_user()).
 *
 * An application thread, not a worker (the worker delivers UP): it waits
 * until the connection is UP or refused, at most @timeout_ms. The handle
 * returned is a reference the caller owns (see "Lifetime" above): valid
 * until its pc_conn_put(), past DOWN and past pc_engine_destroy().
 *
 * Return: the connection (PC_CONN_UP has been delivered), or NULL with
 * errno set and pc_last_error() saying why: EINVAL (no @e or @addr),
 * EADDRNOTAVAIL (@addr does not
 * resolve), ETIMEDOUT (not established within @timeout_ms), ECONNREFUSED
 * (the server rejected it, saying why, or nothing listens there),
 * EHOSTUNREACH, ENETUNREACH (no path to the peer), ECONNABORTED,
 * ECONNRESET (rdma_cm reported a connection error, or the connection
 * closed before it was up), EPROTO (a server that sends no pollcore
 * private data, or invalid parameters), EBUSY (this engine's worker
 * cannot admit it, or there is no worker @worker on the device), ENODEV
 * (the device was removed), ENOMEM, EIO (a verbs or rdma_cm call failed
 * without an errno, or the QP failed); other errno values of rdma_cm and
 * verbs are passed on.
 */
PC_API struct pc_conn *pc_connect(struct pc_engine *e, const char *addr, uint16_t port, int worker,
				  int timeout_ms, void *user);

/**
 * pc_close - start closing a connection (disconnect, drain, retire).
 * @conn: a handle the caller may use (see "Lifetime" above).
 *
 * Any thread that may use the handle, also after pc_engine_destroy() with
 * a reference; it never waits (it wakes the control thread). PC_CONN_DOWN
 * follows on its worker once drained. Sends on it are refused from now on
 * (the message released). The handle stays valid as long as references to it are held
 * (see "Lifetime" above): closing never invalidates it.
 *
 * Messages that pc_send() accepted (returned 0) and that have not reached
 * the peer when the queue pair goes to ERR (waiting for credits or
 * send-queue slots, still in the submission queue, or flushed from the send
 * queue) are dropped, and each is counted: msgs_dropped in pc_conn_info()
 * (readable in on_conn(DOWN)) and in pc_worker_stats, and in the log line
 * that reports the close. The same holds when the peer or an error closes
 * the connection. Applications that need every message through wait for
 * their answers before closing.
 *
 * Return: 0 when this call started the close; -EALREADY when a close was
 * already under way or done (asked before, by the application, the peer,
 * an error or the engine).
 */
PC_API int pc_close(struct pc_conn *conn);

/**
 * pc_msg_alloc - a send buffer for @conn.
 * @conn: a handle the caller may use (see "Lifetime" above).
 *
 * The owning worker, or a thread attached with pc_app_attach(). The buffer
 * keeps @conn allocated until it is given back (sent or released), even
 * past DOWN.
 *
 * Return: a message with len 0 and cap msg_size, or NULL with errno ENOBUFS
 * (backpressure: send buffers are all in flight or held), ENOTCONN (the
 * connection is closing or closed) or EPERM (the thread is neither the
 * owning worker nor attached, another worker included).
 */
PC_API struct pc_msg *pc_msg_alloc(struct pc_conn *conn);

/**
 * pc_msg_alloc_size - a send buffer of @len bytes for @conn.
 * @conn: a handle the caller may use (see "Lifetime" above).
 * @len: the payload it must hold.
 *
 * Up to msg_size: pc_msg_alloc() (cap msg_size). Above: a buffer of the
 * worker's large-message pool, whose cap is at least @len; sent with
 * pc_send(), pc_call() or pc_reply() like any other, by rendezvous (the
 * peer RDMA-READs it). It is back in the pool once the peer has read it
 * and it was given back (sent or released). A received message above
 * msg_size arrives the same way, its data in the large pool, and goes
 * back with pc_msg_release() (or travels on with pc_send()/pc_reply()).
 *
 * Order: per connection, messages of every size arrive in the order they
 * were sent. So a large message holds back what follows it on its
 * connection: the sender keeps later messages behind one that waits to
 * go (at most 32 large messages per connection may wait for the peer's
 * DONE), and the receiver delivers what arrived after a descriptor only
 * once that message was read. Send latency-sensitive small messages on a
 * connection of their own if large ones may wait.
 *
 * Backpressure stays per connection: the blocks that one connection's
 * sends hold (allocated, not yet back) are capped at its fair share of
 * the pool (large_pool_size / the worker's connections, and always one
 * message), so a peer that never answers holds no more than that, until
 * the DONE deadline closes its connection (pc_engine_params.keepalive_ms).
 *
 * The same threads as pc_msg_alloc() for @len up to msg_size; any thread
 * above it (the large pool is shared under a spinlock, for a few
 * instructions).
 *
 * Return: the message (len 0), or NULL with errno ENOBUFS (up to msg_size:
 * as pc_msg_alloc(); above: the large pool has no block of that size free
 * now, or @conn's sends hold their share: backpressure, retry once
 * messages were read or released; pc_last_error() says which for the
 * share), EMSGSIZE (@len is above the engine's max_msg_size or above the
 * peer's, pc_conn_info()'s peer_max_large; or the peer is raw), ENOTCONN
 * (the connection is closing or closed), EPERM (up to msg_size: the thread
 * is neither the owning worker nor attached).
 */
PC_API struct pc_msg *pc_msg_alloc_size(struct pc_conn *conn, size_t len);

/**
 * pc_send - send @msg (one-way); ownership passes to pollcore.
 * @msg: from pc_msg_alloc(), or a received message to send back.
 *
 * Never dropped while the connection lives: without send-queue slots or
 * credits it waits in the connection's backlog. When the connection closes
 * first, it is dropped and counted (msgs_dropped; see pc_close()).
 *
 * Any time while the message is yours, also after its connection's DOWN
 * (the message keeps msg->conn allocated). Any thread, attached or not:
 * on the owning worker directly, from any other thread through the
 * worker's submission queue, which is never full (a sleeping worker is
 * woken). No lock, no allocation.
 *
 * Return: 0; -ENOTCONN when the connection is closing or closed (the
 * message is released); -EMSGSIZE when len > cap or more than the peer
 * accepts (a message of the large pool to a raw peer too), -EXDEV when
 * msg->conn was set to a connection of another worker, -EINVAL when the
 * data pointer was moved (in these three cases the message is still
 * yours).
 */
PC_API int pc_send(struct pc_msg *msg);

/**
 * typedef pc_call_fn - the completion of a pc_call().
 * @msg: yours from now on, never NULL: the response (type
 *       PC_MSG_RESPONSE) when @status is 0; otherwise the request given
 *       back as it was sent (data and len unchanged), to send again or
 *       to release.
 * @status: 0; -ETIMEDOUT (its deadline passed); -ECANCELED
 *          (pc_call_cancel()); -ENOTCONN (the connection closed first).
 * @arg: pc_call()'s @arg.
 *
 * Runs exactly once per call that pc_call() accepted (returned 0): in
 * handler mode on the connection's worker, in ring mode on the calling
 * thread, inside its pc_app_poll() (a call made on a worker, or on a thread
 * not attached to the engine, completes on the connection's worker). A
 * callback: keep it short, never block.
 */
typedef void (*pc_call_fn)(struct pc_msg *msg, int status, void *arg);

/**
 * pc_call - send @msg as a request and have @done run with its outcome.
 * @msg: as for pc_send().
 * @done: the completion, or NULL: the response then arrives as a message
 *        of type PC_MSG_RESPONSE with the same req_id (on_msg or
 *        pc_app_poll()), with no deadline and no cancel.
 * @arg: for @done.
 * @timeout_us: with @done, a deadline in microseconds from now; 0 for
 *              none. It never fires before its time (CLOCK_MONOTONIC),
 *              and fires after it within one turn of the worker's loop
 *              (and about 0.1% of @timeout_us, the margin of the worker's
 *              tick clock; a hybrid worker sleeps no longer than
 *              its earliest deadline), wherever the request is: waiting for
 *              the window, for credits, or sent.
 * @req_id: filled with the request id (for pc_call_cancel()), or NULL.
 *
 * A connection has at most window requests in flight, exactly, those that
 * timed out or were cancelled included: each keeps its place until its
 * late response arrives (dropped, counted in late_responses) or the
 * connection closes. Beyond, a call waits in the engine, in order, its
 * deadline running, until a place comes free: an application never has
 * to wait for the window itself. pc_call() refuses with -EAGAIN only when
 * max_calls calls of the connection are already accepted and not ended
 * (their completion ran, or their response was delivered): that is the
 * application's own backpressure. When max_unanswered places of the
 * window are held by calls whose response never came, the connection
 * closes, its DOWN saying so. A response whose req_id is not in flight on
 * its connection is a protocol error: the connection closes (the reason
 * logged), the response is not delivered.
 *
 * Request ids are unique in the engine while their call can still be
 * answered, and opaque: they are not consecutive.
 *
 * Any thread that may send @msg (pc_send()); the completion runs as
 * pc_call_fn says. No allocation, no lock; from a thread other than the
 * owning worker, one atomic compare-and-swap on the connection and one
 * exchange on the worker's submission queue.
 *
 * Return: 0 (the call is taken and ends exactly once: @done runs, or
 * without @done the response is delivered unless the connection closes);
 * -EAGAIN when max_calls calls of the connection have not ended (the
 * message is still yours); -ENOTCONN when the connection is closing or
 * closed (the message is released); -EMSGSIZE, -EXDEV, -EINVAL as for
 * pc_send() (the message is still yours); -EINVAL also for a deadline
 * without @done, or @done on a raw peer's connection (the message is
 * still yours).
 */
PC_API int pc_call(struct pc_msg *msg, pc_call_fn done, void *arg, uint64_t timeout_us,
		   uint64_t *req_id);

/**
 * pc_call_cancel - ask for a call to complete now with status -ECANCELED.
 * @conn: the connection the call went on (a handle the caller may use).
 * @req_id: the id pc_call() gave.
 *
 * Any thread. Asynchronous: the call still completes exactly once, with
 * status -ECANCELED when the cancel reaches the worker first, with its
 * response (or status -ETIMEDOUT or status -ENOTCONN) when that came
 * first. A cancel for an id not
 * in flight, cancelled already, or of a call made without a completion,
 * does nothing. The call's own buffer carries the cancel to the worker:
 * it needs no buffer and no ring slot, and cannot fail for lack of them.
 * No allocation, no lock: one compare-and-swap on the request's buffer
 * and one exchange on the worker's submission queue.
 *
 * A request that went by rendezvous (above msg_size) comes back to the
 * completion once the peer can no longer read it: the peer is asked to
 * leave it unread and answers at once when it had not started (one round
 * trip); one that is reading it finishes first.
 *
 * Return: 0; -ENOTCONN when the connection is closing or closed (its
 * calls complete with status -ENOTCONN anyway).
 */
PC_API int pc_call_cancel(struct pc_conn *conn, uint64_t req_id);

/**
 * pc_reply - answer a request in place: @req's buffer carries the response.
 * @req: a received PC_MSG_REQUEST; write the response into its data (up to
 *       cap bytes) and set len first. The data pointer must not move.
 *       Or a response built in a buffer of its own (a response larger
 *       than the request's cap: pc_msg_alloc_size() on the request's
 *       connection): type PC_MSG_RESPONSE and req_id the request's; the
 *       request is then the caller's to release.
 *
 * The same threads as pc_send().
 *
 * Return: as pc_send(): 0; -ENOTCONN (the message is released); -EMSGSIZE,
 * -EXDEV; -EINVAL when @req is neither a request nor a response, or its
 * data pointer was moved (in these three cases the message is still
 * yours).
 */
PC_API int pc_reply(struct pc_msg *req);

/**
 * pc_msg_wrap - a message of the application's own registered memory,
 * sent without a copy.
 * @conn: the connection it will be sent on, not closing.
 * @mem: a handle from pc_mem_reg() on @conn's device (it grants the
 *       memory-window binding that a zero-copy send needs).
 * @addr: the payload, inside @mem's registration.
 * @len: its bytes, 1 .. the peer's max_msg_size (pc_conn_info()'s
 *       peer_max_large; peer_max_msg when at most msg_size).
 * @released: runs once on @conn's worker when pollcore is done with the
 *            memory (pc_release_fn), or NULL.
 * @arg: for @released.
 *
 * Any thread, no attach needed; no lock, no allocation, no system call.
 * The message (data @addr, len and cap @len, type PC_MSG_ONEWAY) is
 * yours like one from pc_msg_alloc_size(): give it with pc_send(),
 * pc_call() or pc_reply() (set type and req_id for a response), or back
 * with pc_msg_release(); len may be lowered, data must not move. Above
 * msg_size it goes by rendezvous, the peer reading @addr itself through a
 * memory window bound for that one read on @conn's QP; at most msg_size,
 * as one SEND that gathers the header and @addr. Either way the bytes are
 * never copied: do not write them until @released ran.
 *
 * Return: the message, or NULL with errno set (pc_last_error() says
 * why): EINVAL (no @mem, @addr or @len), EXDEV (@mem is not a
 * registration on @conn's device), ERANGE (@addr, @len outside it),
 * EMSGSIZE (beyond the engine's or the peer's maximum), EOPNOTSUPP (a raw
 * peer's connection, or no rendezvous on the device: max_msg_size equal
 * to msg_size, or no type-2 memory windows), ENOBUFS (128 application
 * buffers of the worker in use), ENOTCONN (@conn closing). @released
 * never runs then.
 */
PC_API struct pc_msg *pc_msg_wrap(struct pc_conn *conn, void *mem, void *addr, size_t len,
				  pc_release_fn released, void *arg);

/**
 * pc_msg_release - give a received (or unsent) message back.
 * @msg: the message.
 *
 * Any thread that holds the message, attached or not: on the owning worker
 * directly, from another thread through its submission queue, which is
 * never full.
 *
 * Return: 0; it cannot fail.
 */
PC_API int pc_msg_release(struct pc_msg *msg);

/**
 * pc_rdma - post a one-sided operation on @conn.
 * @conn: connection (RDMA READ needs the peer to allow it).
 * @op: operation; must stay valid until op->done is called.
 *
 * Operations and messages on one connection go out in the order they were
 * submitted. What the owning worker submits in one callback goes in one
 * chain with one doorbell: a WRITE of a read's data and the pc_send() of
 * its completion after it, the peer seeing the data placed before the
 * message arrives (RC ordering).
 *
 * Every outcome is reported once: when 0 is returned, through op->done
 * (status -ENOTCONN when the operation reaches a connection that is
 * closing: on the owning worker always so, from another thread when it
 * started closing after the call; status -ECANCELED when the connection
 * closed while the operation was accepted but not done; on the owning
 * worker, done may run before pc_rdma() returns); otherwise op->done is
 * never called.
 *
 * Any thread that may use @conn, attached or not: through the worker's
 * submission queue, which is never full.
 *
 * Return: 0; -EINVAL (no done, a code other than PC_OP_WRITE and
 * PC_OP_READ, or len 0); -ENOTCONN (from a thread other than the owning
 * worker: the connection is closing or closed).
 */
PC_API int pc_rdma(struct pc_conn *conn, struct pc_op *op);

/**
 * pc_mem_reg - register application memory on the device of @conn.
 * @conn: a connection of the device, not closing (see "Lifetime" above).
 * @addr: memory.
 * @len: bytes.
 * @access: least access needed (IBV_ACCESS_*).
 * @lkey: filled.
 * @rkey: filled.
 *
 * Any thread, the handle's rule above applying to @conn: an app thread, or
 * the worker in a callback (on_conn(UP), for memory used only while the
 * device has connections). On a device with rendezvous it adds
 * IBV_ACCESS_MW_BIND (for pc_msg_wrap(); the peer reaches the memory only
 * through a window bound for one message). It is a syscall (ibv_reg_mr() on the device's
 * protection domain, which verbs make thread-safe): never per message.
 * The registration belongs to the device, not to @conn, and stays valid
 * after @conn closes; released by pc_mem_dereg(), which must happen before
 * the device can be removed (docs/reliability.md).
 *
 * Return: an opaque handle, or NULL with errno set: ENOTCONN when @conn
 * is closing or closed; ENOMEM; else ibv_reg_mr()'s errno, passed on (such
 * as EINVAL, EFAULT, ENOMEM; EIO when it sets none), pc_last_error()
 * naming the device.
 */
PC_API void *pc_mem_reg(struct pc_conn *conn, void *addr, size_t len, int access, uint32_t *lkey,
			uint32_t *rkey);

/**
 * pc_engine_mem_reg - register application memory on an engine's devices,
 * without a connection.
 * @e: engine.
 * @device: one of its devices by name, or NULL for every device.
 * @addr: memory.
 * @len: bytes.
 * @access: least access needed (IBV_ACCESS_*).
 *
 * Any thread but a worker's, before or while connections come and go (a
 * system call per device: ibv_reg_mr() on each device's protection
 * domain; never per message). The handle serves every connection of the
 * devices it covers: pc_msg_wrap(), on_large's struct pc_large_buf, and
 * pc_mem_keys() for the keys of a pc_op on a given connection. As with
 * pc_mem_reg(), a device with rendezvous gets IBV_ACCESS_MW_BIND added.
 * Released by pc_mem_dereg(), which must come before a removed device can
 * go (docs/reliability.md).
 *
 * Return: a handle, or NULL with errno set: EINVAL (no engine, address or
 * length), ENODEV (no such device in @e, or it was removed), ENOMEM, or
 * ibv_reg_mr()'s errno, passed on (such as EINVAL, EFAULT, ENOMEM; EIO
 * when it sets none), pc_last_error() naming the device.
 */
PC_API void *pc_engine_mem_reg(struct pc_engine *e, const char *device, void *addr, size_t len,
			       int access);

/**
 * pc_mem_keys - the keys of a registration on a connection's device.
 * @handle: from pc_mem_reg() or pc_engine_mem_reg().
 * @conn: a connection (a handle the caller may use).
 * @lkey: filled (for a pc_op's @lkey), or NULL.
 * @rkey: filled (for a peer's RDMA, if @access granted it), or NULL.
 *
 * Any thread; no system call.
 *
 * Return: 0; -EINVAL (not a handle), -ENOTCONN (@conn closing or closed),
 * -EXDEV (@handle has no registration on @conn's device).
 */
PC_API int pc_mem_keys(const void *handle, const struct pc_conn *conn, uint32_t *lkey,
		       uint32_t *rkey);

/**
 * pc_mem_dereg - undo pc_mem_reg() or pc_engine_mem_reg().
 * @handle: the handle, or NULL.
 *
 * Any thread, once no posted work uses the memory (a system call per
 * device it covers), and before pc_engine_destroy(): the engine frees its
 * devices' protection domains, which fails while memory is registered on
 * them. On a device removed under the engine, the removal completes only
 * once this ran.
 */
PC_API void pc_mem_dereg(void *handle);

/**
 * pc_app_attach - bind the calling thread to application slot @idx.
 * @e: engine (either handoff mode).
 * @idx: 0 .. app_threads - 1; connections are spread over the slots.
 *
 * A thread may attach to one slot of each of up to 4 engines. Any thread
 * that calls pc_msg_alloc() must be attached (in handler mode too: the
 * slot holds its stock of send buffers). An application thread, not a
 * worker. Detach it (pc_app_detach()) before pc_engine_destroy(): the
 * binding is the thread's own, and the engine cannot undo it.
 *
 * Return: 0, -EINVAL (bad index), -EBUSY (slot taken), -EALREADY (this
 * thread is attached to this engine already), -ENOSPC (too many engines).
 */
PC_API int pc_app_attach(struct pc_engine *e, unsigned int idx);

/**
 * pc_app_detach - undo pc_app_attach(): the calling thread leaves its slot.
 * @e: the engine the thread is attached to.
 *
 * The attached thread itself. The slot, its stock of send buffers and its
 * handoff ring stay for the next thread that attaches to it: completions of
 * calls still running, and messages not yet taken, come to that thread's
 * pc_app_poll(). Detach once your calls have ended and you took your
 * messages; not from inside a completion.
 *
 * Return: 0; -EINVAL without @e; -EPERM when the thread is not attached
 * to @e.
 */
PC_API int pc_app_detach(struct pc_engine *e);

/**
 * pc_app_poll - take received messages for this application thread.
 * @e: ring-mode engine the thread is attached to.
 * @msgs: filled with up to @n messages.
 * @n: capacity of @msgs.
 *
 * Attached application thread. Per connection, messages come in order.
 * Poll while you send: received messages you do not take hold credits and
 * buffers, which is how a slow application slows its peers. The
 * completions of this thread's calls (pc_call() with a completion) run
 * here, before it returns; their messages are not among @msgs.
 *
 * Return: the number of messages in @msgs (0 when none); -EPERM when the
 * thread is not attached to @e; -EINVAL when @e is in handler mode.
 */
PC_API int pc_app_poll(struct pc_engine *e, struct pc_msg **msgs, unsigned int n);

/**
 * pc_conn_get - take a reference to a connection handle.
 * @conn: a handle the caller may use now: one it owns a reference to, the
 *        one on_conn() or on_msg() (msg->conn) was given, or one met in
 *        pc_engine_for_each_conn().
 *
 * Any thread. While the reference is held, @conn stays allocated, past
 * its DOWN and past pc_engine_destroy(): calls that name it are safe, and
 * those that need a live connection fail, saying it is not connected, once
 * it is closing. pc_conn_user() and pc_conn_info() (its final counts) keep
 * working.
 *
 * Return: @conn.
 */
PC_API struct pc_conn *pc_conn_get(struct pc_conn *conn);

/**
 * pc_conn_put - drop a reference taken with pc_conn_get() or returned by
 * pc_connect().
 * @conn: the handle, or NULL.
 *
 * Any thread, also after pc_engine_destroy(). The last reference frees the
 * handle; it never closes the connection (pc_close() does).
 */
PC_API void pc_conn_put(struct pc_conn *conn);

/**
 * pc_conn_user - the @user pointer given at pc_connect() (or set with
 * pc_conn_set_user()).
 * @conn: connection.
 *
 * Return: the pointer.
 */
PC_API void *pc_conn_user(const struct pc_conn *conn);

/**
 * pc_conn_set_user - set the connection's user pointer.
 * @conn: connection.
 * @user: pointer.
 *
 * Owning worker (e.g. in on_conn), or before traffic starts.
 */
PC_API void pc_conn_set_user(struct pc_conn *conn, void *user);

/* Per-connection counters and identity (pc_conn_info()). */
struct pc_conn_info {
	char device[64];
	uint32_t qp_num;
	int worker;
	unsigned int app_slot;
	bool raw;		/* the application owns the wire protocol (on_request) */
	uint64_t msgs_sent;
	uint64_t msgs_recv;
	uint64_t bytes_sent;
	uint64_t bytes_recv;
	uint64_t credit_stalls;	/* sends that waited for credits */
	uint64_t sq_stalls;	/* sends that waited for send-queue slots */
	uint64_t msgs_dropped;	/* sends accepted (0 returned) that the close dropped */
	uint64_t rnr_errors;	/* sends failed: receiver not ready, retries exhausted */
	uint64_t retry_errors;	/* sends failed: transport retries exhausted */
	uint64_t call_timeouts;	/* calls completed with -ETIMEDOUT */
	uint64_t call_cancels;	/* calls completed with -ECANCELED */
	uint64_t late_responses;	/* responses to those, dropped when they came */
	uint32_t backlog;	/* messages waiting now */
	uint32_t inflight_req;	/* requests awaiting a response */
	uint32_t held;		/* buffers of this connection held by the app */
	uint32_t peer_max_msg;	/* largest payload the peer takes in one buffer; 0: raw peer */
	uint32_t peer_window;	/* most credits the peer grants at once; 0: raw peer */
	uint32_t peer_max_large;	/* largest message the peer takes by rendezvous; 0: raw peer */
	uint32_t recv_depth;	/* raw: its receive queue's depth; 0: pollcore peer (SRQ) */
	uint32_t recv_size;	/* raw: bytes one receive holds */
	/* raw: the private data of its connect request, as on_request saw it (first bytes) */
	uint8_t peer_data_len;
	uint8_t peer_data[PC_CONNECT_DATA_MAX];
};

/**
 * pc_conn_info - sample a connection's identity and counters.
 * @conn: a handle the caller may use (see "Lifetime" above).
 * @info: filled in (counters are relaxed snapshots).
 *
 * Any thread. From DOWN on, the final counts, msgs_dropped included.
 * The peer's limits are known from UP on (pc_connect() has returned, or
 * on_conn(UP) runs): a message from pc_msg_alloc() longer than
 * @peer_max_msg is refused by pc_send(); one from pc_msg_alloc_size() above
 * the engine's msg_size goes by rendezvous, up to @peer_max_large (the
 * peer's max_msg_size; equal to @peer_max_msg when it has no rendezvous).
 */
PC_API void pc_conn_info(const struct pc_conn *conn, struct pc_conn_info *info);

/* Per-worker counters (pc_engine_stats()). */
struct pc_worker_stats {
	char name[32];		/* thread name, pc-w<N>-<device> */
	int pu;			/* PU it is bound to, -1 if unbound */
	int numa_node;
	uint32_t cq_single_threaded;	/* 1: CQ created IBV_CREATE_CQ_ATTR_SINGLE_THREADED */
	uint32_t thread_domain;	/* 1: QPs and SRQ on a parent domain with a thread domain */
	uint32_t idle_policy;	/* enum pc_idle as asked for (PC_IDLE_AUTO by default) */
	uint32_t busy_poll;	/* what applies: 1 busy-polls when idle, 0 sleeps on events */
	uint64_t loops;
	uint64_t polls;
	uint64_t empty_polls;
	uint64_t completions;
	uint64_t wrs_posted;
	uint64_t doorbells;	/* ibv_post_send calls; wrs_posted / doorbells = batching */
	uint64_t srq_posted;
	uint64_t srq_doorbells;
	uint64_t srq_limit_events;	/* IBV_EVENT_SRQ_LIMIT_REACHED handled */
	uint64_t rx_msgs;
	uint64_t tx_msgs;
	uint64_t handoff_full;	/* worker->app ring was full (delivery delayed, not dropped) */
	uint64_t submit_full;	/* always 0: the submission queue is never full (kept for the layout) */
	uint64_t credit_stalls;
	uint64_t credit_writes;	/* grants sent as their own RDMA WRITE (one-way traffic) */
	uint64_t credit_piggybacks; /* grants that rode in a message header instead */
	uint64_t sleeps;	/* hybrid idle: times it slept */
	uint64_t sleep_ns;	/* and for how long */
	uint64_t wakeups_cq;	/* woken by a completion event */
	uint64_t wakeups_submit;/* woken by the eventfd */
	uint64_t wakeups_poller;	/* woken by a poller's fd (pollcore/poller.h) */
	uint64_t poller_work;	/* what the pollers returned, summed */
	uint64_t poller_errors;	/* poller calls that returned a negative errno */
	uint64_t wc_errors;	/* failed completions, flushes of closing QPs excluded */
	uint64_t stray_completions;	/* completions for a QP no longer known, or for WRs already retired */
	uint64_t poll_errors;	/* ibv_poll_cq failures (logged once) */
	uint64_t msgs_dropped;	/* accepted sends not delivered: their conn closed first */
	uint64_t rndv_sent;	/* messages sent by rendezvous (their descriptors) */
	uint64_t rndv_recv;	/* messages received by rendezvous (read and delivered) */
	uint32_t conns;
	uint32_t rx_held;	/* receive buffers held by the application */
	uint32_t tx_held;	/* send buffers allocated and not yet sent */
	uint32_t srq_outstanding;	/* receive buffers posted on the SRQ now */
	uint32_t credits_out;	/* credits granted to peers, not yet used (<= srq_outstanding) */
	uint32_t window;	/* what each credited connection may hold now: its share of the SRQ */
	uint32_t large_used_kib;	/* large-message pool in use, KiB: sent, read or held */
	uint32_t large_waiting;	/* descriptors received, waiting for room in the pool */
};

/*
 * The counters of struct pc_worker_stats, in order, for code that walks
 * them (pollcore-stat --json): X64(name) for each uint64_t, X32(name) for
 * each uint32_t.
 */
#define PC_WORKER_STATS_FIELDS(X64, X32) \
	X32(cq_single_threaded) X32(thread_domain) X32(idle_policy) X32(busy_poll) \
	X64(loops) X64(polls) X64(empty_polls) X64(completions) X64(wrs_posted) X64(doorbells) \
	X64(srq_posted) X64(srq_doorbells) X64(srq_limit_events) X64(rx_msgs) X64(tx_msgs) \
	X64(handoff_full) X64(submit_full) X64(credit_stalls) X64(credit_writes) \
	X64(credit_piggybacks) X64(sleeps) X64(sleep_ns) \
	X64(wakeups_cq) X64(wakeups_submit) X64(wakeups_poller) X64(poller_work) \
	X64(poller_errors) X64(wc_errors) X64(stray_completions) \
	X64(poll_errors) X64(msgs_dropped) X64(rndv_sent) X64(rndv_recv) \
	X32(conns) X32(rx_held) X32(tx_held) X32(srq_outstanding) X32(credits_out) X32(window) \
	X32(large_used_kib) X32(large_waiting)

/**
 * pc_engine_for_each_conn - visit every live connection.
 * @e: engine.
 * @fn: called with each connection; must not block or close it.
 * @arg: for @fn.
 *
 * Any thread (tools, stats). Walks the rculfhash inside an RCU read-side
 * critical section; registers the calling thread with urcu-qsbr for the
 * walk if it is not registered already.
 *
 * Return: the number of connections visited (0 without @e or @fn).
 */
PC_API unsigned int pc_engine_for_each_conn(struct pc_engine *e,
					    void (*fn)(struct pc_conn *c, void *arg), void *arg);

/**
 * pc_engine_nworkers - number of workers.
 * @e: engine.
 *
 * Return: the count (0 without @e).
 */
PC_API unsigned int pc_engine_nworkers(const struct pc_engine *e);

/**
 * pc_engine_stats - sample one worker's counters.
 * @e: engine.
 * @worker: index.
 * @st: filled (relaxed snapshots).
 *
 * Any thread.
 *
 * Return: 0, or -EINVAL (no @e or @st, or no worker @worker).
 */
PC_API int pc_engine_stats(const struct pc_engine *e, unsigned int worker,
			   struct pc_worker_stats *st);

/**
 * pc_engine_print_stats - one line per worker on @f.
 * @e: engine.
 * @f: stream, e.g. stdout.
 *
 * Any thread (stats are relaxed snapshots).
 *
 * Return: 0, or -EINVAL without @e or @f (an engine that could not be
 * created prints nothing, and nothing crashes).
 */
PC_API int pc_engine_print_stats(const struct pc_engine *e, FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* POLLCORE_ENGINE_H */
