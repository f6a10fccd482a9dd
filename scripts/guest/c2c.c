/* The wire's state for memif benchmarks (BENCHMARKS.md §4, "what sets p99.9 on this guest"):
 * the round trip of one cache line between CPUs 0 and 1 (the two dataplane cores of
 * scripts/ab-memif.sh and bench-rdma.sh), averaged over 1,000,000 exchanges. ~50-130 ns: the
 * host runs both vCPUs on cores that share a cache (the fast state); ~370-440 ns: they do not.
 *   gcc -O2 -pthread scripts/guest/c2c.c -o /tmp/c2c && /tmp/c2c [TSC_GHZ]   (default 2.596) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

#define N 1000000
static volatile long line[16] __attribute__((aligned(64)));

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void *pong(void *arg) {
    (void)arg;
    pin(1);
    for (long i = 1; i <= N; i++) {
        while (line[0] != 2 * i - 1) {
        }
        line[0] = 2 * i;
    }
    return 0;
}

int main(int argc, char **argv) {
    double ghz = argc > 1 ? atof(argv[1]) : 2.596;
    pthread_t t;
    pthread_create(&t, 0, pong, 0);
    pin(0);
    unsigned long long s = __rdtsc();
    for (long i = 1; i <= N; i++) {
        line[0] = 2 * i - 1;
        while (line[0] != 2 * i) {
        }
    }
    unsigned long long e = __rdtsc();
    pthread_join(t, 0);
    printf("c2c RTT %.1f ns\n", (e - s) / ghz / N);
    return 0;
}
