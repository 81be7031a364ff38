// Nothing to call: linking the target is what applies it (see one_malloc_arena.c).
