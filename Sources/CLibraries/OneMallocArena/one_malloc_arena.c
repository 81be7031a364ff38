// Linked into a stage executable, keeps its heap in one glibc malloc arena, unless the operator
// sets MALLOC_ARENA_MAX. glibc fixes its arena limit when a second thread first allocates, so this
// runs as a constructor, before main starts any thread; Swift code runs too late.
//
// The signer builds each request on one thread and libzmq's thread frees it, so with an arena per
// thread every arena kept its own peak of free chunks: about 4 MiB more under W1.
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>

__attribute__((constructor)) static void paypipe_one_malloc_arena(void) {
    if (getenv("MALLOC_ARENA_MAX") == NULL) mallopt(M_ARENA_MAX, 1);
}
#endif
