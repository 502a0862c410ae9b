/*
 * protobuf-c <-> plain structs for messaging.proto and admin.proto. Every
 * string is length-checked and copied into fixed or owned storage; every
 * address validated; nothing protobuf-c leaves this file.
 */
#include "node/messaging_msg.h"

#include "common/err.h"
#include "node/admin.pb-c.h"
#include "node/messaging.pb-c.h"

#include <stdlib.h>
#include <string.h>

static int pack(const ProtobufCMessage *m, struct buf *out)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *p = buf_extend(out, n);
	if (!p && n)
		return err_set(ERR_NOMEM, "packing a message");
	if (n)
		protobuf_c_message_pack(m, p);
	return 0;
}

static int copy_name(char *dst, size_t cap, const char *src, const char *what)
{
	size_t n = strlen(src);
	if (n >= cap)
		return err_set(ERR_PROTOCOL, "%s of %zu bytes", what, n);
	memcpy(dst, src, n + 1);
	return 0;
}

/* ---- handshake ----------------------------------------------------------- */

int messaging_handshake_encode(const struct messaging_handshake *h,
			       struct buf *out)
{
	Cassini__Node__Handshake m = CASSINI__NODE__HANDSHAKE__INIT;
	m.cluster_name = (char *)h->cluster_name;
	m.partitioner = (char *)h->partitioner;
	m.messaging_version = h->version;
	m.host_id = (char *)h->host_id;
	m.dc = (char *)h->dc;
	m.rack = (char *)h->rack;
	m.ip.data = (uint8_t *)h->addr.ip;
	m.ip.len = h->addr.family == INET_V6 ? 16 : 4;
	m.port = h->addr.port;
	return pack(&m.base, out);
}

int messaging_handshake_decode(const uint8_t *data, size_t len,
			       struct messaging_handshake *out)
{
	memset(out, 0, sizeof(*out));
	if (len > MESSAGING_HANDSHAKE_MAX)
		return err_set(ERR_PROTOCOL, "handshake of %zu bytes", len);
	Cassini__Node__Handshake *m =
		cassini__node__handshake__unpack(NULL, len, data);
	if (!m)
		return err_set(ERR_PROTOCOL, "undecodable handshake");
	int rc = 0;
	if (copy_name(out->cluster_name, sizeof(out->cluster_name),
		      m->cluster_name, "cluster name") ||
	    copy_name(out->partitioner, sizeof(out->partitioner),
		      m->partitioner, "partitioner") ||
	    copy_name(out->host_id, sizeof(out->host_id), m->host_id,
		      "host id") ||
	    copy_name(out->dc, sizeof(out->dc), m->dc, "dc") ||
	    copy_name(out->rack, sizeof(out->rack), m->rack, "rack")) {
		rc = -1;
	} else if ((m->ip.len != 4 && m->ip.len != 16) || m->port == 0 ||
		   m->port > 65535) {
		rc = err_set(ERR_PROTOCOL, "bad advertised address");
	} else {
		out->version = m->messaging_version;
		out->addr.family = m->ip.len == 4 ? INET_V4 : INET_V6;
		memcpy(out->addr.ip, m->ip.data, m->ip.len);
		out->addr.port = (uint16_t)m->port;
	}
	cassini__node__handshake__free_unpacked(m, NULL);
	return rc;
}

/* ---- envelopes ----------------------------------------------------------- */

int messaging_envelope_frame(uint32_t verb, uint64_t request_id,
			     int64_t deadline_ms, bool response,
			     const void *payload, size_t len, struct buf *out)
{
	Cassini__Node__Envelope m = CASSINI__NODE__ENVELOPE__INIT;
	m.verb = verb;
	m.request_id = request_id;
	m.deadline_ms = deadline_ms;
	m.response = response;
	m.payload.data = (uint8_t *)payload;
	m.payload.len = len;
	size_t n = protobuf_c_message_get_packed_size(&m.base);
	if (n > UINT32_MAX)
		return err_set(ERR_INVALID, "message of %zu bytes", n);
	size_t start = out->len;
	if (buf_put_be32(out, (uint32_t)n) != 0)
		return err_set(ERR_NOMEM, "framing a message");
	if (pack(&m.base, out) != 0) {
		out->len = start;
		return -1;
	}
	return 0;
}

int messaging_envelope_decode(const uint8_t *data, size_t len,
			      struct messaging_envelope *out)
{
	memset(out, 0, sizeof(*out));
	Cassini__Node__Envelope *m =
		cassini__node__envelope__unpack(NULL, len, data);
	if (!m)
		return err_set(ERR_PROTOCOL, "undecodable envelope");
	if (m->verb == 0) {
		cassini__node__envelope__free_unpacked(m, NULL);
		return err_set(ERR_PROTOCOL, "envelope without a verb");
	}
	out->verb = m->verb;
	out->request_id = m->request_id;
	out->deadline_ms = m->deadline_ms;
	out->response = m->response;
	out->payload = m->payload.data;
	out->len = m->payload.len;
	out->pb = m;
	return 0;
}

void messaging_envelope_free(struct messaging_envelope *e)
{
	if (e->pb)
		cassini__node__envelope__free_unpacked(e->pb, NULL);
	memset(e, 0, sizeof(*e));
}

/* ---- admin --------------------------------------------------------------- */

int admin_request_encode_auth(const char *command, size_t argc,
			      const char *const *argv, const char *username,
			      const char *password, struct buf *out)
{
	Cassini__Admin__Request m = CASSINI__ADMIN__REQUEST__INIT;
	m.command = (char *)command;
	m.n_args = argc;
	m.args = (char **)argv;
	if (username)
		m.username = (char *)username;
	if (password)
		m.password = (char *)password;
	return pack(&m.base, out);
}

int admin_request_encode(const char *command, size_t argc,
			 const char *const *argv, struct buf *out)
{
	return admin_request_encode_auth(command, argc, argv, NULL, NULL, out);
}

int admin_request_decode(const uint8_t *data, size_t len,
			 struct admin_request *out)
{
	memset(out, 0, sizeof(*out));
	if (len > ADMIN_REQUEST_MAX)
		return err_set(ERR_PROTOCOL, "request of %zu bytes", len);
	Cassini__Admin__Request *m =
		cassini__admin__request__unpack(NULL, len, data);
	if (!m)
		return err_set(ERR_PROTOCOL, "undecodable admin request");
	int rc = copy_name(out->command, sizeof(out->command), m->command,
			   "command");
	if (rc == 0 && m->n_args > ADMIN_MAX_ARGS)
		rc = err_set(ERR_PROTOCOL, "%zu arguments", m->n_args);
	for (size_t i = 0; rc == 0 && i < m->n_args; i++) {
		if (strlen(m->args[i]) > ADMIN_ARG_MAX) {
			rc = err_set(ERR_PROTOCOL, "argument too long");
			break;
		}
		out->argv[i] = strdup(m->args[i]);
		if (!out->argv[i]) {
			rc = err_set(ERR_NOMEM, "admin arguments");
			break;
		}
		out->argc++;
	}
	if (rc == 0 && m->username && m->username[0] &&
	    (strlen(m->username) > ADMIN_ARG_MAX ||
	     (m->password && strlen(m->password) > ADMIN_ARG_MAX)))
		rc = err_set(ERR_PROTOCOL, "credentials too long");
	if (rc == 0 && m->username && m->username[0] &&
	    (!(out->username = strdup(m->username)) ||
	     !(out->password = strdup(m->password ? m->password : ""))))
		rc = err_set(ERR_NOMEM, "admin credentials");
	if (m->password)
		explicit_bzero(m->password, strlen(m->password));
	cassini__admin__request__free_unpacked(m, NULL);
	if (rc != 0)
		admin_request_free(out);
	return rc;
}

void admin_request_free(struct admin_request *r)
{
	for (size_t i = 0; i < r->argc; i++)
		free(r->argv[i]);
	r->argc = 0;
	free(r->username);
	if (r->password)
		explicit_bzero(r->password, strlen(r->password));
	free(r->password);
	r->username = r->password = NULL;
}

int admin_response_encode(int status, const char *output, const char *error,
			  struct buf *out)
{
	Cassini__Admin__Response m = CASSINI__ADMIN__RESPONSE__INIT;
	m.status = status;
	m.output = (char *)(output ? output : "");
	m.error = (char *)(error ? error : "");
	return pack(&m.base, out);
}

int admin_progress_encode(const char *output, struct buf *out)
{
	Cassini__Admin__Response m = CASSINI__ADMIN__RESPONSE__INIT;
	m.output = (char *)(output ? output : "");
	m.error = (char *)"";
	m.more = true;
	return pack(&m.base, out);
}

int admin_response_decode(const uint8_t *data, size_t len,
			  struct admin_response *out)
{
	memset(out, 0, sizeof(*out));
	if (len > ADMIN_RESPONSE_MAX)
		return err_set(ERR_PROTOCOL, "response of %zu bytes", len);
	Cassini__Admin__Response *m =
		cassini__admin__response__unpack(NULL, len, data);
	if (!m)
		return err_set(ERR_PROTOCOL, "undecodable admin response");
	out->status = m->status;
	out->more = m->more;
	out->output = strdup(m->output);
	out->error = strdup(m->error);
	cassini__admin__response__free_unpacked(m, NULL);
	if (!out->output || !out->error) {
		admin_response_free(out);
		return err_set(ERR_NOMEM, "admin response");
	}
	return 0;
}

void admin_response_free(struct admin_response *r)
{
	free(r->output);
	free(r->error);
	r->output = r->error = NULL;
}
