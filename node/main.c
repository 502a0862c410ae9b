/* cassinid: command line, then hand over to node.c. */
#include "common/err.h"
#include "conf/conf.h"
#include "node/node.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: cassinid -c CONF_DIR [-p PIDFILE]\n"
		"\n"
		"Runs one Cassini node in the foreground until SIGTERM or "
		"SIGINT.\n"
		"\n"
		"  -c, --conf DIR      directory holding node.yaml and "
		"rackdc.properties\n"
		"  -p, --pidfile FILE  write the process id to FILE while "
		"running\n"
		"      --check         load and validate the configuration, "
		"then exit\n"
		"      --help-config   list every node.yaml key "
		"(tab-separated: "
		"name, type,\n"
		"                      default, range, description)\n"
		"      --version       print the version and exit\n"
		"  -h, --help          print this help and exit\n"
		"\n"
		"Exit status: 0 clean shutdown, 1 runtime failure, 2 bad "
		"arguments or configuration.\n");
}

/* Every node.yaml key with its type, default and range, from the same table
 * the loader uses (docs/configuration.md is checked against it). */
static void help_config(void)
{
	for (size_t i = 0; i < conf_key_count(); i++) {
		const struct conf_key_doc *d = conf_key_doc_at(i);
		printf("%s\t%s\t%s\t%s\t%s\n", d->name, d->type,
		       d->default_text[0] ? d->default_text : "(empty)",
		       d->range_text[0] ? d->range_text : "-", d->doc);
	}
}

/* glibc keeps at most 7 freed chunks of each size per thread (tcache). The
 * loop frees a turn's worth of each per-request object at once (50 and
 * more), so most frees overflowed into the arena's slower bins; 128 takes
 * about a tenth off a point read's instructions (docs/operations.md).
 * glibc reads the count only from GLIBC_TUNABLES when a process starts, so
 * cassinid runs itself again once with it added. An operator's own
 * GLIBC_TUNABLES is kept, and one that sets tcache_count is left alone;
 * if the exec fails the node runs with glibc's default. */
#define TCACHE_TUNABLE "glibc.malloc.tcache_count"

static void tune_malloc(char **argv)
{
#ifdef __GLIBC__
	const char *old = getenv("GLIBC_TUNABLES");
	if (old && strstr(old, TCACHE_TUNABLE))
		return;
	char v[1024];
	int n = snprintf(v, sizeof(v), "%s%s" TCACHE_TUNABLE "=128",
			 old ? old : "", old && *old ? ":" : "");
	/* The binary by its own name (exec'ing /proc/self/exe would name
	 * the process "exe" for ps, top and pgrep). */
	char self[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0 || (size_t)n >= sizeof(v) || len <= 0 ||
	    (size_t)len >= sizeof(self) - 1)
		return;
	self[len] = 0;
	if (setenv("GLIBC_TUNABLES", v, 1) != 0)
		return;
	execv(self, argv);
#else
	(void)argv;
#endif
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "cassinid: cannot write pid file %s\n", path);
		return -1;
	}
	fprintf(f, "%ld\n", (long)getpid());
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"conf", required_argument, NULL, 'c'},
		{"pidfile", required_argument, NULL, 'p'},
		{"check", no_argument, NULL, 'k'},
		{"help-config", no_argument, NULL, 'K'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *conf_dir = NULL, *pidfile = NULL;
	int check_only = 0, opt;

	tune_malloc(argv);

	while ((opt = getopt_long(argc, argv, "c:p:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf_dir = optarg;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 'k':
			check_only = 1;
			break;
		case 'K':
			help_config();
			return NODE_EXIT_OK;
		case 'V':
			printf("cassinid %s\n", CASSINI_VERSION);
			return NODE_EXIT_OK;
		case 'h':
			usage(stdout);
			return NODE_EXIT_OK;
		default:
			usage(stderr);
			return NODE_EXIT_CONFIG;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cassinid: unexpected argument '%s'\n",
			argv[optind]);
		return NODE_EXIT_CONFIG;
	}
	if (!conf_dir) {
		fprintf(stderr, "cassinid: missing -c CONF_DIR (see --help)\n");
		return NODE_EXIT_CONFIG;
	}

	struct conf conf;
	if (conf_load(&conf, conf_dir) != 0) {
		fprintf(stderr, "cassinid: %s\n", err_msg());
		return NODE_EXIT_CONFIG;
	}
	if (node_check_conf(&conf) != 0) {
		fprintf(stderr, "cassinid: %s\n", err_msg());
		conf_free(&conf);
		return NODE_EXIT_CONFIG;
	}
	if (check_only) {
		printf("%s: configuration is valid\n", conf_dir);
		conf_free(&conf);
		return NODE_EXIT_OK;
	}

	struct node *n = node_new(&conf);
	if (!n) {
		fprintf(stderr, "cassinid: %s\n", err_msg());
		return err_code() == ERR_CONFIG ? NODE_EXIT_CONFIG
						: NODE_EXIT_FAILURE;
	}
	if (pidfile && write_pidfile(pidfile) != 0) {
		node_delete(n);
		return NODE_EXIT_FAILURE;
	}
	int rc = node_run(n);
	node_delete(n);
	if (pidfile)
		unlink(pidfile);
	return rc;
}
