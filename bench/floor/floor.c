// The floor of paypipe's shape: the same processes, the same ZeroMQ hops and the same durable
// commits as a W1 order takes through paypipe, with no work in any stage. What it measures is
// what no change to a stage's code can beat on this machine, in throughput and in latency.
//
//   bench/floor/build /tmp/floor                 # bench/run --vs-peer --floor and bench/latency/run build it so
//   /tmp/floor --provider 127.0.0.1:18081 --orders 50000 --store sqlite      # full speed
//   /tmp/floor --provider 127.0.0.1:18081 --rate 200 --orders 2000 --store sqlite
//
// An order's path, as in paypipe (README, "Architecture"): driver PUSH → ledger intake PULL
// (commit 1: the order recorded) → ledger PUSH → signer → the ledger's streamer (zmq_proxy,
// PULL → PUSH) → submitter, which claims it over a DEALER to the ledger's ROUTER (commit 2: the
// lease) and waits for the grant, writes the request on a keep-alive connection to the provider,
// reads the answer, PUSHes the result → ledger results PULL (commit 3: the result and the
// outcome log) → ledger outcomes PUSH → driver. Eight ZeroMQ hops and one HTTP exchange.
//
// Each stage is one thread (the ledger's streamer has its own, as in paypipe) that does no more
// than move the bytes: the ledger commits what one pass read in one transaction (group commit)
// and only then sends what it committed, without blocking; the signer fills a fixed request
// template with the order's number; the submitter claims each batch it reads, keeps
// --concurrency keep-alive connections and reads each response only as far as its end. --store
// picks the commit: `none` (no storage), `fsync` (an append and one fdatasync per pass), `sqlite`
// (the ledger's own tuning, WAL, synchronous=FULL: the order inserted under a unique text key at
// intake, its lease updated at the claim, its outcome stored and appended to an outcome log at
// the result; less than paypipe's store does, which also indexes orders in flight and PhonePe's
// reference).
//
// --without claim (the submitter sends what it reads without claiming it: no claim round trip
// and no second commit) and --without streamer (the signer binds the submitters' work queue:
// one hop fewer) take steps out of the shape, to measure what each costs; paypipe needs both
// (the claim is what stops a redelivered order from being sent twice, the streamer what lets
// signer and submitter copies come and go without reconfiguring each other).
//
// Bounded: every run stops at --max-seconds, every child is stopped by PID and has
// PR_SET_PDEATHSIG, every receive gives up. Loopback only.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include "SQLiteWALBuffer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

enum store_kind { STORE_NONE, STORE_FSYNC, STORE_SQLITE };

static struct {
    long orders, warmup;
    double rate;
    int submitters, concurrency, max_seconds, nice_workers;
    // --without: steps of the shape left out, to measure what each costs (never paypipe's shape).
    int without_claim, without_streamer;
    enum store_kind store;
    char provider_host[64];
    int provider_port;
    char store_dir[256];
} opt = {50000, 1000, 0, 2, 256, 120, 5, 0, 0, STORE_SQLITE, "127.0.0.1", 18081, ""};

// Set by SIGINT/SIGTERM in the driver: it stops driving, then stops its children and removes its store.
static volatile sig_atomic_t interrupted;

static void on_signal(int signum) { interrupted = signum; }

static void die(const char *what) {
    fprintf(stderr, "floor[%d]: %s (%s)\n", (int)getpid(), what, strerror(errno));
    exit(1);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void set_int(void *socket, int option, int value) {
    if (zmq_setsockopt(socket, option, &value, sizeof value) != 0) die("zmq_setsockopt");
}

// Every internal socket as paypipe's StageRuntime sets it (SocketOptions.swift): immediate,
// a finite linger, explicit high-water marks.
static void *make_socket(void *ctx, int type, int hwm) {
    void *s = zmq_socket(ctx, type);
    if (!s) die("zmq_socket");
    set_int(s, ZMQ_LINGER, 1000);
    set_int(s, ZMQ_SNDHWM, hwm);
    set_int(s, ZMQ_RCVHWM, hwm);
    if (type == ZMQ_PUSH || type == ZMQ_DEALER) set_int(s, ZMQ_IMMEDIATE, 1);
    return s;
}

static void bind_any(void *s, char *endpoint) {
    size_t len = 64;
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0) die("zmq_bind");
    if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, endpoint, &len) != 0) die("ZMQ_LAST_ENDPOINT");
}

static void connect_to(void *s, const char *endpoint) {
    if (zmq_connect(s, endpoint) != 0) die("zmq_connect");
}

// ---------------------------------------------------------------- wire

// Every message starts with the order's number; the rest is padding of the size paypipe's
// frames have (an order about 330 bytes, an outcome about 200).
enum { ORDER_BYTES = 330, RESULT_BYTES = 200, MAX_BATCH = 1024 };

// A submitter holds at most 2 × --concurrency orders and claims at most that many in one
// request; the ledger reads claim requests in a pass while another of that size still fits.
enum { MAX_CONCURRENCY = 1024, MAX_HELD = 2 * MAX_CONCURRENCY, MAX_CLAIMS = 4 * MAX_HELD };

static uint64_t order_number(zmq_msg_t *m) {
    uint64_t n = UINT64_MAX;
    if (zmq_msg_size(m) >= 8) memcpy(&n, zmq_msg_data(m), 8);
    return n;
}

static int send_bytes(void *s, const void *data, size_t size, int flags) {
    return zmq_send(s, data, size, flags) == (int)size ? 0 : -1;
}

// ---------------------------------------------------------------- ledger

struct ledger_endpoints {
    char intake[64], sign[64], signed_in[64], signed_out[64], results[64], rpc[64], outcomes[64];
};

struct store {
    enum store_kind kind;
    int fd;
    sqlite3 *db;
    sqlite3_stmt *insert_order, *claim, *settle, *append_outcome;
    int64_t seq;
};

static void sql(sqlite3 *db, const char *text) {
    char *error = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "floor: sqlite: %s: %s\n", text, error ? error : "?");
        exit(1);
    }
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *text) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v3(db, text, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) {
        fprintf(stderr, "floor: sqlite: %s: %s\n", text, sqlite3_errmsg(db));
        exit(1);
    }
    return s;
}

static void store_open(struct store *st) {
    char path[512];
    st->kind = opt.store;
    if (st->kind == STORE_FSYNC) {
        snprintf(path, sizeof path, "%s/log", opt.store_dir);
        st->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0600);
        if (st->fd < 0) die("open log");
    } else if (st->kind == STORE_SQLITE) {
        snprintf(path, sizeof path, "%s/ledger.sqlite", opt.store_dir);
        // The ledger's own tuning (LedgerStore.swift): its WAL buffer VFS, a long WAL between
        // checkpoints, a 2 MiB page cache; one table keyed by the order's key, WITHOUT ROWID,
        // with none of the ledger's partial indexes or provider references.
        if (sqlite_wal_buffer_register() != SQLITE_OK) die("sqlite_wal_buffer_register");
        if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, SQLITE_WAL_BUFFER_VFS) != SQLITE_OK)
            die("sqlite3_open");
        sql(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=10000;"
                    "PRAGMA cache_size=-2048; PRAGMA temp_store=MEMORY;"
                    "CREATE TABLE orders(key TEXT PRIMARY KEY, state INTEGER NOT NULL, generation INTEGER NOT NULL DEFAULT 0,"
                    " lease_until INTEGER, body BLOB NOT NULL, outcome BLOB) WITHOUT ROWID;"
                    "CREATE TABLE outcome_log(seq INTEGER PRIMARY KEY, key TEXT NOT NULL, body BLOB NOT NULL);");
        st->insert_order = prepare(st->db, "INSERT INTO orders(key, state, body) VALUES(?1, 0, ?2) ON CONFLICT(key) DO NOTHING");
        st->claim = prepare(st->db, "UPDATE orders SET state = 1, generation = generation + 1, lease_until = ?2 "
                                    "WHERE key = ?1 AND state IN (0, 1)");
        st->settle = prepare(st->db, "UPDATE orders SET state = 2, outcome = ?2 WHERE key = ?1 AND state = 1");
        st->append_outcome = prepare(st->db, "INSERT INTO outcome_log(seq, key, body) VALUES(?1, ?2, ?3)");
    }
}

static void order_key(char *key, size_t size, uint64_t n) { snprintf(key, size, "floor-merchant:ord-%" PRIu64, n); }

static void step(sqlite3_stmt *s) {
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "floor: sqlite step: %s\n", sqlite3_errstr(rc));
        exit(1);
    }
    sqlite3_reset(s);
}

// One transaction for everything a pass read: the orders taken in, the leases granted, the
// results settled (each with its outcome appended to the log).
static void store_commit(struct store *st, zmq_msg_t *intake, int n_intake, uint64_t *claims, int n_claims,
                         zmq_msg_t *results, int n_results) {
    if (n_intake + n_claims + n_results == 0) return;
    if (st->kind == STORE_FSYNC) {
        // A line per order taken in, claimed or settled: a letter, a space, up to 20 digits, a newline.
        enum { LINE = 24 };
        static char record[(2 * MAX_BATCH + MAX_CLAIMS) * LINE];
        size_t used = 0;
        for (int i = 0; i < n_intake; i++) used += (size_t)snprintf(record + used, LINE, "i %" PRIu64 "\n", order_number(&intake[i]));
        for (int i = 0; i < n_claims; i++) used += (size_t)snprintf(record + used, LINE, "c %" PRIu64 "\n", claims[i]);
        for (int i = 0; i < n_results; i++) used += (size_t)snprintf(record + used, LINE, "r %" PRIu64 "\n", order_number(&results[i]));
        if (write(st->fd, record, used) != (ssize_t)used) die("write log");
        if (fdatasync(st->fd) != 0) die("fdatasync");
    } else if (st->kind == STORE_SQLITE) {
        char key[64];
        sql(st->db, "BEGIN IMMEDIATE");
        for (int i = 0; i < n_intake; i++) {
            order_key(key, sizeof key, order_number(&intake[i]));
            sqlite3_bind_text(st->insert_order, 1, key, -1, SQLITE_STATIC);
            sqlite3_bind_blob(st->insert_order, 2, zmq_msg_data(&intake[i]), (int)zmq_msg_size(&intake[i]), SQLITE_STATIC);
            step(st->insert_order);
        }
        int64_t lease_until = (int64_t)time(NULL) * 1000 + 30000;
        for (int i = 0; i < n_claims; i++) {
            order_key(key, sizeof key, claims[i]);
            sqlite3_bind_text(st->claim, 1, key, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st->claim, 2, lease_until);
            step(st->claim);
        }
        for (int i = 0; i < n_results; i++) {
            order_key(key, sizeof key, order_number(&results[i]));
            sqlite3_bind_text(st->settle, 1, key, -1, SQLITE_STATIC);
            sqlite3_bind_blob(st->settle, 2, zmq_msg_data(&results[i]), (int)zmq_msg_size(&results[i]), SQLITE_STATIC);
            step(st->settle);
            if (sqlite3_changes(st->db) == 0) continue;  // settled before: no second outcome
            sqlite3_bind_int64(st->append_outcome, 1, ++st->seq);
            sqlite3_bind_text(st->append_outcome, 2, key, -1, SQLITE_STATIC);
            sqlite3_bind_blob(st->append_outcome, 3, zmq_msg_data(&results[i]), (int)zmq_msg_size(&results[i]), SQLITE_STATIC);
            step(st->append_outcome);
        }
        sql(st->db, "COMMIT");
    }
}

static void *streamer(void *sockets) {
    void **s = sockets;
    zmq_proxy(s[0], s[1], NULL);  // returns when the context terminates
    return NULL;
}

// Reads at most MAX_BATCH messages that are already there.
static int drain(void *s, zmq_msg_t *into) {
    int n = 0;
    while (n < MAX_BATCH) {
        zmq_msg_init(&into[n]);
        if (zmq_msg_recv(&into[n], s, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&into[n]);
            break;
        }
        n++;
    }
    return n;
}

static void run_ledger(int ready_fd) {
    void *ctx = zmq_ctx_new();
    struct ledger_endpoints ep;
    void *intake = make_socket(ctx, ZMQ_PULL, 1000), *sign = make_socket(ctx, ZMQ_PUSH, 32);
    void *signed_in = make_socket(ctx, ZMQ_PULL, 1000), *signed_out = make_socket(ctx, ZMQ_PUSH, 32);
    void *results = make_socket(ctx, ZMQ_PULL, 1000), *rpc = make_socket(ctx, ZMQ_ROUTER, 1000);
    void *outcomes = make_socket(ctx, ZMQ_PUSH, 100000);
    bind_any(intake, ep.intake);
    bind_any(sign, ep.sign);
    bind_any(signed_in, ep.signed_in);
    bind_any(signed_out, ep.signed_out);
    bind_any(results, ep.results);
    bind_any(rpc, ep.rpc);
    bind_any(outcomes, ep.outcomes);
    struct store st = {0};
    store_open(&st);
    pthread_t proxy;
    void *proxy_sockets[2] = {signed_in, signed_out};
    if (pthread_create(&proxy, NULL, streamer, proxy_sockets) != 0) die("pthread_create");
    if (write(ready_fd, &ep, sizeof ep) != sizeof ep) die("write ready");
    close(ready_fd);

    static zmq_msg_t in[MAX_BATCH], res[MAX_BATCH];
    static uint64_t claims[MAX_CLAIMS];
    // Dispatches wait here for a signer to take them, never blocking the loop (as paypipe's
    // ledger's outbox): while MAX_BATCH of them wait, intake is not read.
    enum { OUTBOX = 2 * MAX_BATCH };
    static zmq_msg_t outbox[OUTBOX];
    int out_head = 0, out_count = 0;
    zmq_pollitem_t items[4] = {{intake, 0, ZMQ_POLLIN, 0}, {results, 0, ZMQ_POLLIN, 0}, {rpc, 0, ZMQ_POLLIN, 0},
                               {sign, 0, ZMQ_POLLOUT, 0}};
    double stop_at = now_s() + opt.max_seconds + 30;
    while (now_s() < stop_at) {
        items[0].events = out_count < MAX_BATCH ? ZMQ_POLLIN : 0;
        items[3].events = out_count > 0 ? ZMQ_POLLOUT : 0;
        if (zmq_poll(items, 4, 100) < 0) {
            if (errno == EINTR) continue;
            die("zmq_poll");
        }
        while (out_count > 0 && zmq_msg_send(&outbox[out_head], sign, ZMQ_DONTWAIT) >= 0) {
            out_head = (out_head + 1) % OUTBOX;
            out_count--;
        }
        int n_in = out_count < MAX_BATCH ? drain(intake, in) : 0, n_res = drain(results, res), n_claims = 0;
        // Claims: [identity][count × order number]; the reply names what was granted (all of it).
        zmq_msg_t identity[16], body[16];
        int n_req = 0;
        while (n_req < 16 && n_claims + MAX_HELD <= MAX_CLAIMS) {
            zmq_msg_init(&identity[n_req]);
            if (zmq_msg_recv(&identity[n_req], rpc, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&identity[n_req]);
                break;
            }
            zmq_msg_init(&body[n_req]);
            if (zmq_msg_recv(&body[n_req], rpc, 0) < 0) die("claim body");
            size_t count = zmq_msg_size(&body[n_req]) / 8;
            if (count > MAX_HELD) die("claim request larger than a submitter holds");
            memcpy(&claims[n_claims], zmq_msg_data(&body[n_req]), 8 * count);
            n_claims += (int)count;
            n_req++;
        }
        store_commit(&st, in, n_in, claims, n_claims, res, n_res);
        // Only what the commit made durable leaves the ledger.
        for (int i = 0; i < n_in; i++) {
            zmq_msg_t *slot = &outbox[(out_head + out_count++) % OUTBOX];
            zmq_msg_init(slot);
            zmq_msg_move(slot, &in[i]);
            zmq_msg_close(&in[i]);
        }
        while (out_count > 0 && zmq_msg_send(&outbox[out_head], sign, ZMQ_DONTWAIT) >= 0) {
            out_head = (out_head + 1) % OUTBOX;
            out_count--;
        }
        for (int i = 0; i < n_req; i++) {
            if (zmq_msg_send(&identity[i], rpc, ZMQ_SNDMORE) < 0 || zmq_msg_send(&body[i], rpc, 0) < 0) die("grant");
        }
        for (int i = 0; i < n_res; i++) {
            if (zmq_msg_send(&res[i], outcomes, 0) < 0) die("outcome");
        }
    }
    exit(0);
}

// ---------------------------------------------------------------- signer

static const char body_template[] =
    "{\"request\":\"eyJtZXJjaGFudElkIjoiUEVFUk1FUkNIQU5UIiwibWVyY2hhbnRVc2VySWQiOiJNVTAwMDAwMDAwIiwic3Vic2NyaXB0aW9uSWQiOiJPTVMwMDAwMDAwMDAwMDAwMDAiLCJhdXRoUmVxdWVzdElkIjoiQVJSMDAwMDAwMDAwIiwiYW1vdW50IjozOTkwMCwicGF5bWVudFNjb3BlIjoiUEhPTkVQRSIsImRldmljZUNvbnRleHQiOnsiZGV2aWNlT1MiOiJJT1MifX0=\",\"n\":%020" PRIu64 "}";

// With --without streamer the signer binds the submitters' work queue itself and writes its
// address here.
static int signer_ready_fd = -1;

static void run_signer(const struct ledger_endpoints *ep) {
    void *ctx = zmq_ctx_new();
    void *in = make_socket(ctx, ZMQ_PULL, 32), *out = make_socket(ctx, ZMQ_PUSH, opt.without_streamer ? 32 : 1000);
    connect_to(in, ep->sign);
    if (opt.without_streamer) {
        char work_queue[64];
        bind_any(out, work_queue);
        if (write(signer_ready_fd, work_queue, sizeof work_queue) != sizeof work_queue) die("write signer ready");
        close(signer_ready_fd);
    } else {
        connect_to(out, ep->signed_in);
    }
    set_int(in, ZMQ_RCVTIMEO, 1000);
    char work[1024], body[512];
    double stop_at = now_s() + opt.max_seconds + 30;
    while (now_s() < stop_at) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, in, 0) < 0) {
            zmq_msg_close(&m);
            continue;
        }
        uint64_t n = order_number(&m);
        zmq_msg_close(&m);
        int body_len = snprintf(body, sizeof body, body_template, n);
        memcpy(work, &n, 8);
        int len = snprintf(work + 8, sizeof work - 8,
                           "POST /v3/recurring/auth/init HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                           "X-VERIFY: 0f2b7bd4b0e3c0d1a4a3c1b5e9c4d8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1###1\r\n"
                           "X-CALLBACK-URL: https://merchant.invalid/phonepe/callback\r\nContent-Length: %d\r\n\r\n%s",
                           opt.provider_host, opt.provider_port, body_len, body);
        if (send_bytes(out, work, 8 + (size_t)len, 0) != 0) die("send work");
    }
    exit(0);
}

// ---------------------------------------------------------------- submitter

struct connection {
    int fd;
    int busy;
    uint64_t order;
    char response[4096];
    size_t have;
};

struct work {
    uint64_t n;
    size_t len;
    char bytes[1024];
};

// Connected before any work arrives (blocking, on the loopback), then non-blocking.
static int connect_provider(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.provider_port)};
    if (fd < 0 || inet_pton(AF_INET, opt.provider_host, &a.sin_addr) != 1) die("provider address");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect provider");
    if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) die("O_NONBLOCK");
    return fd;
}

// The end of one response: its head, then a Content-Length body or chunks up to the last one.
// Returns the response's length once it is whole, 0 before, -1 when it cannot be read.
static long response_end(const char *r, size_t have) {
    const char *head_end = memmem(r, have, "\r\n\r\n", 4);
    if (!head_end) return have > 3000 ? -1 : 0;
    size_t head = (size_t)(head_end - r) + 4;
    const char *cl = memmem(r, head, "Content-Length: ", 16);
    if (cl) {
        long body = strtol(cl + 16, NULL, 10);
        return head + (size_t)body <= have ? (long)(head + (size_t)body) : 0;
    }
    if (!memmem(r, head, "chunked", 7)) return -1;
    const char *last = memmem(r + head, have - head, "\r\n0\r\n\r\n", 7);
    if (!last && have - head >= 5 && memcmp(r + head, "0\r\n\r\n", 5) == 0) return (long)head + 5;
    return last ? (long)(last - r) + 7 : 0;
}

static int zmq_readable(void *s) {
    int events = 0;
    size_t len = sizeof events;
    zmq_getsockopt(s, ZMQ_EVENTS, &events, &len);
    return events & ZMQ_POLLIN;
}

static void run_submitter(const struct ledger_endpoints *ep) {
    void *ctx = zmq_ctx_new();
    void *in = make_socket(ctx, ZMQ_PULL, 32), *rpc = make_socket(ctx, ZMQ_DEALER, 1000);
    void *out = make_socket(ctx, ZMQ_PUSH, 1000);
    connect_to(in, ep->signed_out);
    connect_to(rpc, ep->rpc);
    connect_to(out, ep->results);
    int ep_fd = epoll_create1(0);
    int zfd;
    size_t zlen = sizeof zfd;
    void *zsockets[2] = {in, rpc};
    for (int i = 0; i < 2; i++) {
        zmq_getsockopt(zsockets[i], ZMQ_FD, &zfd, &zlen);
        struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.u64 = UINT64_MAX - (uint64_t)i};
        if (epoll_ctl(ep_fd, EPOLL_CTL_ADD, zfd, &e) != 0) die("epoll zmq fd");
    }
    int c = opt.concurrency;
    struct connection *conns = calloc((size_t)c, sizeof *conns);
    for (int i = 0; i < c; i++) {
        conns[i].fd = connect_provider();
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        if (epoll_ctl(ep_fd, EPOLL_CTL_ADD, conns[i].fd, &e) != 0) die("epoll conn");
    }
    // Work held: read from the queue and claimed (its grant not back yet), or granted and waiting
    // for a connection, or in flight. At most --concurrency × 2 held, as paypipe's --backlog
    // bounds it. Claims are pipelined: each batch read is claimed in one request while earlier
    // ones are outstanding, and the ledger answers them in order.
    size_t cap = (size_t)(unsigned)c * 2, held = 0;
    struct work *ready = calloc(cap, sizeof *ready), *claimed = calloc(cap, sizeof *claimed);
    size_t claimed_head = 0, n_claimed = 0, n_ready = 0;
    size_t *batches = calloc(cap, sizeof *batches), batch_head = 0, n_batches = 0;
    int *idle = malloc(sizeof(int) * (size_t)c), n_idle = c;
    for (int i = 0; i < c; i++) idle[i] = i;
    double stop_at = now_s() + opt.max_seconds + 30;
    struct epoll_event events[512];
    char result[RESULT_BYTES];
    memset(result, ' ', sizeof result);
    uint64_t *numbers = calloc(cap, sizeof *numbers);
    while (now_s() < stop_at) {
        size_t took = 0;
        while (held < cap) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, in, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m);
                break;
            }
            struct work *w = &claimed[(claimed_head + n_claimed++) % cap];
            w->n = order_number(&m);
            w->len = zmq_msg_size(&m) - 8;
            if (w->len > sizeof w->bytes) die("work too large");
            memcpy(w->bytes, (char *)zmq_msg_data(&m) + 8, w->len);
            zmq_msg_close(&m);
            numbers[took++] = w->n;
            held++;
        }
        // What is granted moves to ready, oldest claimed first: without claims, all that was read.
        size_t granted = 0;
        if (took && opt.without_claim) {
            granted = took;
        } else if (took) {
            if (send_bytes(rpc, numbers, 8 * took, 0) != 0) die("claim");
            batches[(batch_head + n_batches++) % cap] = took;
        }
        for (;;) {
            zmq_msg_t grant;
            zmq_msg_init(&grant);
            if (n_batches == 0 || zmq_msg_recv(&grant, rpc, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&grant);
                break;
            }
            size_t batch = batches[batch_head];
            if (zmq_msg_size(&grant) != 8 * batch) die("grant size");
            zmq_msg_close(&grant);
            batch_head = (batch_head + 1) % cap;
            n_batches--;
            granted += batch;
        }
        for (; granted > 0; granted--, n_claimed--) {
            ready[n_ready++] = claimed[claimed_head];
            claimed_head = (claimed_head + 1) % cap;
        }
        // Start what is ready on idle connections.
        while (n_ready > 0 && n_idle > 0) {
            struct work *w = &ready[--n_ready];
            struct connection *k = &conns[idle[--n_idle]];
            if (write(k->fd, w->bytes, w->len) != (ssize_t)w->len) die("write request");
            k->busy = 1;
            k->order = w->n;
            k->have = 0;
        }
        int pending = (held < cap && zmq_readable(in)) || (n_batches > 0 && zmq_readable(rpc));
        int got = epoll_wait(ep_fd, events, 512, pending ? 0 : 100);
        for (int i = 0; i < got; i++) {
            if (events[i].data.u64 >= UINT64_MAX - 1) continue;  // a ZeroMQ socket: read at the top
            struct connection *k = &conns[events[i].data.u64];
            for (;;) {
                ssize_t r = read(k->fd, k->response + k->have, sizeof k->response - k->have);
                if (r < 0 && errno == EAGAIN) break;
                if (r <= 0) die("provider closed");
                k->have += (size_t)r;
                long end = response_end(k->response, k->have);
                if (end < 0) die("unreadable response");
                if (end == 0) continue;
                if (!k->busy || (size_t)end != k->have) die("unexpected response bytes");
                memcpy(result, &k->order, 8);
                result[8] = memmem(k->response, k->have, "\"success\":true", 14) ? 'S' : 'F';
                if (send_bytes(out, result, sizeof result, 0) != 0) die("send result");
                k->busy = 0;
                k->have = 0;
                idle[n_idle++] = (int)(k - conns);
                held--;
                break;
            }
        }
    }
    exit(0);
}

// ---------------------------------------------------------------- driver

static pid_t spawn(void (*role)(const struct ledger_endpoints *), const struct ledger_endpoints *ep, int nice_by) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (nice_by && nice(nice_by) < 0) die("nice");
        role(ep);
    }
    return pid;
}

static double cpu_seconds(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long utime = 0, stime = 0;
    // Fields after ")": state(3) ... utime(14) stime(15).
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2) return 0;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static long peak_rss_kib(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static int by_value(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

// Sends orders [first, first + count) at full speed or at --rate and waits for every outcome.
// Returns the number that got none before the deadline.
static long drive(void *push, void *pull, uint64_t first, long count, double rate, int64_t *sent_at, int64_t *latency,
                  double deadline) {
    char order[ORDER_BYTES];
    memset(order, 'o', sizeof order);
    long sent = 0, received = 0;
    double start = now_s();
    zmq_pollitem_t items[2] = {{pull, 0, ZMQ_POLLIN, 0}, {push, 0, ZMQ_POLLOUT, 0}};
    while (received < count && now_s() < deadline && !interrupted) {
        double next_due = rate > 0 ? start + (double)sent / rate : 0;
        int want_send = sent < count && (rate <= 0 || now_s() >= next_due);
        items[1].events = want_send ? ZMQ_POLLOUT : 0;
        long wait_ms = 100;
        if (sent < count && rate > 0 && !want_send) {
            wait_ms = (long)((next_due - now_s()) * 1000);
            if (wait_ms < 0) wait_ms = 0;
        }
        if (zmq_poll(items, 2, want_send ? 0 : wait_ms) < 0 && errno != EINTR) die("driver poll");
        // At full speed a burst per pass, until the pipeline pushes back.
        for (int burst = 0; want_send && (items[1].revents & ZMQ_POLLOUT) && burst < (rate > 0 ? 1 : 512) && sent < count;
             burst++) {
            uint64_t n = first + (uint64_t)sent;
            memcpy(order, &n, 8);
            sent_at[n] = now_ns();
            if (send_bytes(push, order, sizeof order, ZMQ_DONTWAIT) != 0) break;
            sent++;
        }
        for (;;) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, pull, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m);
                break;
            }
            uint64_t n = order_number(&m);
            zmq_msg_close(&m);
            if (n < first || n >= first + (uint64_t)count || latency[n] != 0) {
                fprintf(stderr, "floor: unexpected or repeated outcome for order %" PRIu64 "\n", n);
                exit(1);
            }
            latency[n] = now_ns() - sent_at[n];
            received++;
        }
        if (rate <= 0 && !want_send) {
            // Everything is sent: just wait for outcomes.
            zmq_pollitem_t only_pull = {pull, 0, ZMQ_POLLIN, 0};
            zmq_poll(&only_pull, 1, 100);
        }
    }
    return count - received;
}

static void usage(void) {
    fprintf(stderr,
            "usage: floor [--orders N] [--warmup N] [--rate R] [--submitters N] [--concurrency N]\n"
            "             [--provider HOST:PORT] [--store none|fsync|sqlite] [--worker-nice N] [--max-seconds S]\n"
            "             [--without claim|streamer|claim,streamer]\n");
    exit(2);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(a, "--orders")) opt.orders = atol(v);
        else if (!strcmp(a, "--warmup")) opt.warmup = atol(v);
        else if (!strcmp(a, "--rate")) opt.rate = atof(v);
        else if (!strcmp(a, "--submitters")) opt.submitters = atoi(v);
        else if (!strcmp(a, "--concurrency")) opt.concurrency = atoi(v);
        else if (!strcmp(a, "--max-seconds")) opt.max_seconds = atoi(v);
        else if (!strcmp(a, "--worker-nice")) opt.nice_workers = atoi(v);
        else if (!strcmp(a, "--provider")) {
            if (sscanf(v, "%63[^:]:%d", opt.provider_host, &opt.provider_port) != 2) usage();
        } else if (!strcmp(a, "--store")) {
            opt.store = !strcmp(v, "none") ? STORE_NONE : !strcmp(v, "fsync") ? STORE_FSYNC : !strcmp(v, "sqlite") ? STORE_SQLITE : -1;
            if ((int)opt.store < 0) usage();
        } else if (!strcmp(a, "--without")) {
            for (const char *step = v; *step;) {
                size_t len = strcspn(step, ",");
                if (len == 5 && !strncmp(step, "claim", 5)) opt.without_claim = 1;
                else if (len == 8 && !strncmp(step, "streamer", 8)) opt.without_streamer = 1;
                else usage();
                step += len + (step[len] == ',');
            }
        } else usage();
        i++;
    }
    if (opt.orders <= 0 || opt.orders > 10000000 || opt.warmup < 0 || opt.submitters < 1 || opt.submitters > 16 ||
        opt.concurrency < 1 || opt.concurrency > MAX_CONCURRENCY || opt.max_seconds < 1)
        usage();
    snprintf(opt.store_dir, sizeof opt.store_dir, "/tmp/paypipe-floor-%d", (int)getpid());
    if (mkdir(opt.store_dir, 0700) != 0) die("mkdir store");

    int ready[2];
    if (pipe(ready) != 0) die("pipe");
    pid_t pids[20];
    int n_pids = 0;
    pid_t ledger = fork();
    if (ledger < 0) die("fork");
    if (ledger == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        close(ready[0]);
        run_ledger(ready[1]);
    }
    close(ready[1]);
    pids[n_pids++] = ledger;
    struct ledger_endpoints ep;
    if (read(ready[0], &ep, sizeof ep) != sizeof ep) die("ledger did not start");
    int signer_ready[2];
    if (pipe(signer_ready) != 0) die("pipe");
    signer_ready_fd = signer_ready[1];
    pid_t signer = spawn(run_signer, &ep, opt.nice_workers);
    close(signer_ready[1]);
    pids[n_pids++] = signer;
    if (opt.without_streamer && read(signer_ready[0], ep.signed_out, sizeof ep.signed_out) != sizeof ep.signed_out)
        die("signer did not start");
    close(signer_ready[0]);
    for (int i = 0; i < opt.submitters; i++) pids[n_pids++] = spawn(run_submitter, &ep, opt.nice_workers);

    struct sigaction on_stop = {.sa_handler = on_signal};
    sigaction(SIGINT, &on_stop, NULL);
    sigaction(SIGTERM, &on_stop, NULL);
    void *ctx = zmq_ctx_new();
    void *push = make_socket(ctx, ZMQ_PUSH, 1000), *pull = make_socket(ctx, ZMQ_PULL, 100000);
    set_int(push, ZMQ_IMMEDIATE, 0);
    connect_to(push, ep.intake);
    connect_to(pull, ep.outcomes);
    long total = opt.warmup + opt.orders;
    int64_t *sent_at = calloc((size_t)total, 8), *latency = calloc((size_t)total, 8);
    double deadline = now_s() + opt.max_seconds;
    long missing = drive(push, pull, 0, opt.warmup, opt.rate, sent_at, latency, deadline);
    double cpu_before[20];
    for (int i = 0; i < n_pids; i++) cpu_before[i] = cpu_seconds(pids[i]);
    double started = now_s();
    if (missing) fprintf(stderr, "floor: %ld warm-up orders got no outcome\n", missing);
    else missing = drive(push, pull, (uint64_t)opt.warmup, opt.orders, opt.rate, sent_at, latency, deadline);
    double elapsed = now_s() - started;
    double cpu[3] = {0, 0, 0};  // ledger, signer, submitters
    long rss = 0;
    for (int i = 0; i < n_pids; i++) {
        cpu[i == 0 ? 0 : i == 1 ? 1 : 2] += cpu_seconds(pids[i]) - cpu_before[i];
        rss += peak_rss_kib(pids[i]);
    }
    for (int i = 0; i < n_pids; i++) kill(pids[i], SIGTERM);
    for (int i = 0; i < n_pids; i++) waitpid(pids[i], NULL, 0);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", opt.store_dir);
    if (system(rm) != 0) fprintf(stderr, "floor: could not remove %s\n", opt.store_dir);
    if (missing) {
        fprintf(stderr, "floor: %ld orders got no outcome %s\n", missing, interrupted ? "(interrupted)" : "within --max-seconds");
        return 1;
    }
    int64_t *measured = latency + opt.warmup;
    qsort(measured, (size_t)opt.orders, 8, by_value);
    const char *store = opt.store == STORE_NONE ? "none" : opt.store == STORE_FSYNC ? "fsync" : "sqlite";
    const char *without = opt.without_claim && opt.without_streamer ? "claim,streamer"
                          : opt.without_claim                         ? "claim"
                          : opt.without_streamer                      ? "streamer"
                                                                      : "";
    printf("{\"store\":\"%s\",\"without\":\"%s\",\"orders\":%ld,\"rate\":%g,\"submitters\":%d,\"concurrency\":%d,"
           "\"orders_per_s\":%.0f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
           "\"cpu_us_per_order\":{\"ledger\":%.1f,\"signer\":%.1f,\"submitters\":%.1f,\"total\":%.1f},"
           "\"peak_rss_mib\":%.1f}\n",
           store, without, opt.orders, opt.rate, opt.submitters, opt.concurrency, opt.orders / elapsed,
           measured[opt.orders / 2] / 1e6, measured[opt.orders * 99 / 100] / 1e6, measured[opt.orders - 1] / 1e6,
           cpu[0] / opt.orders * 1e6, cpu[1] / opt.orders * 1e6, cpu[2] / opt.orders * 1e6,
           (cpu[0] + cpu[1] + cpu[2]) / opt.orders * 1e6, rss / 1024.0);
    return 0;
}
