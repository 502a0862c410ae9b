/*
 * A fault-injecting env for storage tests (leveldb's
 * FaultInjectionTestEnv idea): it wraps another env and remembers every
 * write not yet covered by a sync. A simulated crash throws those writes
 * away, newest first, keeping only a random prefix of the newest one of
 * each file (a torn write), so what survives is exactly what a power cut
 * would leave. Directory operations (create, rename, unlink) are durable at
 * once; preallocation and truncation too.
 *
 * fault_env_freeze() cuts the power: from then on every file operation
 * fails with EIO, so the engine being "killed" cannot write anything more;
 * fault_env_crash() then drops the unsynced data and turns the power back.
 *
 * Non-blocking reads (env_file_pread_nowait) find every other request in
 * a simulated page cache, so both the memory path and the disk path of a
 * reader get exercised.
 */
#ifndef CASSINI_TESTS_STORAGE_FAULT_ENV_H
#define CASSINI_TESTS_STORAGE_FAULT_ENV_H

#include "common/env.h"

#include <stdbool.h>
#include <stdint.h>

struct fault_env;

struct fault_env *fault_env_new(struct env *base);
void fault_env_delete(struct fault_env *fe);
struct env *fault_env_env(struct fault_env *fe);

/* Wall clock override in microseconds (0: the base env's clock). */
void fault_env_set_wall_us(struct fault_env *fe, int64_t us);

void fault_env_freeze(struct fault_env *fe);
/* Drops unsynced writes (tearing the newest one per file at a point drawn
 * from `seed`) and unfreezes. */
void fault_env_crash(struct fault_env *fe, uint64_t seed);
/* Power-cut points: the power goes just before the n-th mutating file
 * operation from now (0: the next one); a write, sync, truncation,
 * preallocation, rename, link, unlink, mkdir, rmdir or directory sync
 * counts one. Negative disarms. Run an operation once with none armed,
 * count its steps with fault_env_ops, then cut it at each of them. */
void fault_env_freeze_after(struct fault_env *fe, int64_t n);
/* Mutating operations seen since fault_env_new. */
uint64_t fault_env_ops(struct fault_env *fe);
/* Whether the power is off (a freeze, or an armed cut that fell). */
bool fault_env_frozen(struct fault_env *fe);
/* After a freeze, a killed process rather than a power cut: unfreezes and
 * keeps every write (the page cache survives; they stay unsynced). */
void fault_env_thaw(struct fault_env *fe);

/* Makes writes (and syncs) to paths containing `substr` fail with errnum
 * (ENOSPC, EIO); NULL clears. */
void fault_env_fail_writes(struct fault_env *fe, const char *substr,
			   int errnum);

/* Makes every file sync take `us` microseconds longer (a slow disk); 0
 * clears. The sleep holds no lock of the env. */
void fault_env_set_sync_delay_us(struct fault_env *fe, uint64_t us);

#endif
