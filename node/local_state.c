/* The node's persisted identity (see local_state.h). */
#define LOG_MODULE "node"
#include "node/local_state.h"

#include "common/err.h"
#include "common/log.h"
#include "common/uuid.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_NAME "local_state"
#define FILE_MAX  (64u * 1024u)

void local_state_free(struct local_state *s)
{
	free(s->tokens);
	s->tokens = NULL;
	s->token_count = 0;
}

int node_tokens_parse(const char *text, int64_t **out, size_t *count)
{
	size_t cap = 1;
	for (const char *p = text; *p; p++)
		if (*p == ',')
			cap++;
	if (cap > LOCAL_STATE_MAX_TOKENS)
		return err_set(ERR_INVALID, "more than %d tokens",
			       LOCAL_STATE_MAX_TOKENS);
	int64_t *t = malloc(cap * sizeof(*t));
	if (!t)
		return err_set(ERR_NOMEM, "tokens");
	size_t n = 0;
	const char *p = text;
	while (*p) {
		while (*p == ' ')
			p++;
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (end == p || errno == ERANGE) {
			free(t);
			return err_set(ERR_INVALID, "bad token in '%s'", text);
		}
		t[n++] = v;
		p = end;
		while (*p == ' ')
			p++;
		if (*p == ',')
			p++;
		else if (*p) {
			free(t);
			return err_set(ERR_INVALID, "bad token in '%s'", text);
		}
	}
	if (n == 0) {
		free(t);
		return err_set(ERR_INVALID, "no tokens in '%s'", text);
	}
	*out = t;
	*count = n;
	return 0;
}

char *local_state_tokens_text(const struct local_state *s)
{
	size_t cap = s->token_count * 22 + 1;
	char *text = malloc(cap);
	if (!text) {
		err_set(ERR_NOMEM, "tokens text");
		return NULL;
	}
	size_t len = 0;
	text[0] = '\0';
	for (size_t i = 0; i < s->token_count; i++)
		len += (size_t)snprintf(text + len, cap - len, "%s%lld",
					i ? "," : "", (long long)s->tokens[i]);
	return text;
}

static void new_host_id(struct env *env, char out[37])
{
	uint8_t b[16];
	uint64_t r1 = env_random(env), r2 = env_random(env);
	memcpy(b, &r1, 8);
	memcpy(b + 8, &r2, 8);
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* variant */
	uuid_format(b, out);
}

static int parse_file(char *text, struct local_state *s)
{
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *v = eq + 1;
		if (strcmp(line, "host_id") == 0) {
			if (strlen(v) != 36)
				return err_set(ERR_CORRUPT, "bad host_id");
			memcpy(s->host_id, v, 37);
		} else if (strcmp(line, "generation") == 0) {
			s->generation = strtoll(v, NULL, 10);
		} else if (strcmp(line, "bootstrap") == 0) {
			s->bootstrapping = strcmp(v, "in_progress") == 0;
		} else if (strcmp(line, "decommissioned") == 0) {
			s->decommissioned = strcmp(v, "true") == 0;
		} else if (strcmp(line, "tokens") == 0) {
			if (node_tokens_parse(v, &s->tokens, &s->token_count) !=
			    0)
				return -1;
		}
	}
	if (!s->host_id[0])
		return err_set(ERR_CORRUPT, "missing host_id");
	return 0;
}

int local_state_save(struct env *env, const char *dir,
		     const struct local_state *s)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, FILE_NAME);
	char *tokens = local_state_tokens_text(s);
	if (!tokens)
		return -1;
	size_t cap = strlen(tokens) + 256;
	char *text = malloc(cap);
	if (!text) {
		free(tokens);
		return err_set(ERR_NOMEM, "local state");
	}
	int len = snprintf(text, cap, "host_id=%s\ngeneration=%lld\n%s%s%s%s%s",
			   s->host_id, (long long)s->generation,
			   s->token_count ? "tokens=" : "", tokens,
			   s->token_count ? "\n" : "",
			   s->bootstrapping ? "bootstrap=in_progress\n" : "",
			   s->decommissioned ? "decommissioned=true\n" : "");
	int rc = env_write_file_atomic(env, path, text, (size_t)len);
	free(text);
	free(tokens);
	return rc;
}

int local_state_load(struct env *env, const char *dir, struct local_state *out)
{
	char path[PATH_MAX];
	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/%s", dir, FILE_NAME);
	uint8_t *text;
	size_t len;
	if (env_read_file(env, path, FILE_MAX, &text, &len) == 0) {
		int rc = parse_file((char *)text, out);
		free(text);
		if (rc != 0) {
			local_state_free(out);
			return err_prefix("%s", path);
		}
		LOG_INFO("loaded host id %s, %zu tokens, generation %lld from "
			 "%s",
			 out->host_id, out->token_count,
			 (long long)out->generation, path);
	} else if (err_code() == ERR_NOT_FOUND) {
		new_host_id(env, out->host_id);
		LOG_INFO("new identity: host id %s (tokens are chosen once the "
			 "ring is known)",
			 out->host_id);
	} else {
		return -1;
	}
	int64_t now_s = env_wall_us(env) / 1000000;
	out->generation = now_s > out->generation ? now_s : out->generation + 1;
	if (local_state_save(env, dir, out) != 0) {
		local_state_free(out);
		return -1;
	}
	return 0;
}
