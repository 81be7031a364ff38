// What one hand-off between two processes costs on this machine when both sides are idle, as at
// W1's 200 orders/s: a ZeroMQ PUSH/PULL round trip over loopback TCP (each message wakes the
// sender's I/O thread, the receiver's I/O thread and the receiving thread) against a plain TCP
// round trip between two blocking threads (one wake per message).
//
//   cc -O2 -o hop hop.c -lzmq && ./hop [ROUND_TRIPS] [PAUSE_US]
//
// Bounded: ROUND_TRIPS (default 2000) each way, PAUSE_US (default 5000) between them, so each
// measurement starts from idle threads; every receive gives up after 2 s (the run then fails),
// and the echo side exits when the pinger closes or goes quiet.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static const int receive_timeout_ms = 2000;

static void fail(const char *what) {
    fprintf(stderr, "hop: %s\n", what);
    exit(1);
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *rtt, int n) {
    qsort(rtt, n, sizeof *rtt, by_value);
    printf("%-34s round trip p50 %6.1f us, p90 %6.1f, p99 %6.1f; one hop about %5.1f us at p50\n", what,
           rtt[n / 2], rtt[n * 9 / 10], rtt[n * 99 / 100], rtt[n / 2] / 2);
}

static void zmq_round_trips(int n, int pause_us) {
    void *ctx = zmq_ctx_new();
    void *out = zmq_socket(ctx, ZMQ_PUSH), *in = zmq_socket(ctx, ZMQ_PULL);
    char there[64], back[64];
    size_t len = sizeof there;
    if (zmq_bind(out, "tcp://127.0.0.1:*") != 0 || zmq_getsockopt(out, ZMQ_LAST_ENDPOINT, there, &len) != 0) fail("cannot bind");
    len = sizeof back;
    if (zmq_bind(in, "tcp://127.0.0.1:*") != 0 || zmq_getsockopt(in, ZMQ_LAST_ENDPOINT, back, &len) != 0) fail("cannot bind");
    zmq_setsockopt(in, ZMQ_RCVTIMEO, &receive_timeout_ms, sizeof receive_timeout_ms);
    pid_t echo = fork();
    if (echo == 0) {
        void *c = zmq_ctx_new();
        void *pull = zmq_socket(c, ZMQ_PULL), *push = zmq_socket(c, ZMQ_PUSH);
        zmq_setsockopt(pull, ZMQ_RCVTIMEO, &receive_timeout_ms, sizeof receive_timeout_ms);
        if (zmq_connect(pull, there) != 0 || zmq_connect(push, back) != 0) _exit(1);
        char buf[256];
        for (int i = 0; i < n + 1; i++) {
            int got = zmq_recv(pull, buf, sizeof buf, 0);
            if (got < 0) break;
            zmq_send(push, buf, got > (int)sizeof buf ? (int)sizeof buf : got, 0);
        }
        int linger = 0;
        zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(pull);
        zmq_close(push);
        zmq_ctx_term(c);
        _exit(0);
    }
    char msg[200], buf[256];
    memset(msg, 'x', sizeof msg);
    zmq_send(out, msg, sizeof msg, 0);  // connects both links before timing
    if (zmq_recv(in, buf, sizeof buf, 0) < 0) fail("no echo over ZeroMQ within 2 s");
    double *rtt = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        usleep(pause_us);
        double start = now_us();
        zmq_send(out, msg, sizeof msg, 0);
        if (zmq_recv(in, buf, sizeof buf, 0) < 0) fail("no echo over ZeroMQ within 2 s");
        rtt[i] = now_us() - start;
    }
    waitpid(echo, NULL, 0);
    report("ZeroMQ PUSH/PULL, two processes:", rtt, n);
    free(rtt);
    int linger = 0;
    zmq_setsockopt(out, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(in, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(out);
    zmq_close(in);
    zmq_ctx_term(ctx);
}

static void tcp_round_trips(int n, int pause_us) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    struct timeval timeout = {.tv_sec = receive_timeout_ms / 1000};
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&addr, &alen) != 0)
        fail("cannot listen");
    setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);  // bounds accept too
    pid_t echo = fork();
    if (echo == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) _exit(1);
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        char buf[200];
        for (;;) {
            ssize_t got = recv(s, buf, sizeof buf, MSG_WAITALL);
            if (got <= 0) break;
            send(s, buf, got, 0);
        }
        _exit(0);
    }
    int s = accept(listener, NULL, NULL), one = 1;
    if (s < 0) fail("the echo process did not connect within 2 s");
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char msg[200];
    memset(msg, 'x', sizeof msg);
    double *rtt = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        usleep(pause_us);
        double start = now_us();
        send(s, msg, sizeof msg, 0);
        if (recv(s, msg, sizeof msg, MSG_WAITALL) != (ssize_t)sizeof msg) fail("no echo over TCP within 2 s");
        rtt[i] = now_us() - start;
    }
    close(s);
    close(listener);
    waitpid(echo, NULL, 0);
    report("plain TCP, two blocking processes:", rtt, n);
    free(rtt);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    int pause_us = argc > 2 ? atoi(argv[2]) : 5000;
    if (n < 10 || n > 100000 || pause_us < 0 || pause_us > 1000000) {
        fprintf(stderr, "usage: hop [ROUND_TRIPS 10..100000] [PAUSE_US 0..1000000]\n");
        return 2;
    }
    printf("%d round trips of 200 bytes, %d us apart (idle threads at each start)\n", n, pause_us);
    zmq_round_trips(n, pause_us);
    tcp_round_trips(n, pause_us);
    return 0;
}
