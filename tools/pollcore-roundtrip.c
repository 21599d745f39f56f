// SPDX-License-Identifier: MIT
/*
 * pollcore-roundtrip - the first real data path: two RC QPs on one device,
 * SEND/RECV, RDMA WRITE and RDMA READ, every byte and completion checked.
 *
 *   pollcore-roundtrip [--device NAME] [--ib-port N] [--gid-index G] [--count N]
 *                      [--size BYTES] [--json]
 */
#include <pollcore/verbs.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

#define PROG "pollcore-roundtrip"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-d|--device NAME] [--ib-port N] [--gid-index G] [-n|--count N]\n"
		"                          [-s|--size BYTES] [-j|--json]\n"
		"  -d, --device NAME  the RDMA device (default: the first one)\n"
		"  --ib-port N        its port, default 1\n"
		"  --gid-index G      the GID index, default 0\n"
		"  -n, --count N      round trips of each kind, default 10000\n"
		"  -s, --size BYTES   message size (k, m suffixes), at least 8, default 64\n"
		"  -j, --json         the figures as one JSON object\n"
		"  -h, --help         this text\n"
		"Exit: 0 every completion and byte checked, 1 failed, 2 bad usage.\n");
}

static const struct cli_alias aliases[] = {
	{ "--port", "--ib-port" }, /* --port is the rdma_cm port in the other tools */
	{ NULL },
};

enum { O_IBPORT = CLI_TOOL_FIRST, O_GID };

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_OPT_DEVICE,
		{ "ib-port", required_argument, NULL, O_IBPORT },
		{ "gid-index", required_argument, NULL, O_GID },
		{ "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		CLI_OPT_JSON,
		CLI_OPT_HELP,
		{ 0 },
	};
	uint32_t port = 1, gid = 0, count = 10000, size = 64;
	struct cli_common c = { 0 };
	struct pc_selftest_stats st;
	struct pc_loopback lb;
	struct cli_json j;
	struct pc_dev *dev;
	double rate;
	int o, ret;

	cli_init(PROG, usage);
	cli_aliases(argc, argv, aliases);
	while ((o = getopt_long(argc, argv, ":d:n:s:jh", opts, NULL)) != -1) {
		switch (o) {
		case O_IBPORT: if (cli_u32("--ib-port", optarg, 1, 255, &port)) return 2; break;
		case O_GID: if (cli_u32("--gid-index", optarg, 0, 65535, &gid)) return 2; break;
		case 'n': if (cli_u32("--count", optarg, 1, UINT32_MAX, &count)) return 2; break;
		case 's': if (cli_size32("--size", optarg, 8, 1u << 30, &size)) return 2; break;
		default:
			if (cli_other_opt(&c, o, NULL, argv))
				return CLI_EXIT_USAGE;
		}
	}
	if (optind != argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]);

	dev = pc_dev_open(c.device, (uint8_t)port, (int)gid);
	if (!dev) {
		fprintf(stderr, PROG ": cannot open %s (port %u, gid index %u): %s\n",
			c.device ? c.device : "the first RDMA device", port, gid, pc_last_error());
		return 1;
	}
	ret = pc_loopback_create(dev, &lb, 64, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (ret) {
		fprintf(stderr, PROG ": %s: cannot connect two QPs: %s\n", dev->name, pc_last_error());
		goto out_dev;
	}
	if (!c.json)
		printf("device %s port %u gid %d: qp 0x%x <-> qp 0x%x (RC, mtu %d, %s path)\n",
		       dev->name, dev->port, dev->gid_index, lb.qp[0]->qp_num, lb.qp[1]->qp_num,
		       128 << dev->port_attr.active_mtu, dev->mlx5dv ? "mlx5dv" : "generic verbs");
	ret = pc_loopback_selftest(&lb, count, size, &st);
	rate = st.seconds > 0 ? (double)(st.recvs + st.writes + st.reads) / st.seconds : 0.0;
	if (c.json) {
		cli_json_begin(&j);
		cli_json_string(&j, "device", dev->name);
		cli_json_u64(&j, "ib_port", dev->port);
		cli_json_u64(&j, "gid_index", (uint64_t)dev->gid_index);
		cli_json_u64(&j, "size", size);
		cli_json_u64(&j, "send_recv", st.recvs);
		cli_json_u64(&j, "rdma_write", st.writes);
		cli_json_u64(&j, "rdma_read", st.reads);
		cli_json_u64(&j, "bytes_checked", st.bytes_checked);
		cli_json_num(&j, "seconds", st.seconds);
		cli_json_num(&j, "rate", rate);
		cli_json_string(&j, "check", ret ? "failed" : "ok");
		cli_json_end(&j);
	} else {
		printf("%llu SEND/RECV, %llu RDMA WRITE, %llu RDMA READ of %u bytes, %llu bytes "
		       "checked, in %.3f s (%.0f round trips/s)\n",
		       (unsigned long long)st.recvs, (unsigned long long)st.writes,
		       (unsigned long long)st.reads, size, (unsigned long long)st.bytes_checked,
		       st.seconds, rate);
		printf("%s\n", ret ? "FAILED" : "OK: every completion IBV_WC_SUCCESS, every byte equal");
	}
	pc_loopback_destroy(&lb);
out_dev:
	pc_dev_close(dev);
	return ret ? 1 : 0;
}
