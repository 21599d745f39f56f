// SPDX-License-Identifier: MIT
/*
 * pollcore-roundtrip - the first real data path: two RC QPs on one device,
 * SEND/RECV, RDMA WRITE and RDMA READ, every byte and completion checked.
 *
 *   pollcore-roundtrip [--device NAME] [--port P] [--gid-index G] [--count N] [--size S]
 */
#include <pollcore/verbs.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: pollcore-roundtrip [--device NAME] [--port P] [--gid-index G] "
		   "[--count N] [--size S]\n");
}

static int parse_u32(const char *opt, const char *s, uint32_t min, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (*s == '\0' || *end != '\0' || v < min || v > UINT32_MAX) {
		fprintf(stderr, "pollcore-roundtrip: %s: '%s' is not a number >= %u\n", opt, s,
			min);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' },
		{ "gid-index", required_argument, NULL, 'g' },
		{ "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint32_t port = 1, gid = 0, count = 10000, size = 64;
	const char *name = NULL;
	struct pc_selftest_stats st;
	struct pc_loopback lb;
	struct pc_dev *dev;
	int c, ret;

	while ((c = getopt_long(argc, argv, "d:p:g:n:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': name = optarg; break;
		case 'p': if (parse_u32("--port", optarg, 1, &port)) return 2; break;
		case 'g': if (parse_u32("--gid-index", optarg, 0, &gid)) return 2; break;
		case 'n': if (parse_u32("--count", optarg, 1, &count)) return 2; break;
		case 's': if (parse_u32("--size", optarg, 8, &size)) return 2; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	dev = pc_dev_open(name, (uint8_t)port, (int)gid);
	if (!dev) {
		fprintf(stderr, "pollcore-roundtrip: cannot open %s (port %u, gid index %u): %s\n",
			name ? name : "the first RDMA device", port, gid, pc_last_error());
		return 1;
	}
	ret = pc_loopback_create(dev, &lb, 64, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (ret)
		goto out_dev;
	printf("device %s port %u gid %d: qp 0x%x <-> qp 0x%x (RC, mtu %d, %s path)\n", dev->name,
	       dev->port, dev->gid_index, lb.qp[0]->qp_num, lb.qp[1]->qp_num,
	       128 << dev->port_attr.active_mtu, dev->mlx5dv ? "mlx5dv" : "generic verbs");
	ret = pc_loopback_selftest(&lb, count, size, &st);
	printf("%llu SEND/RECV, %llu RDMA WRITE, %llu RDMA READ of %u bytes, %llu bytes checked, "
	       "in %.3f s (%.0f round trips/s)\n",
	       (unsigned long long)st.recvs, (unsigned long long)st.writes,
	       (unsigned long long)st.reads, size, (unsigned long long)st.bytes_checked, st.seconds,
	       st.seconds > 0 ? (double)(st.recvs + st.writes + st.reads) / st.seconds : 0.0);
	printf("%s\n", ret ? "FAILED" : "OK: every completion IBV_WC_SUCCESS, every byte equal");
	pc_loopback_destroy(&lb);
out_dev:
	pc_dev_close(dev);
	return ret ? 1 : 0;
}
