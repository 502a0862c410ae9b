/*
 * Node lifecycle: directories, ownership checks, the event loop, signals.
 *
 * Start-up order: log first (so every later failure is in system.log), then
 * directories, then the cluster-ownership check and the lock, then the loop.
 * A data directory remembers the cluster it was created for in a small file
 * (DATA_DIR/cassini-cluster); starting with another cluster_name is refused,
 * as Cassandra refuses a saved cluster name that differs from the yaml.
 * The lock (DATA_DIR/cassinid.lock, flock) stops two processes from sharing
 * one data directory.
 */
#define LOG_MODULE "node"
#include "node/node.h"

#include "common/env_real.h"
#include "common/err.h"
#include "common/log.h"
#include "node/cql_service.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define CLUSTER_MARKER "cassini-cluster"
#define LOCK_FILE "cassinid.lock"
#define CLUSTER_NAME_MAX 256

struct node {
	struct conf conf;
	struct event_base *base;
	struct env *env;
	struct event *sig_term;
	struct event *sig_int;
	int lock_fd;
	const char *stop_reason;
	struct cql_service *cql;
	uint8_t host_id[16];
	int32_t generation;
};

static int open_log(struct node *n)
{
	char path[PATH_MAX];
	log_set_level((enum log_level)n->conf.log_level);
	if (env_mkdir_p(n->env, n->conf.log_directory) != 0)
		return err_prefix("log_directory");
	snprintf(path, sizeof(path), "%s/system.log", n->conf.log_directory);
	return log_open_file(path);
}

static int make_dirs(struct node *n)
{
	const struct conf *c = &n->conf;
	for (size_t i = 0; i < c->data_file_directories.count; i++)
		if (env_mkdir_p(n->env, c->data_file_directories.items[i]) != 0)
			return err_prefix("data_file_directories");
	if (env_mkdir_p(n->env, c->commitlog_directory) != 0)
		return err_prefix("commitlog_directory");
	if (env_mkdir_p(n->env, c->hints_directory) != 0)
		return err_prefix("hints_directory");
	if (env_mkdir_p(n->env, c->saved_caches_directory) != 0)
		return err_prefix("saved_caches_directory");
	return 0;
}

/* Refuses a data directory created for another cluster; marks a new one. */
static int check_cluster_marker(struct node *n, const char *dir)
{
	char path[PATH_MAX];
	uint8_t *saved;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", dir, CLUSTER_MARKER);
	if (env_read_file(n->env, path, CLUSTER_NAME_MAX, &saved, &len) == 0) {
		while (len && (saved[len - 1] == '\n' || saved[len - 1] == '\r'))
			saved[--len] = '\0';
		int same = strcmp((char *)saved, n->conf.cluster_name) == 0;
		if (!same)
			err_set(ERR_CONFIG,
				"data directory %s belongs to cluster '%s', not "
				"'%s' (cluster_name in node.yaml)",
				dir, (char *)saved, n->conf.cluster_name);
		free(saved);
		return same ? 0 : -1;
	}
	if (err_code() != ERR_NOT_FOUND)
		return -1;
	char text[CLUSTER_NAME_MAX + 2];
	int tl = snprintf(text, sizeof(text), "%s\n", n->conf.cluster_name);
	if (tl < 0 || (size_t)tl >= sizeof(text))
		return err_set(ERR_CONFIG, "cluster_name is too long");
	LOG_INFO("claiming data directory %s for cluster '%s'", dir,
		 n->conf.cluster_name);
	return env_write_file_atomic(n->env, path, text, (size_t)tl);
}

static int take_lock(struct node *n)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s",
		 n->conf.data_file_directories.items[0], LOCK_FILE);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set_errno(errno, "cannot open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		char pid[32] = "?";
		ssize_t r = pread(fd, pid, sizeof(pid) - 1, 0);
		if (r > 0) {
			pid[r] = '\0';
			pid[strcspn(pid, "\n")] = '\0';
		}
		close(fd);
		return err_set(ERR_EXISTS,
			       "data directory %s is in use by another cassinid "
			       "(pid %s)",
			       n->conf.data_file_directories.items[0], pid);
	}
	char pid[32];
	int pl = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)pl, 0) != pl) {
		close(fd);
		return err_set_errno(errno, "cannot write %s", path);
	}
	n->lock_fd = fd;
	return 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct node *n = arg;
	if (n->stop_reason) {
		LOG_WARN("second %s: exiting now", strsignal((int)sig));
		event_base_loopbreak(n->base);
		return;
	}
	node_stop(n, sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

static int setup_loop(struct node *n)
{
	n->base = event_base_new();
	if (!n->base)
		return err_set(ERR_NOMEM, "cannot create the event loop");
	n->env = env_real_new(n->base);
	if (!n->env)
		return -1;
	n->sig_term = evsignal_new(n->base, SIGTERM, on_signal, n);
	n->sig_int = evsignal_new(n->base, SIGINT, on_signal, n);
	if (!n->sig_term || !n->sig_int || evsignal_add(n->sig_term, NULL) != 0 ||
	    evsignal_add(n->sig_int, NULL) != 0)
		return err_set(ERR_IO, "cannot install signal handlers");
	return 0;
}

/* What system.local reports about this node. Until membership gives the
 * node a persisted identity and tokens, the host id lives for one run. */
static void node_cql_info(void *arg, struct cql_node_info *out)
{
	struct node *n = arg;
	memset(out, 0, sizeof(*out));
	out->cluster_name = n->conf.cluster_name;
	out->dc = n->conf.dc;
	out->rack = n->conf.rack;
	memcpy(out->host_id, n->host_id, 16);
	out->listen_address = n->conf.listen_address;
	out->rpc_address = n->conf.rpc_address;
	out->gossip_generation = n->generation;
}

struct node *node_new(struct conf *conf)
{
	struct node *n = calloc(1, sizeof(*n));
	if (!n) {
		conf_free(conf);
		err_set(ERR_NOMEM, "cannot allocate the node");
		return NULL;
	}
	n->conf = *conf;
	memset(conf, 0, sizeof(*conf));
	n->lock_fd = -1;
	signal(SIGPIPE, SIG_IGN);

	if (setup_loop(n) != 0 || open_log(n) != 0 || make_dirs(n) != 0)
		goto fail;
	for (size_t i = 0; i < n->conf.data_file_directories.count; i++)
		if (check_cluster_marker(n, n->conf.data_file_directories.items[i]) !=
		    0)
			goto fail;
	if (take_lock(n) != 0)
		goto fail;
	for (int i = 0; i < 16; i += 8)
		be64_store(n->host_id + i, env_random(n->env));
	n->host_id[6] = (uint8_t)((n->host_id[6] & 0x0f) | 0x40);
	n->host_id[8] = (uint8_t)((n->host_id[8] & 0x3f) | 0x80);
	n->generation = (int32_t)(env_wall_us(n->env) / 1000000);
	n->cql = cql_service_new(&n->conf, n->base, n->env, node_cql_info, n);
	if (!n->cql)
		goto fail;
	return n;
fail:
	/* main() prints the one stderr line; the log file gets it too. */
	log_set_stderr(false);
	LOG_ERROR("cannot start: %s", err_msg());
	log_set_stderr(true);
	node_delete(n);
	return NULL;
}

int node_run(struct node *n)
{
	char listen[INET_ADDR_STRLEN];
	inet_addr_format(&n->conf.listen_address, listen, sizeof(listen));
	LOG_INFO("cassinid %s starting: cluster '%s', %s/%s, listen %s, pid %ld",
		 CASSINI_VERSION, n->conf.cluster_name, n->conf.dc,
		 n->conf.rack, listen, (long)getpid());
	LOG_INFO("cassinid ready");
	if (event_base_dispatch(n->base) < 0) {
		LOG_ERROR("event loop failed");
		return NODE_EXIT_FAILURE;
	}
	LOG_INFO("shutdown complete (%s)",
		 n->stop_reason ? n->stop_reason : "loop ended");
	return NODE_EXIT_OK;
}

void node_stop(struct node *n, const char *reason)
{
	if (n->stop_reason)
		return;
	n->stop_reason = reason;
	LOG_INFO("shutting down (%s)", reason);
	/* Modules are stopped here, in reverse start order, as they land. */
	event_base_loopexit(n->base, NULL);
}

void node_delete(struct node *n)
{
	if (!n)
		return;
	if (n->sig_term)
		event_free(n->sig_term);
	if (n->sig_int)
		event_free(n->sig_int);
	cql_service_delete(n->cql);
	if (n->env)
		env_real_delete(n->env);
	if (n->base)
		event_base_free(n->base);
	if (n->lock_fd >= 0)
		close(n->lock_fd); /* releases the flock */
	conf_free(&n->conf);
	log_close_file();
	free(n);
}
