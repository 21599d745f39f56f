// SPDX-License-Identifier: MIT
/*
 * pollcore-topo - show where RDMA devices live and where workers would run.
 *
 *   pollcore-topo [--xml FILE] [--device NAME]... [--workers N] [--json]
 *                 [--all-cores | --housekeeping PUS] [--smt] [--sysfs DIR]
 *
 * See docs/placement.md; the options follow docs/tools.md (tools/cli.h).
 * Exit: 0 done, 1 failed, 2 bad usage.
 */
#include <pollcore/common.h>
#include <pollcore/numa.h>
#include "cli.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
	const char *xml;
	const char *sysfs;
	const char **devices;
	unsigned int nr_devices;
	unsigned int workers;
	bool json;
	struct pc_plan_policy policy;
	hwloc_bitmap_t housekeeping;
};

/* Errors are printed once, from pc_last_error(), where they are handled. */
static void log_sink(enum pc_log_level level, const char *msg, void *arg)
{
	if (level != PC_LOG_ERR)
		fprintf(stderr, "pollcore-topo: %s\n", msg);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pollcore-topo [-x|--xml FILE] [-d|--device NAME]... [-w|--workers N] [-j|--json]\n"
		"                     [--all-cores | --housekeeping PUS] [--smt] [--sysfs DIR]\n"
		"\n"
		"Shows each RDMA device's NUMA nodes, local PUs and the rule that placed it\n"
		"(pci, netdev, machine), then the plan for N workers per device (default 1).\n"
		"  --xml FILE          read an hwloc XML topology instead of this machine\n"
		"  --device NAME       only this device (repeatable); default: all\n"
		"  --workers N         workers per device, N >= 1\n"
		"  --json              machine-readable output\n"
		"  --all-cores         do not leave the first core out for housekeeping\n"
		"  --housekeeping PUS  leave out the cores of these PU os indexes (e.g. 0-1,40)\n"
		"  --smt               use SMT siblings once every core has a worker\n"
		"  --sysfs DIR         read the netdev fallback from DIR instead of /sys\n"
		"Exit: 0 done, 1 failed, 2 bad usage.\n");
}

enum { O_ALLCORES = CLI_TOOL_FIRST, O_HOUSEKEEPING, O_SMT, O_SYSFS };

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
	    {"xml", required_argument, NULL, 'x'},
	    CLI_OPT_DEVICE, CLI_OPT_WORKERS, CLI_OPT_JSON, CLI_OPT_HELP,
	    {"all-cores", no_argument, NULL, O_ALLCORES},
	    {"housekeeping", required_argument, NULL, O_HOUSEKEEPING},
	    {"smt", no_argument, NULL, O_SMT},
	    {"sysfs", required_argument, NULL, O_SYSFS},
	    {NULL, 0, NULL, 0},
	};
	int c;

	o->workers = 1;
	o->devices = calloc((size_t)argc, sizeof(*o->devices));
	if (!o->devices)
		return -ENOMEM;
	while ((c = getopt_long(argc, argv, ":x:d:w:jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'x':
			o->xml = optarg;
			break;
		case 'd':
			o->devices[o->nr_devices++] = optarg;
			break;
		case 'w':
			if (cli_u32("--workers", optarg, 1, INT_MAX, &o->workers))
				return CLI_EXIT_USAGE;
			break;
		case 'j':
			o->json = true;
			break;
		case O_ALLCORES:
			o->policy.flags |= PC_PLAN_NO_HOUSEKEEPING;
			break;
		case O_HOUSEKEEPING:
			hwloc_bitmap_free(o->housekeeping);
			o->housekeeping = hwloc_bitmap_alloc();
			if (!o->housekeeping ||
			    hwloc_bitmap_list_sscanf(o->housekeeping, optarg) < 0 ||
			    hwloc_bitmap_iszero(o->housekeeping)) {
				return cli_usage_error("--housekeeping '%s': need a PU list such "
						       "as 0-1,40", optarg);
			}
			o->policy.housekeeping = o->housekeeping;
			break;
		case O_SMT:
			o->policy.flags |= PC_PLAN_ALLOW_SMT;
			break;
		case O_SYSFS:
			o->sysfs = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return cli_bad_option(NULL, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]);
	return 0;
}

static void json_list(hwloc_const_bitmap_t set)
{
	const char *sep = "";
	int i;

	putchar('[');
	hwloc_bitmap_foreach_begin(i, set)
	{
		printf("%s%d", sep, i);
		sep = ", ";
	}
	hwloc_bitmap_foreach_end();
	putchar(']');
}

static void print_json(const struct pc_nic_locality *locs, unsigned int nr,
		       const struct pc_plan *plan)
{
	printf("{\"devices\": [");
	for (unsigned int i = 0; i < nr; i++) {
		printf("%s{\"name\": ", i ? ", " : "");
		cli_json_str(locs[i].name);
		printf(", \"numa_nodes\": ");
		json_list(locs[i].nodeset);
		printf(", \"local_pus\": ");
		json_list(locs[i].cpuset);
		printf(", \"locality\": \"%s\"}", pc_locality_rule_str(locs[i].rule));
	}
	printf("], \"plan\": [");
	for (unsigned int i = 0; plan && i < plan->nr_entries; i++) {
		const struct pc_plan_entry *e = &plan->entries[i];

		printf("%s{\"worker\": %u, \"device\": ", i ? ", " : "", e->worker);
		cli_json_str(e->device_name);
		printf(", \"pu\": %d, \"core\": %d, \"numa_node\": %d, \"local\": %s}", e->pu,
		       e->core, e->numa_node, e->local ? "true" : "false");
	}
	printf("]}\n");
}

static void print_table(const struct pc_topo *t, const struct opts *o,
			const struct pc_nic_locality *locs, unsigned int nr,
			const struct pc_plan *plan)
{
	char nodes[256], pus[1024];

	printf("Topology: %s%s\n\n", o->xml ? o->xml : "this machine",
	       pc_topo_is_thissystem(t) ? "" : " (not this machine: nothing is bound)");
	if (!nr) {
		printf("No RDMA device found.\n");
		return;
	}
	printf("%-16s %-8s %-10s %s\n", "DEVICE", "RULE", "NUMA", "LOCAL PUS");
	for (unsigned int i = 0; i < nr; i++) {
		hwloc_bitmap_list_snprintf(nodes, sizeof(nodes), locs[i].nodeset);
		hwloc_bitmap_list_snprintf(pus, sizeof(pus), locs[i].cpuset);
		printf("%-16s %-8s %-10s %s\n", locs[i].name, pc_locality_rule_str(locs[i].rule),
		       nodes, pus);
	}
	printf("\nPlan: %u worker%s per device, %s\n", o->workers, o->workers > 1 ? "s" : "",
	       o->policy.flags & PC_PLAN_NO_HOUSEKEEPING ? "all cores used"
	       : o->housekeeping			 ? "housekeeping cores left out"
							 : "first core left out for housekeeping");
	printf("%-6s %-16s %5s %5s %5s %-5s  %s\n", "WORKER", "DEVICE", "PU", "CORE", "NUMA",
	       "LOCAL", "WHY");
	for (unsigned int i = 0; i < plan->nr_entries; i++) {
		const struct pc_plan_entry *e = &plan->entries[i];

		printf("%-6u %-16s %5d %5d %5d %-5s  %s\n", e->worker, e->device_name, e->pu,
		       e->core, e->numa_node, e->local ? "yes" : "no",
		       pc_plan_reason_str(e->reason));
	}
}

int main(int argc, char **argv)
{
	char(*names)[PC_NIC_NAME_MAX] = NULL;
	struct pc_nic_locality *locs = NULL;
	struct opts o = { .policy = { .size = sizeof(struct pc_plan_policy) } };
	struct pc_plan *plan = NULL;
	struct pc_topo *t;
	int n, err, ret = 1;

	pc_log_set_level(PC_LOG_WARN);
	pc_log_set_sink(log_sink, NULL);
	cli_init("pollcore-topo", usage);
	err = parse_opts(argc, argv, &o);
	if (err) {
		/* a usage error: 2; out of memory: 1 */
		ret = err == CLI_EXIT_USAGE ? CLI_EXIT_USAGE : 1;
		goto out_opts;
	}
	t = o.xml ? pc_topo_open_xml(o.xml) : pc_topo_open();
	if (!t) {
		fprintf(stderr, "pollcore-topo: %s\n",
			pc_last_error()[0] ? pc_last_error() : strerror(errno));
		goto out_opts;
	}
	if (o.sysfs && pc_topo_set_sysfs_root(t, o.sysfs))
		goto out_topo;
	if (!o.nr_devices) {
		n = pc_topo_devices(t, NULL, 0);
		names = calloc(n ? n : 1, sizeof(*names));
		if (n < 0 || !names)
			goto out_topo;
		n = PC_MIN(pc_topo_devices(t, names, n), n);
		free(o.devices);
		o.devices = calloc(n ? n : 1, sizeof(*o.devices));
		if (!o.devices)
			goto out_topo;
		for (int i = 0; i < n; i++)
			o.devices[o.nr_devices++] = names[i];
	}
	locs = calloc(o.nr_devices ? o.nr_devices : 1, sizeof(*locs));
	if (!locs)
		goto out_topo;
	for (unsigned int i = 0; i < o.nr_devices; i++) {
		err = pc_topo_nic_locality(t, o.devices[i], &locs[i]);
		if (err) {
			fprintf(stderr, "pollcore-topo: %s\n", pc_last_error());
			goto out_locs;
		}
	}
	if (o.nr_devices) {
		err = pc_plan_build(t, o.devices, o.nr_devices, o.workers, &o.policy, &plan);
		if (err) {
			fprintf(stderr, "pollcore-topo: %s\n", pc_last_error());
			goto out_locs;
		}
	}
	if (o.json)
		print_json(locs, o.nr_devices, plan);
	else
		print_table(t, &o, locs, o.nr_devices, plan);
	ret = fflush(stdout) == 0 ? 0 : 1;

	pc_plan_destroy(plan);
out_locs:
	for (unsigned int i = 0; i < o.nr_devices; i++)
		pc_nic_locality_free(&locs[i]);
	free(locs);
out_topo:
	pc_topo_close(t);
out_opts:
	free(names);
	free(o.devices);
	hwloc_bitmap_free(o.housekeeping);
	return ret;
}
