/*
 * Certificate hot reloading, as Cassandra 4.1's SSLFactory
 * (checkCertFilesForHotReloading): a timer every ssl_hot_reload_period
 * (Cassandra's fixed 600 s) hands a job to a background thread that
 * stats the keystore and truststore of client_encryption_options and of
 * server_encryption_options; when a file's modification time, size or
 * inode changed, the section's contexts are made anew there (reading files
 * and parsing keys never runs on the event loop), and back on the loop
 * they replace the old ones for new connections. Established connections
 * keep the context they were made with (OpenSSL counts its references).
 * A broken new file keeps the old context and logs an error; it is not
 * tried again until a file changes again. docs/security.md.
 */
#include "client/proto/tls.h"
#include "common/env.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loopq.h"
#include "common/workers.h"
#include "node/cql_service.h"
#include "node/node_internal.h"

#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { SEC_CLIENT, SEC_SERVER, SEC_COUNT };

struct file_sig {
	const char *path; /* borrowed from the conf; NULL: not watched */
	bool present;
	int64_t mtime_ns, size;
	uint64_t ino, dev;
};

struct section {
	bool enabled;
	struct file_sig files[2]; /* keystore, truststore */
	/* the job's result, read on the loop once it is done */
	bool changed;
	struct ssl_ctx_st *server, *client; /* client: internode only */
	char error[600];
};

struct node_tls_reload {
	struct node *n;
	struct env_timer *timer;
	struct workers *worker;
	struct loopq *q;
	uint64_t period_us;
	bool stopping;
	struct section sec[SEC_COUNT];
};

static struct file_sig stat_file(const char *path)
{
	struct file_sig s = {.path = path};
	struct stat st;
	if (path && stat(path, &st) == 0) {
		s.present = true;
		s.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 +
			     st.st_mtim.tv_nsec;
		s.size = (int64_t)st.st_size;
		s.ino = (uint64_t)st.st_ino;
		s.dev = (uint64_t)st.st_dev;
	}
	return s;
}

/* Records the files' state; true when one differs from what was seen. */
static bool files_changed(struct section *sec)
{
	bool changed = false;
	for (size_t i = 0; i < 2; i++) {
		struct file_sig *f = &sec->files[i];
		if (!f->path)
			continue;
		struct file_sig now = stat_file(f->path);
		if (now.present != f->present || now.mtime_ns != f->mtime_ns ||
		    now.size != f->size || now.ino != f->ino ||
		    now.dev != f->dev)
			changed = true;
		*f = now;
	}
	return changed;
}

/* On the worker thread: only the sections' files and results, and the
 * conf (not changed while the node runs), are touched. */
static void check_run(void *arg)
{
	struct node_tls_reload *r = arg;
	const struct conf *c = &r->n->conf;
	for (size_t i = 0; i < SEC_COUNT; i++) {
		struct section *sec = &r->sec[i];
		sec->changed = sec->enabled && files_changed(sec);
		sec->server = sec->client = NULL;
		sec->error[0] = '\0';
		if (!sec->changed)
			continue;
		int rc = 0;
		if (i == SEC_CLIENT) {
			sec->server = cql_service_tls_context(
				&c->client_encryption,
				"client_encryption_options");
			rc = sec->server ? 0 : -1;
		} else {
			rc = node_internode_tls_contexts(&c->server_encryption,
							 &sec->server,
							 &sec->client);
		}
		if (rc != 0)
			snprintf(sec->error, sizeof(sec->error), "%s",
				 err_msg());
	}
}

static void check_done(void *arg)
{
	struct node_tls_reload *r = arg;
	struct node *n = r->n;
	static const char *const names[] = {"client_encryption_options",
					    "server_encryption_options"};
	for (size_t i = 0; i < SEC_COUNT; i++) {
		struct section *sec = &r->sec[i];
		if (!sec->changed)
			continue;
		if (r->stopping) {
			SSL_CTX_free(sec->server);
			SSL_CTX_free(sec->client);
		} else if (sec->error[0]) {
			LOG_ERROR("Failed to hot reload the SSL Certificates! "
				  "Please check the certificate files. (%s; "
				  "new connections keep the previous ones)",
				  sec->error);
		} else if (i == SEC_CLIENT) {
			LOG_INFO("SSL certificates have been updated. "
				 "Resetting the ssl contexts for new "
				 "connections. (%s)",
				 names[i]);
			cql_service_set_tls(n->cql, sec->server);
		} else {
			LOG_INFO("SSL certificates have been updated. "
				 "Resetting the ssl contexts for new "
				 "connections. (%s)",
				 names[i]);
			node_internode_tls_install(n, sec->server, sec->client);
		}
		sec->server = sec->client = NULL;
	}
	if (!r->stopping)
		env_timer_arm(n->env, r->timer, r->period_us);
}

static void tick(void *arg)
{
	struct node_tls_reload *r = arg;
	LOG_DEBUG("Checking whether certificates have been updated");
	workers_offload(r->worker, r->q, check_run, check_done, r);
}

static void reload_free(struct node_tls_reload *r);

int node_tls_reload_start(struct node *n)
{
	const struct conf *c = &n->conf;
	bool client = c->client_encryption.enabled;
	bool server = conf_internode_tls_set_up(&c->server_encryption);
	if ((!client && !server) || c->ssl_hot_reload_period_ms == 0)
		return 0;
	struct node_tls_reload *r = calloc(1, sizeof(*r));
	if (!r)
		return err_set(ERR_NOMEM, "certificate reloading");
	r->n = n;
	r->period_us = c->ssl_hot_reload_period_ms * 1000;
	const char *paths[SEC_COUNT][2] = {
		{c->client_encryption.keystore,
		 c->client_encryption.truststore},
		{c->server_encryption.keystore,
		 c->server_encryption.truststore},
	};
	r->sec[SEC_CLIENT].enabled = client;
	r->sec[SEC_SERVER].enabled = server;
	for (size_t i = 0; i < SEC_COUNT; i++)
		for (size_t j = 0; j < 2; j++) {
			const char *p = paths[i][j];
			/* at start, as the contexts were just read */
			r->sec[i].files[j] = stat_file(p && p[0] ? p : NULL);
		}
	if (!(r->timer = env_timer_new(n->env, tick, r)) ||
	    !(r->q = loopq_new(n->base)) ||
	    !(r->worker = workers_new_background(1, "tlsreload"))) {
		reload_free(r);
		return -1;
	}
	env_timer_arm(n->env, r->timer, r->period_us);
	n->tls_reload = r;
	return 0;
}

void node_tls_reload_stop(struct node *n)
{
	reload_free(n->tls_reload);
	n->tls_reload = NULL;
}

static void reload_free(struct node_tls_reload *r)
{
	if (!r)
		return;
	r->stopping = true;
	if (r->timer)
		env_timer_free(r->n->env, r->timer);
	workers_delete(r->worker); /* a check under way finishes */
	if (r->q)
		loopq_delete(r->q); /* its completion frees what it made */
	free(r);
}
