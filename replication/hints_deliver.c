/*
 * The hint dispatcher: the throttle, delivery of each host's files through
 * the send hook (the state machine in hints.c's header comment), and the
 * hand-over of every hint to another node (hints_hand_over).
 */
#include "replication/hints_store_internal.h"

#include "common/err.h"

#define LOG_MODULE "hints"
#include "common/log.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hints_host_after(struct hint_host *x);

/* ---- throttle ------------------------------------------------------------ */

double hints_throttle_burst(const struct hints *h)
{
	return (double)h->throttle / 10.0;
}

/* Whether a send may go now (the bucket is not in debt). */
static bool throttle_ok(struct hints *h)
{
	if (h->throttle == 0)
		return true;
	uint64_t now = env_mono_us(h->env);
	double add = (double)(now - h->tokens_at) * (double)h->throttle / 1e6;
	h->tokens_at = now;
	h->tokens += add;
	if (h->tokens > hints_throttle_burst(h))
		h->tokens = hints_throttle_burst(h);
	return h->tokens > 0;
}

static void throttle_arm(struct hints *h)
{
	if (h->throttle_armed)
		return;
	double deficit = 1.0 - h->tokens;
	uint64_t delay = (uint64_t)(deficit * 1e6 / (double)h->throttle) + 1;
	if (delay < 1000)
		delay = 1000;
	h->throttle_armed = true;
	env_timer_arm(h->env, h->throttle_timer, delay);
}

void hints_pump_all(struct hints *h)
{
	size_t n = h->host_count;
	if (n == 0)
		return;
	size_t start = h->rr++ % n;
	for (size_t i = 0; i < n && i < h->host_count; i++) {
		struct hint_host *x = h->hosts[(start + i) % h->host_count];
		if (x->delivering)
			hints_host_pump(x);
	}
}

void hints_on_throttle(void *arg)
{
	struct hints *h = arg;
	h->throttle_armed = false;
	hints_pump_all(h);
}

/* ---- delivery ------------------------------------------------------------ */

static void host_damage(void *arg, enum hints_damage what, uint64_t off,
			uint64_t end)
{
	struct hint_host *x = arg;
	struct hint_file *f = x->cur;
	if (what == HINTS_DAMAGE_TORN || off < f->damage_hwm)
		return;
	f->damage_hwm = end;
	x->h->st.corrupt++;
	char path[PATH_MAX];
	hints_file_path(x->h, x, f->seq, path, sizeof(path));
	LOG_WARN("%s: corrupt hint data at offset %" PRIu64 "..%" PRIu64
		 " skipped",
		 path, off, end);
}

void hints_host_fail(struct hint_host *x, bool count)
{
	if (!x->failed && count)
		x->h->st.send_failures++;
	x->failed = true;
}

/* Back to idle once every send has called back. */
void hints_host_reset(struct hint_host *x)
{
	x->count = 0;
	x->head = 0;
	x->failed = false;
	x->delivering = false;
	if (x->cur) {
		x->pos = (struct hints_cursor){.off = x->acked_off,
					       .good_end = x->acked_off};
	}
}

/* A hand-over ends when no host is delivering and either a send failed
 * or no hint is left; a host with hints stored meanwhile starts again. */
static void hand_over_check(struct hints *h)
{
	if (!h->ho_send)
		return;
	bool left = false;
	for (size_t i = 0; i < h->host_count; i++) {
		struct hint_host *x = h->hosts[i];
		if (x->delivering)
			return;
		left |= x->files && !x->removed;
	}
	for (size_t i = 0; left && !h->ho_failed && i < h->host_count; i++)
		if (hints_host_start(h->hosts[i]))
			return; /* its end checks again */
	hints_handed_fn done = h->ho_done;
	void *arg = h->ho_done_arg;
	bool ok = !left && !h->ho_failed;
	h->ho_send = NULL;
	h->ho_done = NULL;
	done(arg, ok);
}

void hints_host_after(struct hint_host *x)
{
	struct hints *h = x->h;
	if (x->failed && x->outstanding == 0 && !x->pumping) {
		hints_host_reset(x);
		if (x->want_start) {
			x->want_start = false;
			hints_host_start(x);
		} else {
			/* Retry soon rather than at the next periodic check:
			 * a target that just restarted drops the first sends
			 * while its data path starts. */
			uint64_t ms = h->o.check_interval_ms < 1000
					      ? h->o.check_interval_ms
					      : 1000;
			if (h->check_timer) /* NULL once closed */
				env_timer_arm(h->env, h->check_timer,
					      ms * 1000);
		}
	}
	if (!x->delivering && !x->pumping)
		hand_over_check(h);
	hints_host_maybe_free(x);
}

void hints_host_clear_cur(struct hint_host *x)
{
	x->cur = NULL;
	x->epoch++;
	x->chunk_off = 0;
	x->chunk_len = 0;
	x->acked_off = 0;
	x->pos = (struct hints_cursor){0};
}

/* Every record of the current file is acknowledged: delete it. */
static void host_file_done(struct hint_host *x)
{
	struct hints *h = x->h;
	struct hint_file *f = x->cur;
	char path[PATH_MAX];
	hints_file_path(h, x, f->seq, path, sizeof(path));
	if (env_unlink(h->env, path) != 0 && err_code() != ERR_NOT_FOUND)
		LOG_WARN("cannot delete a delivered hint file: %s", err_msg());
	struct hint_file **p = &x->files;
	while (*p != f)
		p = &(*p)->next;
	*p = f->next;
	x->file_count--;
	x->bytes -= f->size;
	x->records -= f->records;
	free(f);
	hints_host_clear_cur(x);
}

/* Picks the oldest file; one still being written is finished first. */
static bool host_next_file(struct hint_host *x)
{
	if (!x->files)
		return false;
	hints_host_clear_cur(x);
	x->cur = x->files;
	hints_file_retire(x->h, x->cur);
	return true;
}

struct read_job {
	struct hint_host *x;
	struct env *env;
	uint64_t epoch;
	char path[PATH_MAX];
	uint64_t off;
	size_t want;
	size_t need; /* fewer bytes than this is an error */
	uint8_t *buf;
	size_t got;
	int status;
	char msg[ERR_MSG_MAX];
};

static void read_run(void *arg)
{
	struct read_job *j = arg;
	struct env_file *fp;
	j->status = -1;
	if (env_file_open(j->env, j->path, ENV_FILE_READ, &fp) != 0) {
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
		return;
	}
	ssize_t got = env_file_pread(fp, j->buf, j->want, j->off);
	if (got < 0) {
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
	} else if ((size_t)got < j->need) {
		snprintf(j->msg, sizeof(j->msg),
			 "short read: %zd bytes at offset %" PRIu64
			 ", expected %zu",
			 got, j->off, j->need);
	} else {
		j->got = (size_t)got;
		j->status = 0;
	}
	env_file_close(fp);
}

static void read_done(void *arg)
{
	struct read_job *j = arg;
	struct hint_host *x = j->x;
	struct hints *h = x->h;
	x->jobs--;
	x->read_busy = false;
	if (h->closing) {
		free(j->buf);
		free(j);
		hints_release(h);
		return;
	}
	if (j->epoch == x->epoch && !x->removed) {
		if (j->status != 0) {
			LOG_WARN("cannot read hints from %s: %s", j->path,
				 j->msg);
			hints_host_fail(x, true);
			free(j->buf);
		} else {
			free(x->chunk);
			x->chunk = j->buf;
			x->chunk_off = j->off;
			x->chunk_len = j->got;
		}
	} else {
		free(j->buf);
	}
	free(j);
	h->refs--;
	if (!x->pumping)
		hints_host_pump(x);
}

/* Reads at least `need` bytes at the cursor. */
static void host_read(struct hint_host *x, size_t need)
{
	struct hints *h = x->h;
	uint64_t left = x->cur->size - x->pos.off;
	size_t want = need > h->o.read_chunk ? need : h->o.read_chunk;
	if (want > left)
		want = (size_t)left;
	struct read_job *j = calloc(1, sizeof(*j));
	uint8_t *b = malloc(want ? want : 1);
	if (!j || !b) {
		free(j);
		free(b);
		LOG_WARN("cannot read hints: out of memory");
		hints_host_fail(x, true);
		return;
	}
	*j = (struct read_job){.x = x,
			       .env = h->env,
			       .epoch = x->epoch,
			       .off = x->pos.off,
			       .want = want,
			       .need = need < want ? need : want,
			       .buf = b};
	hints_file_path(h, x, x->cur->seq, j->path, sizeof(j->path));
	x->read_busy = true;
	x->jobs++;
	hints_offload(h, read_run, read_done, j);
}

static void on_sent(void *arg, int status)
{
	struct hint_slot *s = arg;
	struct hint_host *x = s->host;
	struct hints *h = x->h;
	x->outstanding--;
	if (hints_release(h))
		return;
	if (h->closing)
		return;
	if (s->epoch != x->epoch) {
		/* The file was dropped meanwhile. */
		hints_host_after(x);
		return;
	}
	s->done = true;
	s->ok = status == 0;
	if (status != 0) {
		hints_host_fail(x, true);
		h->ho_failed |= h->ho_send != NULL;
	}
	uint32_t cap = h->o.max_in_flight;
	while (x->count > 0) {
		struct hint_slot *head = &x->ring[x->head];
		if (!head->done || !head->ok)
			break;
		x->acked_off = head->end;
		h->st.delivered++;
		x->head = (x->head + 1) % cap;
		x->count--;
	}
	if (!x->pumping)
		hints_host_pump(x);
}

static bool host_may_send(const struct hint_host *x)
{
	const struct hints *h = x->h;
	return x->delivering && !x->failed && !x->removed &&
	       (!h->paused || h->ho_send) && !h->closing;
}

/* Sends what the window and the throttle allow. */
void hints_host_pump(struct hint_host *x)
{
	struct hints *h = x->h;
	uint32_t cap = h->o.max_in_flight;
	if (x->pumping)
		return;
	x->pumping = true;
	while (host_may_send(x)) {
		if (!x->cur && !host_next_file(x)) {
			x->delivering = false; /* all delivered */
			break;
		}
		if (x->count == cap)
			break;
		if (!throttle_ok(h)) {
			throttle_arm(h);
			break;
		}
		struct hints_record rec;
		size_t need = 0;
		enum hints_parse_result r = hints_parse_next(
			&x->pos, x->chunk, x->chunk_off, x->chunk_len,
			x->cur->size, &rec, &need, host_damage, x);
		if (r == HINTS_PARSE_NEED) {
			if (!x->read_busy)
				host_read(x, need);
			if (x->read_busy)
				break;
			continue;
		}
		if (r == HINTS_PARSE_END) {
			if (x->count > 0)
				break; /* wait for the acks */
			host_file_done(x);
			continue;
		}
		struct hint_slot *s = &x->ring[(x->head + x->count) % cap];
		*s = (struct hint_slot){.host = x,
					.epoch = x->epoch,
					.start = rec.off,
					.end = rec.end};
		x->count++;
		x->outstanding++;
		h->refs++;
		if (h->throttle)
			h->tokens -= (double)(rec.end - rec.off);
		hints_send_fn send = h->ho_send ? h->ho_send : h->o.send;
		void *send_arg = h->ho_send ? h->ho_arg : h->o.hook_arg;
		if (send(send_arg, x->id, rec.mutation, rec.len, rec.created_us,
			 on_sent, s) != 0) {
			x->outstanding--;
			h->refs--;
			s->done = true;
			hints_host_fail(x, true);
			h->ho_failed |= h->ho_send != NULL;
		}
	}
	x->pumping = false;
	hints_host_after(x);
}

/* Starts delivering to x unless it is busy, paused or has nothing. */
bool hints_host_start(struct hint_host *x)
{
	struct hints *h = x->h;
	if (x->removed || h->closing || !x->files)
		return false;
	if (x->delivering) {
		if (x->failed)
			x->want_start = true;
		return false;
	}
	if (h->paused && !h->ho_send)
		return false;
	if (!x->ring) {
		x->ring = calloc(h->o.max_in_flight, sizeof(*x->ring));
		if (!x->ring) {
			LOG_WARN("cannot deliver hints to %s: out of memory",
				 x->idtext);
			return false;
		}
	}
	x->delivering = true;
	x->failed = false;
	hints_host_pump(x);
	return true;
}

/* Starts delivery to every host with hints that is alive and idle. */
void hints_start_eligible(struct hints *h)
{
	for (size_t i = 0; i < h->host_count; i++) {
		struct hint_host *x = h->hosts[i];
		if (x->delivering || !x->files || x->removed ||
		    x->down_since_us != 0)
			continue;
		if (h->o.alive && !h->o.alive(h->o.hook_arg, x->id))
			continue;
		hints_host_start(x);
	}
}

void hints_on_check(void *arg)
{
	struct hints *h = arg;
	hints_start_eligible(h);
	env_timer_arm(h->env, h->check_timer, h->o.check_interval_ms * 1000);
}

int hints_hand_over(struct hints *h, hints_send_fn via, void *via_arg,
		    hints_handed_fn done, void *arg)
{
	if (h->ho_send)
		return err_set(ERR_EXISTS, "a hand-over is already running");
	if (h->closing)
		return err_set(ERR_CLOSED, "hints are closed");
	h->ho_send = via;
	h->ho_arg = via_arg;
	h->ho_done = done;
	h->ho_done_arg = arg;
	h->ho_failed = false;
	for (size_t i = 0; i < h->host_count && h->ho_send; i++)
		if (!h->hosts[i]->delivering)
			hints_host_start(h->hosts[i]);
	hand_over_check(h);
	return 0;
}

void hints_hand_over_cancel(struct hints *h)
{
	h->ho_send = NULL;
	h->ho_done = NULL;
}
