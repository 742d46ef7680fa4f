/* Loaded beside libfaketime for CI's year-ahead pass (.ci/run). libfaketime 0.9.10 (Debian 12) shifts
 * CLOCK_REALTIME and CLOCK_MONOTONIC but does not wrap sem_clockwait, with which CPython >= 3.10 waits on a lock
 * with a timeout (threading.Event.wait, Lock.acquire, queue.Queue.get, threading.Timer): the absolute deadline it
 * passes is in the shifted clock, so the real wait would last the whole shift. This wrapper moves the deadline
 * back onto the real clock and calls glibc's sem_clockwait. Built by .ci/run:
 *   cc -shared -fPIC -O2 -o faketime_clockwait.so faketime_clockwait.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*sem_clockwait_fn)(sem_t *, clockid_t, const struct timespec *);

int sem_clockwait(sem_t *sem, clockid_t clockid, const struct timespec *abstime) {
    static sem_clockwait_fn next;
    if (!next)
        next = (sem_clockwait_fn)dlsym(RTLD_NEXT, "sem_clockwait");
    struct timespec shifted, real, deadline = *abstime;
    /* clock_gettime resolves to libfaketime's (the shifted clock); the raw syscall reads the real one */
    if (clock_gettime(clockid, &shifted) == 0 && syscall(SYS_clock_gettime, clockid, &real) == 0) {
        deadline.tv_sec -= shifted.tv_sec - real.tv_sec;
        deadline.tv_nsec -= shifted.tv_nsec - real.tv_nsec;
        if (deadline.tv_nsec < 0) {
            deadline.tv_nsec += 1000000000L;
            deadline.tv_sec -= 1;
        } else if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_nsec -= 1000000000L;
            deadline.tv_sec += 1;
        }
    }
    return next(sem, clockid, &deadline);
}
