// Loaded with LD_PRELOAD: every fsync and fdatasync waits SLOW_SYNC_US microseconds (default
// 1000) before the real call, the way a network block device or a busy disk answers. Only the
// ledger syncs, so only its commits get slower. Benchmark use only.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void wait_like_slow_storage(void) {
    static long us = -1;
    if (us < 0) {
        const char *value = getenv("SLOW_SYNC_US");
        us = value ? atol(value) : 1000;
    }
    struct timespec pause = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&pause, 0);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    wait_like_slow_storage();
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    wait_like_slow_storage();
    return real(fd);
}
