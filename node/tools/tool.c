/*
 * cassini-tool: the operator CLI in nodetool's role. Sends one command to a
 * node's admin endpoint and prints the answer.
 *
 *   cassini-tool [-h HOST] [-p PORT] [-c CONF_DIR] [-u USER
 *                [-pw PASSWORD | -pwf FILE]] [--ssl [--truststore FILE]
 *                [--keystore FILE] [--check-hostname]] COMMAND [ARGS...]
 *
 * -c reads the node's admin_address and admin_port from its node.yaml
 * (what an installed node's service unit uses to drain it on stop);
 * -h and -p override them. -u/-pw (or a password file of `user password`
 * lines, nodetool's -pwf) are a superuser's credentials, needed when the
 * node runs PasswordAuthenticator. --ssl speaks TLS to a node with
 * jmx_encryption_options (docs/security.md): the node's certificate is
 * verified against --truststore (else the system's CAs), --keystore shows
 * ours, --check-hostname wants the certificate to name HOST; with -c a
 * node.yaml with jmx_encryption_options enabled turns TLS on, its
 * truststore and keystore the defaults.
 *
 * Exit status: the command's (0 on success), 1 when the node cannot be
 * reached (`cannot connect to HOST:PORT`) or the arguments are wrong.
 * Long commands (repair) print progress frames as they arrive.
 *
 * The node answers within TIMEOUT_MS, or says at once that the command
 * runs on (a progress frame, maybe empty: every command the node answers
 * later, such as compact, cleanup, scrub or repair), and the tool then
 * waits for its end however long it takes, as nodetool does; the node
 * closing the connection ends the wait. CASSINI_TOOL_ANSWER_TIMEOUT_MS
 * replaces TIMEOUT_MS (tests: a short one shows that a long command is
 * waited for).
 */
#include "client/proto/tls.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/inet.h"
#include "conf/conf.h"
#include "node/messaging_msg.h"
#include "node/node.h"
#include "node/tools/tool_sstable.h"
#include "node/tools/tool_tokens.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TIMEOUT_MS 10000

/* The wait for the first answer (TIMEOUT_MS or the environment's). */
static int answer_timeout_ms(void)
{
	const char *v = getenv("CASSINI_TOOL_ANSWER_TIMEOUT_MS");
	char *end;
	long ms = v ? strtol(v, &end, 10) : 0;
	return v && *v && !*end && ms > 0 && ms <= INT32_MAX ? (int)ms
							     : TIMEOUT_MS;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cassini-tool [-h HOST] [-p PORT] [-c CONF_DIR]\n"
		"                    [-u USER [-pw PASSWORD | -pwf FILE]] "
		"COMMAND [ARGS...]\n"
		"\n"
		"-u/--username, -pw/--password, -pwf/--password-file (lines "
		"of `user password`):\n"
		"a superuser's credentials, for a node with "
		"PasswordAuthenticator.\n"
		"--ssl: TLS (a node with jmx_encryption_options); "
		"--truststore FILE\n(PEM or .p12; else the system's CAs), "
		"--truststore-password P, --keystore FILE\nand "
		"--keystore-password P (a client certificate), "
		"--check-hostname (the\nnode's certificate must name HOST: an "
		"IP subjectAltName for an\naddress, a DNS one for a host "
		"name).\n"
		"Talks to a node's admin endpoint (default 127.0.0.1:7199;\n"
		"-c: the admin_address and admin_port of CONF_DIR/node.yaml).\n"
		"`cassini-tool help` lists the commands the node knows:\n"
		"status [keyspace], ring [keyspace], info [-T], gossipinfo, "
		"describecluster,\n"
		"describering <keyspace>, getendpoints <keyspace> <table> "
		"<key>,\n"
		"version, drain, stopdaemon.\n"
		"`cassini-tool generatetokens --help`: tokens for a planned "
		"datacenter (offline).\n"
		"`cassini-tool sstablemetadata FILE...`, `cassini-tool "
		"sstabledump FILE`: what an\nSSTable holds (offline).\n"
		"`cassini-tool sstableverify FILE...`: every checksum "
		"(offline).\n"
		"`cassini-tool sstableexpiredblockers FILE...`: what keeps "
		"expired SSTables\non disk (offline).\n"
		"\n"
		"<keyspace> is a keyspace of the schema or an explicit "
		"replication:\n"
		"class=NetworkTopologyStrategy,dc1=3,dc2=3.\n");
}

/* nodetool's password file: lines of `user password`; the line of
 * `user` (NULL: the first). */
static int read_password_file(const char *path, const char *user,
			      char out_user[256], char out_password[256])
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "cassini-tool: %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	char line[600];
	int rc = 1;
	while (fgets(line, sizeof(line), f)) {
		char u[256], p[256];
		if (line[0] == '#' || sscanf(line, "%255s %255s", u, p) != 2)
			continue;
		if (user && strcmp(u, user) != 0)
			continue;
		memcpy(out_user, u, sizeof(u));
		memcpy(out_password, p, sizeof(p));
		rc = 0;
		break;
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	if (rc)
		fprintf(stderr, "cassini-tool: %s has no password%s%s\n", path,
			user ? " for " : "", user ? user : "");
	return rc;
}

static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	return r == 1 ? 0 : -1;
}

/* The admin connection: a non-blocking socket, with TLS or not. */
struct chan {
	int fd;
	SSL *ssl;
};

/* After an SSL call returned r <= 0: waits for what it needs; -1 when it
 * failed. */
static int ssl_wait(struct chan *c, int r, int timeout_ms)
{
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		return wait_fd(c->fd, POLLIN, timeout_ms);
	case SSL_ERROR_WANT_WRITE:
		return wait_fd(c->fd, POLLOUT, timeout_ms);
	default:
		return -1;
	}
}

static int write_all(struct chan *c, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w;
		if (c->ssl) {
			int r = SSL_write(c->ssl, p, (int)n);
			if (r <= 0) {
				if (ssl_wait(c, r, TIMEOUT_MS) != 0)
					return -1;
				continue;
			}
			w = r;
		} else {
			w = write(c->fd, p, n);
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			if (wait_fd(c->fd, POLLOUT, TIMEOUT_MS) != 0)
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(struct chan *c, uint8_t *p, size_t n, int timeout_ms)
{
	while (n > 0) {
		ssize_t r;
		if (c->ssl) {
			int k = SSL_read(c->ssl, p, (int)n);
			if (k <= 0) {
				if (ssl_wait(c, k, timeout_ms) != 0)
					return -1;
				continue;
			}
			r = k;
		} else {
			if (wait_fd(c->fd, POLLIN, timeout_ms) != 0)
				return -1;
			r = read(c->fd, p, n);
		}
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

struct tls_opts {
	bool on, check_hostname;
	const char *truststore, *truststore_password;
	const char *keystore, *keystore_password;
};

/* The TLS handshake on c->fd; prints why it failed. */
static int tls_start(struct chan *c, const struct tls_opts *o, const char *name,
		     const char *where)
{
	struct cql_tls_config tc = {
		.client = true,
		.truststore = o->truststore,
		.truststore_password = o->truststore_password,
		.keystore = o->keystore,
		.keystore_password = o->keystore_password,
	};
	SSL_CTX *ctx = cql_tls_context_new(&tc);
	if (!ctx) {
		fprintf(stderr, "cassini-tool: %s\n", err_msg());
		return -1;
	}
	if (!o->truststore || !o->truststore[0]) {
		SSL_CTX_set_default_verify_paths(ctx);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	c->ssl = SSL_new(ctx);
	SSL_CTX_free(ctx); /* the SSL holds its reference */
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1 ||
	    (o->check_hostname && cql_tls_expect_name(c->ssl, name) != 0)) {
		fprintf(stderr, "cassini-tool: TLS: out of memory\n");
		return -1;
	}
	for (;;) {
		ERR_clear_error();
		int r = SSL_connect(c->ssl);
		if (r == 1)
			return 0;
		int e = SSL_get_error(c->ssl, r);
		if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
		    wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
			    TIMEOUT_MS) == 0)
			continue;
		long v = SSL_get_verify_result(c->ssl);
		char why[256] = "the node closed the connection (is "
				"jmx_encryption_options enabled?)";
		if (v != X509_V_OK)
			snprintf(why, sizeof(why),
				 "certificate verify failed: %s",
				 X509_verify_cert_error_string(v));
		else if (ERR_peek_error())
			ERR_error_string_n(ERR_get_error(), why, sizeof(why));
		fprintf(stderr,
			"cassini-tool: TLS handshake with %s failed: "
			"%s\n",
			where, why);
		return -1;
	}
}

static void chan_close(struct chan *c)
{
	if (c->ssl) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	close(c->fd);
}

/* -h NAME: its first address (a blocking look-up: this is a command-line
 * tool); the TLS check then wants NAME in the certificate. */
static int resolve_host(const char *name, struct inet_addr *out)
{
	if (inet_addr_resolve(name, out) == 0)
		return 0;
	fprintf(stderr, "cassini-tool: %s\n", err_msg());
	return -1;
}

static int connect_to(const struct inet_addr *a)
{
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(a, &ss);
	int fd = socket(ss.ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, (socklen_t)sl) != 0) {
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (errno != EINPROGRESS ||
		    wait_fd(fd, POLLOUT, TIMEOUT_MS) != 0 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 ||
		    soerr != 0) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

int main(int argc, char **argv)
{
	const char *host = NULL, *conf_dir = NULL;
	const char *user = NULL, *password = NULL, *password_file = NULL;
	long port = 0;
	struct tls_opts tls = {0};
	signal(SIGPIPE, SIG_IGN); /* a node closing: write's EPIPE */
	int i = 1;
	for (; i < argc; i++) {
		const char **tls_value =
			strcmp(argv[i], "--truststore") == 0 ? &tls.truststore
			: strcmp(argv[i], "--truststore-password") == 0
				? &tls.truststore_password
			: strcmp(argv[i], "--keystore") == 0 ? &tls.keystore
			: strcmp(argv[i], "--keystore-password") == 0
				? &tls.keystore_password
				: NULL;
		if (tls_value) {
			if (++i == argc)
				goto bad;
			*tls_value = argv[i];
			tls.on = true;
			continue;
		}
		if (strcmp(argv[i], "--ssl") == 0) {
			tls.on = true;
			continue;
		}
		if (strcmp(argv[i], "--check-hostname") == 0) {
			tls.on = tls.check_hostname = true;
			continue;
		}
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--host") == 0) {
			if (++i == argc)
				goto bad;
			host = argv[i];
		} else if (strcmp(argv[i], "-p") == 0 ||
			   strcmp(argv[i], "--port") == 0) {
			char *end;
			if (++i == argc)
				goto bad;
			port = strtol(argv[i], &end, 10);
			if (*end || port < 1 || port > 65535) {
				fprintf(stderr, "cassini-tool: bad port '%s'\n",
					argv[i]);
				return 1;
			}
		} else if (strcmp(argv[i], "-u") == 0 ||
			   strcmp(argv[i], "--username") == 0) {
			if (++i == argc)
				goto bad;
			user = argv[i];
		} else if (strcmp(argv[i], "-pw") == 0 ||
			   strcmp(argv[i], "--password") == 0) {
			if (++i == argc)
				goto bad;
			password = argv[i];
		} else if (strcmp(argv[i], "-pwf") == 0 ||
			   strcmp(argv[i], "--password-file") == 0) {
			if (++i == argc)
				goto bad;
			password_file = argv[i];
		} else if (strcmp(argv[i], "-c") == 0 ||
			   strcmp(argv[i], "--conf") == 0) {
			if (++i == argc)
				goto bad;
			conf_dir = argv[i];
		} else if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("cassini-tool %s\n", CASSINI_VERSION);
			return 0;
		} else {
			break;
		}
	}
	if (i == argc)
		goto bad;
	if (strcmp(argv[i], "generatetokens") == 0)
		return tool_generatetokens(argc - i - 1, argv + i + 1);
	if (strcmp(argv[i], "sstablemetadata") == 0)
		return tool_sstablemetadata(argc - i - 1, argv + i + 1);
	if (strcmp(argv[i], "sstabledump") == 0)
		return tool_sstabledump(argc - i - 1, argv + i + 1);
	if (strcmp(argv[i], "sstableverify") == 0)
		return tool_sstableverify(argc - i - 1, argv + i + 1);
	if (strcmp(argv[i], "sstableexpiredblockers") == 0)
		return tool_sstableexpiredblockers(argc - i - 1, argv + i + 1);
	if (argc - i - 1 > ADMIN_MAX_ARGS) {
		fprintf(stderr, "cassini-tool: too many arguments\n");
		return 1;
	}
	struct inet_addr addr;
	if (conf_dir) {
		struct conf c;
		if (conf_load(&c, conf_dir) != 0) {
			fprintf(stderr, "cassini-tool: %s\n", err_msg());
			return 1;
		}
		addr = c.admin_address;
		const struct conf_client_encryption *je = &c.jmx_encryption;
		static char trust[PATH_MAX], trust_pw[256], key[PATH_MAX],
			key_pw[256];
		if (je->enabled) {
			tls.on = true;
			if (!tls.truststore && je->truststore &&
			    je->truststore[0]) {
				snprintf(trust, sizeof(trust), "%s",
					 je->truststore);
				snprintf(trust_pw, sizeof(trust_pw), "%s",
					 je->truststore_password
						 ? je->truststore_password
						 : "");
				tls.truststore = trust;
				tls.truststore_password = trust_pw;
			}
			if (!tls.keystore && je->keystore && je->keystore[0]) {
				snprintf(key, sizeof(key), "%s", je->keystore);
				snprintf(key_pw, sizeof(key_pw), "%s",
					 je->keystore_password
						 ? je->keystore_password
						 : "");
				tls.keystore = key;
				tls.keystore_password = key_pw;
			}
		}
		conf_free(&c);
	} else {
		inet_addr_parse("127.0.0.1:7199", 0, &addr);
	}
	uint16_t admin_port = addr.port;
	if (host && inet_addr_parse_host(host, &addr) != 0 &&
	    resolve_host(host, &addr) != 0)
		return 1;
	addr.port = port ? (uint16_t)port : admin_port;
	char where[INET_ADDR_STRLEN];
	inet_addr_format(&addr, where, sizeof(where));

	char file_user[256], file_password[256];
	if (password_file && !password) {
		if (read_password_file(password_file, user, file_user,
				       file_password) != 0)
			return 1;
		user = file_user;
		password = file_password;
	}
	if (password && !user) {
		fprintf(stderr, "cassini-tool: a password without -u USER\n");
		return 1;
	}
	/* import's directories are the node's to open: relative ones are
	 * made absolute here, as the operator meant them */
	static char abs_dirs[ADMIN_MAX_ARGS][PATH_MAX];
	const char *args[ADMIN_MAX_ARGS + 1];
	size_t nargs = (size_t)(argc - i - 1);
	for (size_t a = 0, pos = 0; a < nargs; a++) {
		const char *v = argv[i + 1 + a];
		args[a] = v;
		if (strcmp(argv[i], "import") != 0 || v[0] == '-' ||
		    pos++ < 2 || v[0] == '/')
			continue;
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof(cwd)) &&
		    (size_t)snprintf(abs_dirs[a], PATH_MAX, "%s/%s", cwd, v) <
			    PATH_MAX)
			args[a] = abs_dirs[a];
	}
	struct buf req = {0};
	if (buf_put_be32(&req, 0) != 0 ||
	    admin_request_encode_auth(argv[i], nargs, args, user,
				      user ? (password ? password : "") : NULL,
				      &req) != 0) {
		fprintf(stderr, "cassini-tool: out of memory\n");
		return 1;
	}
	be32_store(req.data, (uint32_t)(req.len - 4));

	struct chan ch = {.fd = connect_to(&addr)};
	if (ch.fd < 0) {
		fprintf(stderr, "cannot connect to %s\n", where);
		buf_free(&req);
		return 1;
	}
	char host_ip[INET_ADDR_STRLEN];
	inet_addr_format_host(&addr, host_ip, sizeof(host_ip));
	if (tls.on && tls_start(&ch, &tls, host ? host : host_ip, where) != 0) {
		buf_free(&req);
		chan_close(&ch);
		return 1;
	}
	int rc = write_all(&ch, req.data, req.len);
	buf_free(&req);
	if (rc != 0) {
		fprintf(stderr, "cassini-tool: cannot send to %s\n", where);
		chan_close(&ch);
		return 1;
	}
	/* Progress frames (more) until the final answer; once a command
	 * reports progress it may run long, so reads then wait for good. */
	int timeout = answer_timeout_ms();
	for (;;) {
		uint8_t hdr[4];
		if (read_all(&ch, hdr, 4, timeout) != 0) {
			fprintf(stderr,
				"cassini-tool: %s closed the connection "
				"without answering\n",
				where);
			chan_close(&ch);
			return 1;
		}
		uint32_t len = be32_load(hdr);
		if (len > ADMIN_RESPONSE_MAX) {
			fprintf(stderr,
				"cassini-tool: answer of %u bytes from %s\n",
				len, where);
			chan_close(&ch);
			return 1;
		}
		uint8_t *body = malloc(len ? len : 1);
		struct admin_response resp;
		if (!body || read_all(&ch, body, len, timeout) != 0 ||
		    admin_response_decode(body, len, &resp) != 0) {
			fprintf(stderr, "cassini-tool: bad answer from %s\n",
				where);
			free(body);
			chan_close(&ch);
			return 1;
		}
		free(body);
		fputs(resp.output, stdout);
		fputs(resp.error, stderr);
		if (resp.more) {
			fflush(stdout);
			admin_response_free(&resp);
			timeout = -1;
			continue;
		}
		chan_close(&ch);
		int status = resp.status;
		admin_response_free(&resp);
		return status;
	}
bad:
	usage(stderr);
	return 1;
}
