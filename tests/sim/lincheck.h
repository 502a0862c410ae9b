/*
 * A linearizability checker for one CAS register (Wing & Gong's search with
 * Lowe's memoisation, as Porcupine does it): a history of operations with
 * invocation and response times is linearizable iff some total order of
 * them respects real time (an operation that returned before another was
 * invoked comes first) and replays correctly on a sequential register.
 *
 * Operations: READ (observed `out`), WRITE(a), CAS(a -> b) that applied
 * (LIN_OK), did not (LIN_FAIL, having seen `out` != a), or whose outcome is
 * unknown (LIN_UNKNOWN: timed out, coordinator died; it may take effect at
 * any time after its invocation, or never: its response is at infinity). A
 * read whose outcome is unknown says nothing: leave it out. LIN_NULL is the
 * absent value.
 */
#ifndef CASSINI_TESTS_SIM_LINCHECK_H
#define CASSINI_TESTS_SIM_LINCHECK_H

#include <stddef.h>
#include <stdint.h>

#define LIN_NULL INT64_MIN
#define LIN_INF  UINT64_MAX

enum lin_kind { LIN_READ, LIN_WRITE, LIN_CAS };
enum lin_res { LIN_OK, LIN_FAIL, LIN_UNKNOWN };

struct lin_op {
	enum lin_kind kind;
	enum lin_res res;
	int64_t a, b;       /* WRITE a; CAS a -> b */
	int64_t out;        /* READ: the value; failed CAS: the value seen */
	uint64_t call, ret; /* ret = LIN_INF when unknown */
};

enum lin_verdict {
	LIN_LINEARIZABLE = 1,
	LIN_VIOLATION = 0,
	LIN_GAVE_UP = -1, /* the search passed `budget` steps */
};

/* Checks ops[0..n) from the initial value `init`. On a violation *longest
 * (if not NULL) gets how many operations the deepest partial order held. */
enum lin_verdict lin_check(const struct lin_op *ops, size_t n, int64_t init,
			   uint64_t budget, size_t *longest);

#endif
