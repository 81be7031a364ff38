// SQLite writes each WAL frame with two pwrite calls (its 24-byte header, then the page), so a
// commit of 70 pages made 140 system calls before its one fsync: a fifth of the ledger's kernel
// time under load. This VFS keeps a WAL file's contiguous writes in memory and hands them to
// the file in a few writes of up to 120 KiB before anything could depend on them being there:
// the sync of a commit, a read, a size, a truncation, a file control, a write elsewhere, a full
// buffer, a close.
//
// Durability is unchanged: a commit is durable when its sync returns, and the sync writes
// first. A process that dies holding unwritten frames dies before their commit's sync, so
// SQLite never reported that commit, and recovery ignores a WAL's incomplete tail anyway.
//
// Other connections find frames through the wal-index, which a commit publishes only after
// its sync; with `synchronous=NORMAL` a commit has no sync and the buffer would hold frames
// already published, so the ledger keeps `synchronous=FULL` (it never trades durability).
#include "SQLiteWALBuffer.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

// The unix VFS writes at most 128 KiB - 1 bytes per call (it masks the length to 17 bits) and
// takes a short write for a full disk, so a buffer never holds more than that.
enum { BUFFER_CAPACITY = 120 * 1024 };

typedef struct BufferedFile {
    sqlite3_file base;
    sqlite3_file *real;
    int isWAL;
    unsigned char *buffer;
    size_t used;
    sqlite3_int64 start;
    /// Writes handed to the underlying file.
    sqlite3_int64 writes;
} BufferedFile;

static sqlite3_vfs *underlying;

static int flush(BufferedFile *file) {
    if (file->used == 0) return SQLITE_OK;
    file->writes += 1;
    int rc = file->real->pMethods->xWrite(file->real, file->buffer, (int)file->used, file->start);
    // A failed write is reported once, by the call that needed it (a sync fails its commit);
    // SQLite then rolls back and writes those frames again if it retries.
    file->used = 0;
    return rc;
}

static int bufferedClose(sqlite3_file *f) {
    BufferedFile *file = (BufferedFile *)f;
    int flushed = flush(file);
    int rc = file->real->pMethods->xClose(file->real);
    free(file->buffer);
    file->buffer = NULL;
    return flushed != SQLITE_OK ? flushed : rc;
}

static int bufferedRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    BufferedFile *file = (BufferedFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xRead(file->real, data, amount, offset);
}

static int bufferedWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    BufferedFile *file = (BufferedFile *)f;
    if (!file->isWAL || amount <= 0 || (size_t)amount > BUFFER_CAPACITY / 4) {
        int rc = flush(file);
        if (rc != SQLITE_OK) return rc;
        file->writes += 1;
        return file->real->pMethods->xWrite(file->real, data, amount, offset);
    }
    if (file->used > 0 && (offset != file->start + (sqlite3_int64)file->used || file->used + (size_t)amount > BUFFER_CAPACITY)) {
        int rc = flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (file->buffer == NULL && (file->buffer = malloc(BUFFER_CAPACITY)) == NULL) {
        file->writes += 1;
        return file->real->pMethods->xWrite(file->real, data, amount, offset);
    }
    if (file->used == 0) file->start = offset;
    memcpy(file->buffer + file->used, data, (size_t)amount);
    file->used += (size_t)amount;
    return SQLITE_OK;
}

static int bufferedTruncate(sqlite3_file *f, sqlite3_int64 size) {
    BufferedFile *file = (BufferedFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xTruncate(file->real, size);
}

static int bufferedSync(sqlite3_file *f, int flags) {
    BufferedFile *file = (BufferedFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xSync(file->real, flags);
}

static int bufferedFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    BufferedFile *file = (BufferedFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileSize(file->real, size);
}

// A file control may act on the file's size or contents (a size hint, a pragma): the file
// first gets what it is owed.
static int bufferedFileControl(sqlite3_file *f, int op, void *arg) {
    BufferedFile *file = (BufferedFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileControl(file->real, op, arg);
}

// The rest pass through to the underlying file.
#define REAL(f) (((BufferedFile *)(f))->real)
static int passLock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xLock(REAL(f), level); }
static int passUnlock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xUnlock(REAL(f), level); }
static int passCheckReservedLock(sqlite3_file *f, int *out) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out); }
static int passSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int passDeviceCharacteristics(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int passShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}
static int passShmLock(sqlite3_file *f, int offset, int n, int flags) { return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags); }
static void passShmBarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int passShmUnmap(sqlite3_file *f, int deleteFlag) { return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag); }
static int passFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    return REAL(f)->pMethods->xFetch(REAL(f), offset, amount, out);
}
static int passUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *page) { return REAL(f)->pMethods->xUnfetch(REAL(f), offset, page); }

static const sqlite3_io_methods bufferedMethods = {
    3, bufferedClose, bufferedRead, bufferedWrite, bufferedTruncate, bufferedSync, bufferedFileSize,
    passLock, passUnlock, passCheckReservedLock, bufferedFileControl, passSectorSize, passDeviceCharacteristics,
    passShmMap, passShmLock, passShmBarrier, passShmUnmap, passFetch, passUnfetch,
};

static int bufferedOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    BufferedFile *file = (BufferedFile *)f;
    memset(file, 0, sizeof(BufferedFile));
    file->real = (sqlite3_file *)(file + 1);
    int rc = underlying->xOpen(underlying, name, file->real, flags, outFlags);
    if (rc != SQLITE_OK || file->real->pMethods == NULL) return rc;
    // The methods below are version 3 (shared memory for WAL, memory-mapped reads).
    if (file->real->pMethods->iVersion < 3) {
        file->real->pMethods->xClose(file->real);
        return SQLITE_CANTOPEN;
    }
    file->isWAL = (flags & SQLITE_OPEN_WAL) != 0;
    file->base.pMethods = &bufferedMethods;
    return SQLITE_OK;
}

// Everything but opening a file is the underlying VFS's own.
static int passDelete(sqlite3_vfs *vfs, const char *name, int syncDir) { (void)vfs; return underlying->xDelete(underlying, name, syncDir); }
static int passAccess(sqlite3_vfs *vfs, const char *name, int flags, int *out) { (void)vfs; return underlying->xAccess(underlying, name, flags, out); }
static int passFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return underlying->xFullPathname(underlying, name, size, out);
}
static void *passDlOpen(sqlite3_vfs *vfs, const char *name) { (void)vfs; return underlying->xDlOpen(underlying, name); }
static void passDlError(sqlite3_vfs *vfs, int size, char *out) { (void)vfs; underlying->xDlError(underlying, size, out); }
static void (*passDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs;
    return underlying->xDlSym(underlying, handle, symbol);
}
static void passDlClose(sqlite3_vfs *vfs, void *handle) { (void)vfs; underlying->xDlClose(underlying, handle); }
static int passRandomness(sqlite3_vfs *vfs, int size, char *out) { (void)vfs; return underlying->xRandomness(underlying, size, out); }
static int passSleep(sqlite3_vfs *vfs, int microseconds) { (void)vfs; return underlying->xSleep(underlying, microseconds); }
static int passCurrentTime(sqlite3_vfs *vfs, double *out) { (void)vfs; return underlying->xCurrentTime(underlying, out); }
static int passGetLastError(sqlite3_vfs *vfs, int size, char *out) { (void)vfs; return underlying->xGetLastError(underlying, size, out); }
static int passCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) { (void)vfs; return underlying->xCurrentTimeInt64(underlying, out); }

static sqlite3_vfs bufferedVFS;
static int registered = SQLITE_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void registerOnce(void) {
    // Before SQLite initializes (finding a VFS does that): without memory statistics, which
    // nothing here reads, SQLite's allocations take no process-wide mutex (callgrind: about
    // 170 mutex enters per order in the ledger's store). Later calls fail harmlessly.
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    underlying = sqlite3_vfs_find(NULL);
    // The pass-throughs above cover version 2 of the VFS (xCurrentTimeInt64); unix has 3.
    if (underlying == NULL || underlying->iVersion < 2) return;
    bufferedVFS.iVersion = 2;
    bufferedVFS.szOsFile = (int)sizeof(BufferedFile) + underlying->szOsFile;
    bufferedVFS.mxPathname = underlying->mxPathname;
    bufferedVFS.zName = SQLITE_WAL_BUFFER_VFS;
    bufferedVFS.xOpen = bufferedOpen;
    bufferedVFS.xDelete = passDelete;
    bufferedVFS.xAccess = passAccess;
    bufferedVFS.xFullPathname = passFullPathname;
    bufferedVFS.xDlOpen = passDlOpen;
    bufferedVFS.xDlError = passDlError;
    bufferedVFS.xDlSym = passDlSym;
    bufferedVFS.xDlClose = passDlClose;
    bufferedVFS.xRandomness = passRandomness;
    bufferedVFS.xSleep = passSleep;
    bufferedVFS.xCurrentTime = passCurrentTime;
    bufferedVFS.xGetLastError = passGetLastError;
    bufferedVFS.xCurrentTimeInt64 = passCurrentTimeInt64;
    registered = sqlite3_vfs_register(&bufferedVFS, 0);
}

int sqlite_wal_buffer_register(void) {
    pthread_once(&once, registerOnce);
    return registered;
}

sqlite3_int64 sqlite_wal_buffer_writes(sqlite3 *db) {
    sqlite3_file *wal = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK || wal == NULL) return -1;
    if (wal->pMethods != &bufferedMethods) return -1;
    return ((BufferedFile *)wal)->writes;
}
