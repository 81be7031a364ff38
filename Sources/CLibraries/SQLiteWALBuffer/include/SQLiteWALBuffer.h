#ifndef SQLITE_WAL_BUFFER_H
#define SQLITE_WAL_BUFFER_H

/// The name of the VFS that `sqlite_wal_buffer_register` adds.
#define SQLITE_WAL_BUFFER_VFS "paypipe-wal-buffer"

/// Registers (once; later calls do nothing) a VFS over the default one that gathers a write
/// transaction's WAL frames in memory and writes them with one system call when SQLite syncs
/// the WAL, reads it back, sizes, truncates or closes it. Only for connections that sync every
/// commit (`synchronous=FULL`): other processes see frames only once the commit's sync has
/// written them. Returns an SQLite result code.
int sqlite_wal_buffer_register(void);

typedef struct sqlite3 sqlite3;

/// How many writes the WAL file of `db`'s main database has handed to the underlying file,
/// or -1 when it has no WAL open through this VFS.
long long sqlite_wal_buffer_writes(sqlite3 *db);

#endif
