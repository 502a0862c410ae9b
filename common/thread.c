#include "common/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void thread_name_self(const char *name)
{
	char n[16];
	snprintf(n, sizeof(n), "%s", name);
	pthread_setname_np(pthread_self(), n);
}

void thread_background(void)
{
	/* On Linux a nice value belongs to a thread: PRIO_PROCESS with the
	 * thread id sets this thread's alone. */
	id_t tid = (id_t)syscall(SYS_gettid);
	errno = 0;
	int now = getpriority(PRIO_PROCESS, tid);
	if (now == -1 && errno)
		now = 0;
	setpriority(PRIO_PROCESS, tid, now + THREAD_BACKGROUND_NICE);
}
