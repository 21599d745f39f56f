/* SPDX-License-Identifier: MIT */
/*
 * pollcore/verbs.h - device handle, QP state transitions and readable
 * verbs errors.
 *
 * A struct pc_dev is one opened verbs device plus the port and GID index
 * pollcore uses on it, and one protection domain. QP state transitions are
 * not part of the API: the engine's connections are wired by rdma_cm, and
 * the loopback pair below wires itself. Every error that
 * involves a device names it as "<dev> port <p> gid <g>", and every failed
 * work completion also names the QP number, the opcode and
 * ibv_wc_status_str().
 *
 * Threads: pc_dev_open()/pc_dev_close() from a control thread; the rest
 * from any thread (they only read the handle).
 */
#ifndef POLLCORE_VERBS_H
#define POLLCORE_VERBS_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <pollcore/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One opened device; read-only after pc_dev_open(). */
struct pc_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr dev_attr;
	struct ibv_port_attr port_attr;
	union ibv_gid gid;
	char name[64];
	uint8_t port;
	int gid_index;
	bool mlx5dv;	/* mlx5dv_is_supported() on this device */
	bool own_ctx;	/* false when borrowed via pc_dev_from_context() */
};

/**
 * pc_dev_open - open a verbs device, query it and allocate a PD.
 * @name: device name (e.g. "mlx5_0", "rxe0"), or NULL for the first one.
 * @port: port number (1-based); 0 means 1.
 * @gid_index: GID index to use for RoCE addressing; -1 picks 0.
 *
 * Control thread. The port must be ACTIVE.
 *
 * Return: the handle, or NULL with errno set and pc_last_error() explaining
 * which: ENODEV (no such device, no device at all, or @port beyond its
 * ports), ENETDOWN (port not active), EINVAL (@gid_index beyond the GID
 * table), ENOMEM, EIO (a verbs call failed without an errno); other errno
 * values of verbs are passed on.
 */
PC_API struct pc_dev *pc_dev_open(const char *name, uint8_t port, int gid_index);

/**
 * pc_dev_close - free the PD and close the device.
 * @dev: handle from pc_dev_open(), or NULL.
 *
 * Control thread, after every QP, CQ, SRQ and MR on it is gone.
 */
PC_API void pc_dev_close(struct pc_dev *dev);

/**
 * pc_dev_from_context - wrap an ibv_context opened elsewhere (rdma_cm).
 * @ctx: verbs context, e.g. cm_id->verbs; not closed by pc_dev_close().
 * @port: port number (1-based).
 *
 * Control thread. Allocates a PD and queries the device and port; the GID
 * index is left at 0 (rdma_cm resolves addressing itself).
 *
 * Return: the handle, or NULL with errno set, as pc_dev_open(): ENODEV
 * (@port beyond the device's ports), ENETDOWN, EINVAL (an empty GID table),
 * ENOMEM, EIO, or verbs' errno.
 */
PC_API struct pc_dev *pc_dev_from_context(struct ibv_context *ctx, uint8_t port);

/**
 * pc_wc_opcode_str - name of a work-completion opcode.
 * @op: opcode.
 *
 * Return: a static string such as "SEND" or "RDMA_WRITE".
 */
PC_API const char *pc_wc_opcode_str(enum ibv_wc_opcode op);

/**
 * pc_wc_error - explain a failed work completion.
 * @dev: device of the CQ the completion came from (may be NULL).
 * @wc: the completion, whose status is not IBV_WC_SUCCESS.
 * @what: what the caller was doing, e.g. "echo reply".
 *
 * Sets pc_last_error() to a line naming the device, port, GID index, QP
 * number, opcode, ibv_wc_status_str() and vendor error, and logs it.
 * Flush errors (IBV_WC_WR_FLUSH_ERR) are logged at debug level only: they
 * are the expected end of a closing QP, not news.
 *
 * Any thread; not on the success path.
 *
 * Return: -ECANCELED for IBV_WC_WR_FLUSH_ERR, -ECONNRESET for
 * IBV_WC_RETRY_EXC_ERR and IBV_WC_RNR_RETRY_EXC_ERR, -EIO for the rest
 * (0 for IBV_WC_SUCCESS).
 */
PC_API int pc_wc_error(const struct pc_dev *dev, const struct ibv_wc *wc, const char *what);

/**
 * pc_poll_wait - poll a CQ until @n completions arrived or @timeout_ms.
 * @cq: completion queue.
 * @wc: array of at least @n entries.
 * @n: completions wanted.
 * @timeout_ms: how long to busy-poll before giving up.
 *
 * For setup code, tools and tests; the workers have their own loop. Any
 * thread; it busy-polls, for up to @timeout_ms.
 *
 * Return: the number polled (< @n on timeout), or -EIO when ibv_poll_cq()
 * failed.
 */
PC_API int pc_poll_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms);

/*
 * Two RC QPs on one device connected to each other: the smallest real data
 * path, used by self-tests, pollcore-roundtrip and diagnostics. Each side
 * has its own CQ. Single-threaded.
 */
struct pc_loopback {
	struct pc_dev *dev;
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
};

/**
 * pc_loopback_create - create and connect two RC QPs (INIT -> RTR -> RTS).
 * @dev: opened device.
 * @lb: filled on success.
 * @depth: send and receive queue depth (and CQ size) of each QP.
 * @access: remote access flags granted by both QPs.
 *
 * The pair's one thread (setup); system calls.
 *
 * Return: 0 or a negative errno, with pc_last_error() set: the errno of the
 * verbs call that failed (creating a CQ or QP, moving a QP to INIT, RTR or
 * RTS), e.g. -EINVAL (@depth beyond the device's) or -ENOMEM; -EIO when it
 * failed without one.
 */
PC_API int pc_loopback_create(struct pc_dev *dev, struct pc_loopback *lb, uint32_t depth,
			      int access);

/**
 * pc_loopback_destroy - destroy the QPs and CQs of @lb.
 * @lb: from pc_loopback_create(); zeroed afterwards.
 */
PC_API void pc_loopback_destroy(struct pc_loopback *lb);

/* What pc_loopback_selftest() did. */
struct pc_selftest_stats {
	uint64_t sends;		/* SEND completions on qp[0] */
	uint64_t recvs;		/* RECV completions on qp[1], each byte-checked */
	uint64_t writes;	/* RDMA WRITEs from qp[0] into qp[1]'s buffer */
	uint64_t reads;		/* RDMA READs by qp[0] back from that buffer */
	uint64_t bytes_checked;
	double seconds;
};

/**
 * pc_loopback_selftest - move data through @lb and check every byte.
 * @lb: connected loopback pair, depth >= 1.
 * @count: number of SEND/RECV messages and of RDMA WRITE+READ rounds.
 * @size: message size in bytes (>= 8).
 * @st: filled with what was done.
 *
 * Sends @count sequence-numbered messages from qp[0] to qp[1] and checks
 * each received payload; then RDMA-WRITEs @count patterns into a
 * remote-writable buffer of qp[1] and RDMA-READs each back into a separate
 * buffer, comparing both. Every completion must be IBV_WC_SUCCESS. Send
 * buffers are registered with local access only.
 *
 * The pair's one thread; it busy-polls each completion, for up to 10 s.
 *
 * Return: 0; -EINVAL (@size below 8 or @count 0); -ENOMEM; -EBADMSG on a
 * data mismatch; -ETIMEDOUT when a completion does not arrive; -EPROTO for
 * a completion of another opcode or WR; a failed completion as
 * pc_wc_error() maps it: -ECANCELED, -ECONNRESET or -EIO (also a verbs
 * call that failed without an errno); or a verbs call's errno.
 * pc_last_error() says which.
 */
PC_API int pc_loopback_selftest(struct pc_loopback *lb, uint32_t count, uint32_t size,
				struct pc_selftest_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* POLLCORE_VERBS_H */
