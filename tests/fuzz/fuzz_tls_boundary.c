/* libFuzzer: the native transport's TLS boundary, in process. The real
 * CQL server (client/proto/server.c) with a TLS context made by
 * cql_tls_context_new from a PEM keystore, on one end of a socketpair
 * (cql_server_adopt); the fuzzer's input is what a client sends:
 *
 *   byte 0    bit 0: the port is optional TLS (else TLS only);
 *             bit 1: the bytes after the handshake go raw on the socket
 *             (else inside TLS records, as CQL frames would)
 *   bytes 1-2 n, big-endian: how many of the rest come before the handshake
 *   then      n bytes of garbage before a ClientHello, then a real TLS
 *             handshake by an OpenSSL client, then the rest after it.
 *
 * Checked: nothing crashes or leaks (ASan), a TLS-only port never answers
 * plaintext (what it sends before a handshake starts with a TLS record:
 * an alert, or a ServerHello when the garbage began a ClientHello), and
 * once the client closes the server holds no connection. */
#include "client/proto/proto.h"
#include "client/proto/server.h"
#include "client/proto/tls.h"
#include "common/buf.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STEPS 64 /* loop turns a phase may take before it gives up */

static struct event_base *base;
static struct cql_server *tls_only, *optional;
static SSL_CTX *client_ctx;

/* Statements (after a STARTUP sent in TLS records) get an error. */
static void execute(void *arg, struct cql_request *req,
		    const struct cql_request_info *info, const uint8_t *body,
		    size_t len)
{
	(void)arg, (void)body, (void)len;
	struct buf b = {0};
	if (cql_encode_error(&b, info->version, info->stream, CQL_ERR_SERVER,
			     "fuzz") != 0) {
		buf_free(&b);
		b = (struct buf){0};
	}
	cql_request_reply(req, b.data, b.len);
	buf_free(&b);
}

/* A self-signed P-256 keystore in a temporary PEM file (key, then
 * certificate, as node keystores are), so the server's context comes
 * from cql_tls_context_new like the node's. */
static void make_keystore(char *path, size_t cap)
{
	snprintf(path, cap, "%s/cassini-fuzz-tls-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0)
		abort();
	FILE *f = fdopen(fd, "w");
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	if (!f || !key || !x)
		abort();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, key);
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
				   (const unsigned char *)"fuzz", -1, -1, 0);
	X509_set_issuer_name(x, n);
	if (X509_sign(x, key, EVP_sha256()) <= 0 ||
	    PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) != 1 ||
	    PEM_write_X509(f, x) != 1)
		abort();
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(key);
}

static void init(void)
{
	/* OpenSSL writes with write(2): a peer gone is EPIPE, as cassinid
	 * has it (it ignores SIGPIPE too) */
	signal(SIGPIPE, SIG_IGN);
	char path[4096];
	make_keystore(path, sizeof(path));
	struct cql_tls_config tc = {.keystore = path};
	SSL_CTX *server_ctx = cql_tls_context_new(&tc);
	unlink(path);
	if (!server_ctx)
		abort();
	base = event_base_new();
	static const struct cql_executor exec = {.execute = execute};
	struct cql_server_config cfg;
	cql_server_config_defaults(&cfg);
	cfg.max_frame_size = 1u << 16;
	cfg.auth_failure_delay_ms = 0;
	cfg.tls = server_ctx; /* address INET_NONE: no listener */
	tls_only = cql_server_new(base, &cfg, &exec);
	cfg.tls_optional = true;
	optional = cql_server_new(base, &cfg, &exec);
	client_ctx = SSL_CTX_new(TLS_client_method());
	if (!base || !tls_only || !optional || !client_ctx)
		abort();
	SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, NULL);
}

static void turn(void)
{
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Writes all of p (turning the loop when the socket is full); false when
 * the server closed. */
static bool send_raw(int fd, const uint8_t *p, size_t n)
{
	for (int steps = 0; n > 0 && steps < STEPS * 16;) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return false;
		turn();
		steps++;
	}
	return true;
}

/* Reads what the server sent so far; -1 once it closed. */
static ssize_t drain_raw(int fd, uint8_t *first)
{
	uint8_t b[16384];
	ssize_t total = 0;
	for (;;) {
		ssize_t r = recv(fd, b, sizeof(b), 0);
		if (r == 0)
			return -1;
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? total
								       : -1;
		if (total == 0 && first)
			*first = b[0];
		total += r;
	}
}

/* The client's handshake, stepping the server between tries: 1 done, 0
 * not (refused, closed or stuck). */
static int handshake(SSL *ssl)
{
	for (int steps = 0; steps < STEPS; steps++) {
		ERR_clear_error();
		int r = SSL_connect(ssl);
		if (r == 1)
			return 1;
		int e = SSL_get_error(ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return 0;
		turn();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!base)
		init();
	if (size < 3)
		return 0;
	bool opt = data[0] & 1, raw_after = data[0] & 2;
	size_t before = (size_t)data[1] << 8 | data[2];
	data += 3;
	size -= 3;
	if (before > size)
		before = size;
	struct cql_server *srv = opt ? optional : tls_only;

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		abort();
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	struct inet_addr peer;
	inet_addr_parse("127.0.0.1:50000", 0, &peer);
	cql_server_adopt(srv, sv[1], &peer);

	bool closed = false, answered = false;
	if (before > 0) {
		closed = !send_raw(sv[0], data, before);
		for (int i = 0; i < 4 && !closed; i++) {
			turn();
			uint8_t first = 0;
			ssize_t got = drain_raw(sv[0], answered ? NULL : &first);
			if (got < 0)
				closed = true;
			/* TLS only: the first byte back starts an alert
			 * (0x15) or a handshake record (0x16, when the
			 * garbage began a ClientHello); never a CQL frame */
			if (got > 0 && !answered && !opt && first != 0x15 &&
			    first != 0x16)
				abort();
			answered = answered || got > 0;
		}
	}
	if (!closed) {
		SSL *ssl = SSL_new(client_ctx);
		if (!ssl || SSL_set_fd(ssl, sv[0]) != 1)
			abort();
		int done = handshake(ssl);
		const uint8_t *after = data + before;
		size_t n = size - before;
		if (done && n > 0) {
			if (raw_after) {
				(void)send_raw(sv[0], after, n);
			} else {
				for (int steps = 0; n > 0 && steps < STEPS;
				     steps++) {
					int w = SSL_write(ssl, after, (int)n);
					if (w > 0) {
						after += w;
						n -= (size_t)w;
					} else if (SSL_get_error(ssl, w) !=
						   SSL_ERROR_WANT_WRITE) {
						break;
					}
					turn();
				}
			}
			for (int i = 0; i < 4; i++) {
				turn();
				char sink[16384];
				ERR_clear_error();
				while (SSL_read(ssl, sink, sizeof(sink)) > 0)
					;
			}
		}
		SSL_free(ssl);
	}
	close(sv[0]);
	/* the server sees the close and lets the connection go */
	struct cql_server_stats st;
	for (int i = 0; i < STEPS; i++) {
		turn();
		cql_server_stats(srv, &st);
		if (st.connections == 0)
			break;
	}
	cql_server_stats(srv, &st);
	if (st.connections != 0)
		abort();
	ERR_clear_error();
	return 0;
}
