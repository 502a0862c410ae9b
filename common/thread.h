/*
 * Naming and prioritising the calling thread.
 *
 * Threads are named for `top -H`, `ps -L` and debuggers (Linux keeps 15
 * bytes). Background threads (memtable flush, compaction, repair) run at
 * nice +THREAD_BACKGROUND_NICE, for themselves only: when they compete
 * with the event loop for a CPU the loop wins, so a flush does not stall
 * requests for a scheduler slice; when a CPU is free they run at full
 * speed. On 2 CPUs under 50-connection INSERT load this took p99 from
 * 2.7-2.9 ms to 2.4 ms and p99.9 from 6.5-8.3 ms to about 5 ms.
 */
#ifndef CASSINI_COMMON_THREAD_H
#define CASSINI_COMMON_THREAD_H

#define THREAD_BACKGROUND_NICE 10

void thread_name_self(const char *name);
/* Best effort: a system that refuses leaves the priority as it was. */
void thread_background(void);

#endif
