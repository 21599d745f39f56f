// SPDX-License-Identifier: MIT
#include "verbs_pvt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc_config.h"
#if PC_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#include "log_pvt.h"
#endif

#define DEV_FMT "%s port %u gid %d"
#define DEV_ARGS(d) (d)->name, (d)->port, (d)->gid_index

static int dev_query(struct pc_dev *dev)
{
	int ret;

	ret = ibv_query_device(dev->ctx, &dev->dev_attr);
	if (ret)
		return set_error(pc_neg_errno(ret), "%s: ibv_query_device: %s", dev->name,
				    strerror(abs(pc_neg_errno(ret))));
	if (dev->port > dev->dev_attr.phys_port_cnt)
		return set_error(-ENODEV, "%s has %u ports, port %u asked", dev->name,
				    dev->dev_attr.phys_port_cnt, dev->port);
	ret = ibv_query_port(dev->ctx, dev->port, &dev->port_attr);
	if (ret)
		return set_error(pc_neg_errno(ret), DEV_FMT ": ibv_query_port: %s",
				    DEV_ARGS(dev), strerror(abs(pc_neg_errno(ret))));
	if (dev->port_attr.state != IBV_PORT_ACTIVE)
		return set_error(-ENETDOWN, DEV_FMT ": port is %s, not ACTIVE", DEV_ARGS(dev),
				    ibv_port_state_str(dev->port_attr.state));
	if (dev->gid_index >= dev->port_attr.gid_tbl_len)
		return set_error(-EINVAL, DEV_FMT ": GID table has %d entries", DEV_ARGS(dev),
				    dev->port_attr.gid_tbl_len);
	ret = ibv_query_gid(dev->ctx, dev->port, dev->gid_index, &dev->gid);
	if (ret)
		return set_error(pc_neg_errno(ret), DEV_FMT ": ibv_query_gid failed",
				    DEV_ARGS(dev));
#if PC_HAVE_MLX5DV
	dev->mlx5dv = mlx5dv_is_supported(dev->ctx->device);
#endif
	dev->pd = ibv_alloc_pd(dev->ctx);
	if (!dev->pd)
		return set_error(pc_neg_errno(-1), DEV_FMT ": ibv_alloc_pd: %s", DEV_ARGS(dev),
				    strerror(errno));
	pc_debug(DEV_FMT ": opened, %s verbs path", DEV_ARGS(dev),
		 dev->mlx5dv ? "mlx5dv" : "generic");
	return 0;
}

int dev_pick(struct ibv_device *const *devs, int n, const char *name)
{
	int i;

	if (n <= 0)
		return set_error(-ENODEV, "no RDMA device found (is a driver loaded? try ibv_devices)");
	if (!name)
		return 0;
	for (i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(devs[i]), name) == 0)
			return i;
	return set_error(-ENODEV, "RDMA device '%s' not found (%d present)", name, n);
}

struct pc_dev *pc_dev_open(const char *name, uint8_t port, int gid_index)
{
	struct ibv_device **list, *found;
	struct pc_dev *dev;
	int n = 0, i, ret;

	list = ibv_get_device_list(&n);
	i = dev_pick(list, list ? n : 0, name);
	if (i < 0) {
		ret = -i;
		goto err_list;
	}
	found = list[i];
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		ret = ENOMEM;
		goto err_list;
	}
	snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(found));
	dev->port = port ? port : 1;
	dev->gid_index = gid_index < 0 ? 0 : gid_index;
	dev->own_ctx = true;
	dev->ctx = ibv_open_device(found);
	if (!dev->ctx) {
		ret = errno ? errno : ENODEV;
		set_error(-ret, "%s: ibv_open_device: %s", dev->name, strerror(ret));
		goto err_dev;
	}
	ret = -dev_query(dev);
	if (ret)
		goto err_ctx;
	ibv_free_device_list(list);
	return dev;

err_ctx:
	ibv_close_device(dev->ctx);
err_dev:
	free(dev);
err_list:
	if (list)
		ibv_free_device_list(list);
	errno = ret;
	return NULL;
}

struct pc_dev *pc_dev_from_context(struct ibv_context *ctx, uint8_t port)
{
	struct pc_dev *dev = calloc(1, sizeof(*dev));
	int ret;

	if (!dev)
		return NULL;
	snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(ctx->device));
	dev->ctx = ctx;
	dev->port = port ? port : 1;
	ret = dev_query(dev);
	if (ret) {
		free(dev);
		errno = -ret;
		return NULL;
	}
	return dev;
}

void pc_dev_close(struct pc_dev *dev)
{
	if (!dev)
		return;
	if (dev->pd)
		ibv_dealloc_pd(dev->pd);
	if (dev->ctx && dev->own_ctx)
		ibv_close_device(dev->ctx);
	free(dev);
}

static int qp_modify(const struct pc_dev *dev, struct ibv_qp *qp, struct ibv_qp_attr *attr,
		     int mask, const char *to)
{
	int ret = ibv_modify_qp(qp, attr, mask);

	if (ret)
		return set_error(pc_neg_errno(ret), DEV_FMT " qp 0x%x: ibv_modify_qp to %s: %s",
				    DEV_ARGS(dev), qp->qp_num, to, strerror(ret > 0 ? ret : errno));
	return 0;
}

int qp_to_init(const struct pc_dev *dev, struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = dev->port,
		.qp_access_flags = access,
	};

	return qp_modify(dev, qp, &a,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
			 "INIT");
}

int qp_to_rtr(const struct pc_dev *dev, struct ibv_qp *qp, const struct qp_peer *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = dev->port_attr.active_mtu,
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn & 0xffffff,
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = {
				.dgid = peer->gid,
				.sgid_index = (uint8_t)dev->gid_index,
				.hop_limit = 1,
			},
			.port_num = dev->port,
		},
	};

	return qp_modify(dev, qp, &a,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
			 "RTR");
}

int qp_to_rts(const struct pc_dev *dev, struct ibv_qp *qp, uint32_t psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.sq_psn = psn & 0xffffff,
		.max_rd_atomic = 16,
	};

	return qp_modify(dev, qp, &a,
			 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
			 "RTS");
}

int qp_to_err(const struct pc_dev *dev, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	return qp_modify(dev, qp, &a, IBV_QP_STATE, "ERR");
}

int qp_to_reset(const struct pc_dev *dev, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	return qp_modify(dev, qp, &a, IBV_QP_STATE, "RESET");
}

const char *pc_wc_opcode_str(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_TSO: return "TSO";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "UNKNOWN";
	}
}

int pc_wc_error(const struct pc_dev *dev, const struct ibv_wc *wc, const char *what)
{
	int err;

	switch (wc->status) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		err = -ECANCELED;
		break;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		err = -ECONNRESET;
		break;
	default:
		err = -EIO;
	}
	/* Verbs leaves wc->opcode undefined on error; callers name the WR in @what. */
	return set_errorl(err == -ECANCELED ? PC_LOG_DEBUG : PC_LOG_ERR, err,
			     "%s port %u gid %d qp 0x%x: %s failed: %s (status %d, vendor_err 0x%x)",
			     dev ? dev->name : "?", dev ? dev->port : 0, dev ? dev->gid_index : -1,
			     wc->qp_num, what ? what : "work request", ibv_wc_status_str(wc->status),
			     wc->status, wc->vendor_err);
}

int pc_poll_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms)
{
	struct timespec start, now;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return set_error(-EIO, "ibv_poll_cq failed (%d)", r);
		got += r;
		if (r)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >
		    timeout_ms)
			break;
	}
	return got;
}
