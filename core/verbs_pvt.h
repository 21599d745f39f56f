/* SPDX-License-Identifier: MIT */
/*
 * Verbs internals, not installed: QP state transitions for the QPs pollcore
 * wires by hand (the loopback pair; the drain's move to ERR), and choosing
 * a device by name for pc_dev_open() and the engine.
 *
 * Threads: as pollcore/verbs.h.
 */
#ifndef PC_VERBS_PVT_H
#define PC_VERBS_PVT_H

#include <pollcore/verbs.h>

/* What one side of an RC connection tells the other (out of band). */
struct qp_peer {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t psn;
};

/**
 * qp_to_init - RESET -> INIT.
 * @dev: device the QP lives on.
 * @qp: the QP.
 * @access: remote access flags (IBV_ACCESS_REMOTE_*), the least needed.
 *
 * Return: 0 or a negative errno, with pc_last_error() naming dev and QP.
 */
int qp_to_init(const struct pc_dev *dev, struct ibv_qp *qp, int access);

/**
 * qp_to_rtr - INIT -> RTR towards @peer over RoCE/IB GID addressing.
 * @dev: device the QP lives on (port, GID index, active MTU).
 * @qp: the QP.
 * @peer: remote GID, QP number and initial PSN.
 *
 * Return: 0 or a negative errno, with pc_last_error() set.
 */
int qp_to_rtr(const struct pc_dev *dev, struct ibv_qp *qp, const struct qp_peer *peer);

/**
 * qp_to_rts - RTR -> RTS.
 * @dev: device the QP lives on.
 * @qp: the QP.
 * @psn: our initial send PSN (what the peer got as peer->psn).
 *
 * Return: 0 or a negative errno, with pc_last_error() set.
 */
int qp_to_rts(const struct pc_dev *dev, struct ibv_qp *qp, uint32_t psn);

/**
 * qp_to_err - move a QP to ERR so that its outstanding WRs flush.
 * @dev: device the QP lives on.
 * @qp: the QP.
 *
 * Return: 0 or a negative errno.
 */
int qp_to_err(const struct pc_dev *dev, struct ibv_qp *qp);

/*
 * qp_to_reset - move a QP to RESET: the device drops its work queues, so it
 * no longer reads or writes the memory of WRs that never completed, and
 * generates no completion for them. 0 or a negative errno (error set).
 */
int qp_to_reset(const struct pc_dev *dev, struct ibv_qp *qp);

/**
 * dev_pick - the device called @name among @n present.
 * @devs: the devices (from ibv_get_device_list(), or each context's ->device).
 * @n: their number (0 when there are none).
 * @name: verbs device name, or NULL for the first.
 *
 * Return: its index, or -ENODEV with pc_last_error() saying which device is
 * missing and how many are present.
 */
int dev_pick(struct ibv_device *const *devs, int n, const char *name);

#endif /* PC_VERBS_PVT_H */
