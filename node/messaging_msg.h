/*
 * Internode and admin wire messages (messaging.proto, admin.proto) as plain
 * structs. messaging_msg.c is the only file that sees protobuf-c types.
 * Decoders take untrusted bytes and validate every field.
 */
#ifndef CASSINI_NODE_MESSAGING_MSG_H
#define CASSINI_NODE_MESSAGING_MSG_H

#include "common/buf.h"
#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MESSAGING_VERSION       1
#define MESSAGING_HANDSHAKE_MAX 4096u /* bytes of a handshake frame */
#define MESSAGING_NAME_MAX      256u  /* cluster, partitioner, dc, rack */

struct messaging_handshake {
	char cluster_name[MESSAGING_NAME_MAX + 1];
	char partitioner[MESSAGING_NAME_MAX + 1];
	uint32_t version;
	char host_id[40];
	char dc[MESSAGING_NAME_MAX + 1];
	char rack[MESSAGING_NAME_MAX + 1];
	struct inet_addr addr; /* the sender's advertised internode address */
};

/* A decoded envelope; `payload` points into storage freed by
 * messaging_envelope_free. */
struct messaging_envelope {
	uint32_t verb;
	uint64_t request_id;
	int64_t deadline_ms;
	bool response;
	const uint8_t *payload;
	size_t len;
	void *pb;
};

int messaging_handshake_encode(const struct messaging_handshake *h,
			       struct buf *out);
int messaging_handshake_decode(const uint8_t *data, size_t len,
			       struct messaging_handshake *out);

/* Appends a 4-byte length and the envelope to `out`. */
int messaging_envelope_frame(uint32_t verb, uint64_t request_id,
			     int64_t deadline_ms, bool response,
			     const void *payload, size_t len, struct buf *out);
int messaging_envelope_decode(const uint8_t *data, size_t len,
			      struct messaging_envelope *out);
void messaging_envelope_free(struct messaging_envelope *e);

/* Admin requests: at most ADMIN_MAX_ARGS arguments of ADMIN_ARG_MAX bytes. */
#define ADMIN_MAX_ARGS     32
#define ADMIN_ARG_MAX      1024
#define ADMIN_REQUEST_MAX  (64u * 1024u)
#define ADMIN_RESPONSE_MAX (64u * 1024u * 1024u)

struct admin_request {
	char command[64];
	size_t argc;
	char *argv[ADMIN_MAX_ARGS]; /* owned; admin_request_free */
	char *username, *password;  /* owned; NULL when not sent */
};

int admin_request_encode(const char *command, size_t argc,
			 const char *const *argv, struct buf *out);
/* With credentials (NULL: none). */
int admin_request_encode_auth(const char *command, size_t argc,
			      const char *const *argv, const char *username,
			      const char *password, struct buf *out);
int admin_request_decode(const uint8_t *data, size_t len,
			 struct admin_request *out);
void admin_request_free(struct admin_request *r);

/* output/error owned by the caller after decode (free()). */
struct admin_response {
	int status;
	char *output;
	char *error;
	bool more; /* a progress frame; the final answer follows */
};
int admin_response_encode(int status, const char *output, const char *error,
			  struct buf *out);
/* A progress frame (more = true) carrying `output`. */
int admin_progress_encode(const char *output, struct buf *out);
int admin_response_decode(const uint8_t *data, size_t len,
			  struct admin_response *out);
void admin_response_free(struct admin_response *r);

#endif
