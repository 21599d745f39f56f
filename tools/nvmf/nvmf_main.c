// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_main.c - pollcore-nvmf: an NVMe-oF/RDMA target on
 * pollcore (docs/man/pollcore-nvmf.1.md, docs/storage.md).
 *
 *   pollcore-nvmf --addr A [--port 4420] --nqn NQN (--ram SIZE | --file PATH)...
 *
 * The main thread parses the options, opens the namespaces' backends,
 * builds the protocol core (nvmf_ctrl.h) and the engine, listens, then
 * drives the keep-alive clock once a second until SIGINT or SIGTERM; then
 * it prints the counters, destroys the engine (every connection closed),
 * syncs the files and exits 0. The rest happens on the workers (nvmf_tgt.c).
 */
#include "nvmf_tgt.h"

#include <pollcore/numa.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cli.h"

#define NT_MDTS (128u * 1024) /* largest transfer: one staging buffer */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --addr ADDR [--port PORT] --nqn NQN (--ram SIZE | --file PATH)...\n"
		"                     [--block-size 512|4096] [--workers N] [--in-capsule BYTES]\n"
		"                     [--max-queue-depth N] [--max-io-queues N] [--controllers N]\n"
		"                     [--staging N] [--serial SN] [--no-numa] [--busy|--hybrid]\n"
		"                     [--idle-spins N]\n"
		"\n"
		"An NVMe-oF target over RDMA (rdma_cm): the Linux kernel's nvme-rdma host and\n"
		"other NVMe-oF initiators discover it, connect and do I/O. Each --ram or --file\n"
		"is a namespace, NSIDs 1, 2, ... in order (at most %u).\n"
		"\n"
		"  --addr ADDR          listen on this address (e.g. fe80::ff:fe00:1%%d0); the\n"
		"                       discovery log reports it as given\n"
		"  --port PORT          rdma_cm port, default 4420\n"
		"  --nqn NQN            the NVM subsystem's NQN (any host may connect)\n"
		"  --ram SIZE           a namespace on a NUMA-local RAM disk (k, m, g suffixes)\n"
		"  --file PATH          a namespace on a file or block device (io_uring; O_DIRECT\n"
		"                       where the file system allows it); synced at exit\n"
		"  --block-size BYTES   logical block size, 512 (default) or 4096\n"
		"  --workers N          pollcore workers, default 1; queues are spread over them\n"
		"  --in-capsule BYTES   write data a command capsule may carry, default 4096\n"
		"                       (a multiple of 16, at most 16384; 0: none)\n"
		"  --max-queue-depth N  entries of an I/O queue (CAP.MQES + 1), default 128\n"
		"  --max-io-queues N    I/O queues a controller may have, default 4\n"
		"  --controllers N      controllers each worker has receive buffers for, default\n"
		"                       2: raw_bufs = N x (32 + max-io-queues x max-queue-depth)\n"
		"                       per worker (an admin queue takes 32); a connect that\n"
		"                       finds too few left is rejected (rdma_cm status 6)\n"
		"  --staging N          registered staging buffers of 128 KiB (the largest\n"
		"                       transfer, MDTS) per worker, default 128; commands wait\n"
		"                       for one in arrival order\n"
		"  --serial SN          Identify's serial number (default: derived from the NQN)\n"
		"  --no-numa            do not bind workers or place memory\n"
		"  --busy               workers busy-poll, bound or not (default: bound workers\n"
		"                       busy-poll, unbound ones sleep when idle)\n"
		"  --hybrid             workers sleep after an idle spell, bound or not, waking\n"
		"                       on completions and io_uring's eventfd\n"
		"  --idle-spins N       empty turns of a worker that sleeps when idle before it\n"
		"                       sleeps, 1 to 1000000, default 1000 (pollcore's)\n"
		"  --help               this text\n"
		"\n"
		"SIGINT or SIGTERM: every connection is closed, files are synced, the counters\n"
		"are printed, exit 0.\n",
		NT_MAX_NS);
}

#define bad_usage(...) cli_bad_usage(PROG, usage, __VA_ARGS__)

static int parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || *end != '\0' || errno || v < min || v > max) {
		bad_usage("%s: '%s' is not a number from %u to %u", opt, s, min, max);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

struct opts {
	const char *addr, *nqn, *serial;
	uint32_t port, bs, workers, in_capsule, depth, ioq, ctrls, staging, idle_spins;
	bool no_numa;
	enum pc_idle idle;
	uint32_t nr_ns;
	struct {
		const char *file; /* NULL: RAM */
		uint64_t ram;
	} ns[NT_MAX_NS];
};

/* Return: -1 to go on, else the exit status. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{"addr", required_argument, NULL, 'a'},	   {"port", required_argument, NULL, 'p'},
		{"nqn", required_argument, NULL, 'n'},	   {"ram", required_argument, NULL, 'r'},
		{"file", required_argument, NULL, 'f'},	   {"block-size", required_argument, NULL, 'b'},
		{"workers", required_argument, NULL, 'w'}, {"in-capsule", required_argument, NULL, 'i'},
		{"max-queue-depth", required_argument, NULL, 'd'},
		{"max-io-queues", required_argument, NULL, 'q'},
		{"controllers", required_argument, NULL, 'c'},
		{"staging", required_argument, NULL, 's'}, {"serial", required_argument, NULL, 'S'},
		{"no-numa", no_argument, NULL, 'N'},	   {"help", no_argument, NULL, 'h'},
		{"busy", no_argument, NULL, 'B'},	   {"hybrid", no_argument, NULL, 'H'},
		{"idle-spins", required_argument, NULL, 'I'},
		{0},
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "a:p:n:r:f:b:w:i:d:q:c:s:S:I:NBHh", opts, NULL)) != -1) {
		switch (c) {
		case 'a': o->addr = optarg; break;
		case 'n': o->nqn = optarg; break;
		case 'S': o->serial = optarg; break;
		case 'N': o->no_numa = true; break;
		case 'B': o->idle = PC_IDLE_BUSY; break;
		case 'H': o->idle = PC_IDLE_HYBRID; break;
		case 'I':
			if (parse_u32("--idle-spins", optarg, 1, 1000000, &o->idle_spins))
				return 2;
			break;
		case 'r':
		case 'f':
			if (o->nr_ns == NT_MAX_NS)
				return bad_usage("at most %u namespaces (--ram and --file)", NT_MAX_NS);
			if (c == 'f') {
				o->ns[o->nr_ns].file = optarg;
			} else if (cli_parse_size(PROG, usage, "--ram", optarg, 1u << 20, 1ull << 40, &v)) {
				return 2;
			} else {
				o->ns[o->nr_ns].ram = v;
			}
			o->nr_ns++;
			break;
		case 'p':
			if (parse_u32("--port", optarg, 1, 65535, &o->port))
				return 2;
			break;
		case 'b':
			if (parse_u32("--block-size", optarg, 512, 4096, &o->bs))
				return 2;
			if (o->bs != 512 && o->bs != 4096)
				return bad_usage("--block-size: '%s' is neither 512 nor 4096", optarg);
			break;
		case 'w':
			if (parse_u32("--workers", optarg, 1, 64, &o->workers))
				return 2;
			break;
		case 'i':
			if (parse_u32("--in-capsule", optarg, 0, 16384, &o->in_capsule))
				return 2;
			if (o->in_capsule % 16)
				return bad_usage("--in-capsule: '%s' is not a multiple of 16", optarg);
			break;
		case 'd':
			if (parse_u32("--max-queue-depth", optarg, 2, 1024, &o->depth))
				return 2;
			break;
		case 'q':
			if (parse_u32("--max-io-queues", optarg, 1, 64, &o->ioq))
				return 2;
			break;
		case 'c':
			if (parse_u32("--controllers", optarg, 1, 64, &o->ctrls))
				return 2;
			break;
		case 's':
			if (parse_u32("--staging", optarg, 1, 4096, &o->staging))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return bad_usage("unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (!o->addr)
		return bad_usage("--addr is missing");
	if (!o->nqn)
		return bad_usage("--nqn is missing");
	if (!o->nr_ns)
		return bad_usage("no namespace: give --ram SIZE or --file PATH");
	return -1;
}

/* FNV-1a of the NQN: a serial number that stays the same across restarts. */
static void default_serial(const char *nqn, char *sn, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *nqn; nqn++)
		h = (h ^ (uint8_t)*nqn) * 0x100000001b3ull;
	snprintf(sn, len, "%016" PRIx64, h);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Main thread: once a second until a signal; expired controllers' queues close on their workers. */
static int run(struct nt_tgt *t, const sigset_t *sigs)
{
	const struct timespec sec = {.tv_sec = 1};
	uint16_t expired[16];
	int sig, n, i;

	for (;;) {
		sig = sigtimedwait(sigs, NULL, &sec);
		if (sig > 0)
			return sig;
		n = nvmf_tgt_keepalive(t->core, now_ms(), expired, 16);
		for (i = 0; i < n && i < 16; i++)
			printf(PROG ": controller %u: keep-alive timeout expired; its queues close\n",
			       expired[i]);
		if (n)
			fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	struct opts o = {.port = 4420, .bs = 512, .workers = 1, .in_capsule = 4096,
			 .depth = 128, .ioq = 4, .ctrls = 2, .staging = 128};
	struct nvmf_ns_config nsc[NT_MAX_NS] = {0};
	struct pc_engine_params p = { .size = sizeof(p) };
	struct nvmf_tgt_config cfg = {0};
	struct pc_topo *topo = NULL;
	struct pc_worker_stats ws;
	struct nt_tgt t = {0};
	char serial[24], port[8];
	bool files = false;
	int rc, node = -1, sig;
	uint32_t i;
	sigset_t sigs;

	rc = parse_opts(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = 1;
	/* the workers and the control thread inherit this: signals come to sigtimedwait() */
	cli_block_stop_signals(&sigs);

	t.in_capsule = o.in_capsule;
	t.mdts = NT_MDTS;
	nt_engine_params(&t, &p);
	p.workers_per_device = o.workers;
	p.raw_bufs = o.ctrls * (NT_ADMIN_DEPTH + o.ioq * o.depth);
	p.rx_bufs = p.raw_bufs + 64; /* 64 for the SRQ, which no NVMe host uses */
	p.tx_bufs = p.raw_bufs + 64; /* a CQE each */
	p.sq_depth = 2 * o.depth + 16; /* a READ's WRITE and its CQE per command */
	p.no_numa = o.no_numa;
	p.idle = o.idle;
	p.idle_spins = o.idle_spins; /* 0: the engine's default */
	t.e = pc_engine_create(&p);
	if (!t.e) {
		fprintf(stderr, PROG ": cannot start the engine: %s\n", pc_last_error());
		return 1;
	}
	if (!o.no_numa && !pc_engine_stats(t.e, 0, &ws) && ws.numa_node >= 0) {
		node = ws.numa_node;
		topo = pc_topo_open();
		blk_mem_topo(topo);
	}
	for (i = 0; i < o.nr_ns; i++) {
		if (o.ns[i].file ? blk_uring_open(&t.be[i], PROG, o.ns[i].file, o.bs)
				 : blk_ram_open(&t.be[i], PROG, o.ns[i].ram / o.bs * o.bs, o.bs, node))
			goto out;
		t.nr_ns++;
		if (t.be[i].size < o.bs) {
			fprintf(stderr, PROG ": %s holds no whole block of %u bytes\n", t.be[i].desc,
				o.bs);
			goto out;
		}
		files |= o.ns[i].file != NULL;
		nsc[i] = (struct nvmf_ns_config){.nblocks = t.be[i].size / o.bs,
						 .block_size = o.bs,
						 .backend = &t.be[i]};
	}
	if (o.serial)
		snprintf(serial, sizeof(serial), "%s", o.serial);
	else
		default_serial(o.nqn, serial, sizeof(serial));
	snprintf(port, sizeof(port), "%u", o.port);
	t.nwq = pc_engine_nworkers(t.e);
	t.wqs = calloc(t.nwq, sizeof(*t.wqs));
	if (!t.wqs)
		goto out;
	cfg = (struct nvmf_tgt_config){
		.subnqn = o.nqn, .serial = serial, .model = PROG, .firmware = pc_version(),
		.ns = nsc, .nr_ns = o.nr_ns,
		.adrfam = strchr(o.addr, ':') ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4,
		.traddr = o.addr, .trsvcid = port, .portid = 1,
		.max_io_queues = (uint16_t)o.ioq, .max_queue_depth = (uint16_t)o.depth,
		.in_capsule = o.in_capsule, .mdts = NT_MDTS, .max_ctrls = 16, .aer_limit = 4,
		.volatile_cache = files, .event_notify = nt_event_notify, .event_arg = &t,
	};
	t.core = nvmf_tgt_create(&cfg);
	if (!t.core) {
		fprintf(stderr, PROG ": the target's configuration is not valid (%s): check --nqn "
				"(at most 223 bytes, not the discovery NQN), --serial (at most 20 "
				"printable ASCII characters) and --addr\n",
			strerror(errno));
		goto out;
	}
	for (i = 0; i < t.nwq; i++)
		if (nt_wq_setup(&t, i, o.staging, node))
			goto out;
	if (pc_listen(t.e, o.addr, (uint16_t)o.port)) {
		fprintf(stderr, PROG ": cannot listen on %s port %u: %s\n", o.addr, o.port,
			pc_last_error());
		goto out;
	}
	printf(PROG ": listening on %s port %u: %s, serial %s, %u worker%s, in-capsule %u, "
		    "MDTS %u KiB, I/O queues %u x %u entries, %u raw receive buffers per worker, "
		    "numa node %d\n",
	       o.addr, pc_listen_port(t.e), o.nqn, serial, t.nwq, t.nwq > 1 ? "s" : "",
	       o.in_capsule, NT_MDTS >> 10, o.ioq, o.depth, p.raw_bufs, node);
	for (i = 0; i < t.nr_ns; i++)
		printf(PROG ": namespace %u: %s, %" PRIu64 " blocks of %u bytes\n", i + 1,
		       t.be[i].desc, nsc[i].nblocks, o.bs);
	fflush(stdout);

	sig = run(&t, &sigs);
	printf(PROG ": %s: %u queues served, %u connect requests rejected\n", strsignal(sig),
	       atomic_load(&t.ups), atomic_load(&t.rejects));
	nt_print_stats(&t, stdout);
	pc_engine_print_stats(t.e, stdout);
	rc = 0;
out:
	fflush(stdout);
	/* the workers stop first: nothing calls into the core or the backends after this */
	pc_engine_destroy(t.e);
	for (i = 0; t.wqs && i < t.nwq; i++)
		nt_wq_teardown(&t, i);
	free(t.wqs);
	nvmf_tgt_destroy(t.core);
	for (i = 0; i < t.nr_ns; i++)
		t.be[i].close(&t.be[i]); /* files: fdatasync, then close */
	blk_mem_topo(NULL);
	if (topo)
		pc_topo_close(topo);
	if (!rc)
		printf(PROG ": stopped\n");
	return rc;
}
