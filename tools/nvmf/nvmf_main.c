// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_main.c - pollcore-nvmf: an NVMe-oF/RDMA target on
 * pollcore (docs/man/pollcore-nvmf.1.md, docs/storage.md).
 *
 *   pollcore-nvmf --addr A [--port 4420] --nqn NQN (--ram SIZE | --file PATH)...
 *
 * The options follow docs/tools.md (tools/cli.h).
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
		"usage: " PROG " -a|--addr ADDR [-p|--port PORT] --nqn NQN (--ram SIZE | -f|--file PATH)...\n"
		"                     [-b|--bs 512|4096] [-d|--device NAME] [-w|--workers N]\n"
		"                     [--in-capsule BYTES] [--max-queue-depth N] [--max-io-queues N]\n"
		"                     [--controllers N] [--staging N] [--serial SN] [-N|--no-numa]\n"
		"                     [--idle busy|hybrid|auto] [--idle-spins N] [-j|--json]\n"
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
		"  --bs BYTES           logical block size, 512 (default) or 4096\n"
		"  --device NAME        the RDMA device (default: the first one)\n"
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
		"  --idle MODE          busy: workers busy-poll, bound or not; hybrid: they sleep\n"
		"                       after an idle spell, bound or not, waking on completions\n"
		"                       and io_uring's eventfd; auto (default): bound workers\n"
		"                       busy-poll, unbound ones sleep when idle\n"
		"  --idle-spins N       empty turns of a worker that sleeps when idle before it\n"
		"                       sleeps, 1 to 1000000, default 1000 (pollcore's)\n"
		"  --json               the counters at the end as one JSON object on stdout\n"
		"                       (the other lines go to stderr)\n"
		"  --help               this text\n"
		"\n"
		"SIGINT or SIGTERM: every connection is closed, files are synced, the counters\n"
		"are printed, exit 0. Exit 1: failed; 2: bad usage.\n",
		NT_MAX_NS);
}

#define bad_usage(...) cli_usage_error(__VA_ARGS__)
#define parse_u32 cli_u32

static const struct cli_alias aliases[] = {
	{ "--block-size", "--bs" },
	{ "--busy", "--idle=busy" },
	{ "--hybrid", "--idle=hybrid" },
	{ NULL },
};

enum {
	O_NQN = CLI_TOOL_FIRST, O_RAM, O_INCAPSULE, O_DEPTH, O_IOQ, O_CTRLS, O_STAGING, O_SERIAL,
	O_SPINS,
};

struct opts {
	struct cli_common c;
	const char *nqn, *serial;
	uint32_t bs, in_capsule, depth, ioq, ctrls, staging, idle_spins;
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
		CLI_OPT_ADDR, CLI_OPT_PORT, CLI_OPT_DEVICE, CLI_OPT_WORKERS, CLI_OPT_NONUMA,
		CLI_OPT_IDLE, CLI_OPT_JSON, CLI_OPT_HELP,
		{"nqn", required_argument, NULL, O_NQN},
		{"ram", required_argument, NULL, O_RAM},
		{"file", required_argument, NULL, 'f'},
		{"bs", required_argument, NULL, 'b'},
		{"in-capsule", required_argument, NULL, O_INCAPSULE},
		{"max-queue-depth", required_argument, NULL, O_DEPTH},
		{"max-io-queues", required_argument, NULL, O_IOQ},
		{"controllers", required_argument, NULL, O_CTRLS},
		{"staging", required_argument, NULL, O_STAGING},
		{"serial", required_argument, NULL, O_SERIAL},
		{"idle-spins", required_argument, NULL, O_SPINS},
		{0},
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, ":a:p:d:w:Njhf:b:", opts, NULL)) != -1) {
		switch (c) {
		case O_NQN: o->nqn = optarg; break;
		case O_SERIAL: o->serial = optarg; break;
		case O_SPINS:
			if (parse_u32("--idle-spins", optarg, 1, 1000000, &o->idle_spins))
				return 2;
			break;
		case O_RAM:
		case 'f':
			if (o->nr_ns == NT_MAX_NS)
				return bad_usage("at most %u namespaces (--ram and --file)", NT_MAX_NS);
			if (c == 'f') {
				o->ns[o->nr_ns].file = optarg;
			} else if (cli_size64("--ram", optarg, 1u << 20, 1ull << 40, &v)) {
				return 2;
			} else {
				o->ns[o->nr_ns].ram = v;
			}
			o->nr_ns++;
			break;
		case 'b':
			if (cli_size32("--bs", optarg, 512, 4096, &o->bs))
				return 2;
			if (o->bs != 512 && o->bs != 4096)
				return bad_usage("--bs: '%s' is neither 512 nor 4096", optarg);
			break;
		case O_INCAPSULE:
			if (parse_u32("--in-capsule", optarg, 0, 16384, &o->in_capsule))
				return 2;
			if (o->in_capsule % 16)
				return bad_usage("--in-capsule: '%s' is not a multiple of 16", optarg);
			break;
		case O_DEPTH:
			if (parse_u32("--max-queue-depth", optarg, 2, 1024, &o->depth))
				return 2;
			break;
		case O_IOQ:
			if (parse_u32("--max-io-queues", optarg, 1, 64, &o->ioq))
				return 2;
			break;
		case O_CTRLS:
			if (parse_u32("--controllers", optarg, 1, 64, &o->ctrls))
				return 2;
			break;
		case O_STAGING:
			if (parse_u32("--staging", optarg, 1, 4096, &o->staging))
				return 2;
			break;
		default:
			if (cli_other_opt(&o->c, c, NULL, argv))
				return 2;
		}
	}
	if (optind != argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (!o->c.addr)
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

/* Main thread, once a second until a signal: expired controllers' queues close on their workers. */
static void keepalive_tick(void *arg)
{
	struct nt_tgt *t = arg;
	uint16_t expired[16];
	int n, i;

	n = nvmf_tgt_keepalive(t->core, now_ms(), expired, 16);
	for (i = 0; i < n && i < 16; i++)
		printf(PROG ": controller %u: keep-alive timeout expired; its queues close\n",
			expired[i]);
	if (n)
		fflush(stdout);
}

static void print_json(struct nt_tgt *t, int sig)
{
	struct cli_json j;
	unsigned int i;

	cli_json_begin(&j);
	cli_json_string(&j, "signal", strsignal(sig));
	cli_json_u64(&j, "queues_served", atomic_load(&t->ups));
	cli_json_u64(&j, "connects_rejected", atomic_load(&t->rejects));
	cli_json_array(&j, "targets");
	for (i = 0; i < t->nwq; i++) {
		const struct nt_stats *s = &t->wqs[i].st;

		cli_json_object(&j, NULL);
		cli_json_u64(&j, "queues", s->queues);
		cli_json_u64(&j, "commands", s->cmds);
		cli_json_u64(&j, "reads", s->reads);
		cli_json_u64(&j, "bytes_read", s->bytes_read);
		cli_json_u64(&j, "writes", s->writes);
		cli_json_u64(&j, "bytes_written", s->bytes_written);
		cli_json_u64(&j, "flushes", s->flushes);
		cli_json_u64(&j, "errors", s->errors);
		cli_json_u64(&j, "io_errors", s->io_errors);
		cli_json_close(&j, '}');
	}
	cli_json_close(&j, ']');
	cli_json_workers(&j, t->e);
	cli_json_end(&j);
}

int main(int argc, char **argv)
{
	struct opts o = {.c = {.port = 4420, .workers = 1}, .bs = 512, .in_capsule = 4096,
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

	cli_init(PROG, usage);
	cli_aliases(argc, argv, aliases);
	rc = parse_opts(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = 1;
	/* the workers and the control thread inherit this: signals come to sigtimedwait() */
	cli_block_stop_signals(&sigs);

	t.in_capsule = o.in_capsule;
	t.mdts = NT_MDTS;
	if (o.c.json)
		cli_json_take_stdout(); /* the lines the target prints go to stderr */
	nt_engine_params(&t, &p);
	cli_engine_params(&o.c, &p);
	p.raw_bufs = o.ctrls * (NT_ADMIN_DEPTH + o.ioq * o.depth);
	p.rx_bufs = p.raw_bufs + 64; /* 64 for the SRQ, which no NVMe host uses */
	p.tx_bufs = p.raw_bufs + 64; /* a CQE each */
	p.sq_depth = 2 * o.depth + 16; /* a READ's WRITE and its CQE per command */
	p.idle_spins = o.idle_spins; /* 0: the engine's default */
	t.e = cli_engine_start(NULL, &p);
	if (!t.e)
		return 1;
	if (!o.c.no_numa && !pc_engine_stats(t.e, 0, &ws) && ws.numa_node >= 0) {
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
	snprintf(port, sizeof(port), "%u", o.c.port);
	t.nwq = pc_engine_nworkers(t.e);
	t.wqs = calloc(t.nwq, sizeof(*t.wqs));
	if (!t.wqs)
		goto out;
	cfg = (struct nvmf_tgt_config){
		.subnqn = o.nqn, .serial = serial, .model = PROG, .firmware = pc_version(),
		.ns = nsc, .nr_ns = o.nr_ns,
		.adrfam = strchr(o.c.addr, ':') ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4,
		.traddr = o.c.addr, .trsvcid = port, .portid = 1,
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
	if (cli_listen(t.e, NULL, &o.c))
		goto out;
	printf(PROG ": listening on %s port %u: %s, serial %s, %u worker%s, in-capsule %u, "
		    "MDTS %u KiB, I/O queues %u x %u entries, %u raw receive buffers per worker, "
		    "numa node %d\n",
	       o.c.addr, pc_listen_port(t.e), o.nqn, serial, t.nwq, t.nwq > 1 ? "s" : "",
	       o.in_capsule, NT_MDTS >> 10, o.ioq, o.depth, p.raw_bufs, node);
	for (i = 0; i < t.nr_ns; i++)
		printf(PROG ": namespace %u: %s, %" PRIu64 " blocks of %u bytes\n", i + 1,
			t.be[i].desc, nsc[i].nblocks, o.bs);
	fflush(stdout);

	sig = cli_wait_stop(&sigs, keepalive_tick, 1000, &t);
	if (o.c.json) {
		print_json(&t, sig);
	} else {
		printf(PROG ": %s: %u queues served, %u connect requests rejected\n",
		       strsignal(sig), atomic_load(&t.ups), atomic_load(&t.rejects));
		nt_print_stats(&t, stdout);
		pc_engine_print_stats(t.e, stdout);
	}
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
