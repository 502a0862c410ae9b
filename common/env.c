/* env helpers written only against the env ops, shared by every env. */
#include "common/env.h"

#include "common/err.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int env_mkdir_p(struct env *e, const char *path)
{
	char tmp[PATH_MAX];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof(tmp))
		return err_set(ERR_INVALID, "bad directory path '%s'", path);
	memcpy(tmp, path, n + 1);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = '\0';
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int ex = env_exists(e, tmp);
		if (ex < 0)
			return -1;
		if (!ex && env_mkdir(e, tmp) != 0 && env_exists(e, tmp) != 1)
			return -1;
		*p = '/';
	}
	int ex = env_exists(e, tmp);
	if (ex < 0)
		return -1;
	if (!ex && env_mkdir(e, tmp) != 0 && env_exists(e, tmp) != 1)
		return -1;
	return 0;
}

int env_read_file(struct env *e, const char *path, size_t max_len,
		  uint8_t **out, size_t *len)
{
	struct env_file *f;
	if (env_file_open(e, path, ENV_FILE_READ, &f) != 0)
		return -1;
	int64_t size = env_file_size(f);
	if (size < 0) {
		env_file_close(f);
		return -1;
	}
	if ((uint64_t)size > max_len) {
		env_file_close(f);
		return err_set(ERR_NOMEM,
			       "%s: %lld bytes exceeds the %zu-byte limit",
			       path, (long long)size, max_len);
	}
	uint8_t *data = malloc((size_t)size + 1);
	if (!data) {
		env_file_close(f);
		return err_set(ERR_NOMEM, "%s: cannot allocate %lld bytes",
			       path, (long long)size);
	}
	ssize_t got = env_file_pread(f, data, (size_t)size, 0);
	env_file_close(f);
	if (got < 0) {
		free(data);
		return -1;
	}
	data[got] = '\0';
	*out = data;
	*len = (size_t)got;
	return 0;
}

static void dir_of(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		snprintf(dir, cap, ".");
	} else if (slash == path) {
		snprintf(dir, cap, "/");
	} else {
		snprintf(dir, cap, "%.*s", (int)(slash - path), path);
	}
}

int env_write_file_atomic(struct env *e, const char *path, const void *data,
			  size_t len)
{
	char tmp[PATH_MAX];
	char dir[PATH_MAX];
	struct env_file *f;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return err_set(ERR_INVALID, "path too long: %s", path);
	if (env_file_open(e, tmp,
			  ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_TRUNC,
			  &f) != 0)
		return -1;
	if ((len && env_file_append(f, data, len) != 0) ||
	    env_file_sync(f) != 0) {
		env_file_close(f);
		env_unlink(e, tmp);
		return -1;
	}
	if (env_file_close(f) != 0 || env_rename(e, tmp, path) != 0) {
		env_unlink(e, tmp);
		return -1;
	}
	dir_of(path, dir, sizeof(dir));
	return env_sync_dir(e, dir);
}

ssize_t env_file_pread_nowait(struct env_file *f, void *buf, size_t n,
			      uint64_t off)
{
	if (!f->ops->pread_nowait)
		return err_set(ERR_AGAIN, "no non-blocking reads here");
	return f->ops->pread_nowait(f, buf, n, off);
}
