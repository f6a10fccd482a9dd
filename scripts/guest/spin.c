/* What disturbs a spinning thread on this guest (BENCHMARKS.md §4, "what sets p99.9 on this
 * guest"): one thread per CPU (0 and 1) reads the TSC in a loop for SECS seconds and counts
 * the gaps between two reads by size, per second. Compare with the local timer interrupts
 * in /proc/interrupts (LOC) over the same time.
 *   gcc -O2 -pthread scripts/guest/spin.c -o /tmp/spin && /tmp/spin [SECS] [TSC_GHZ] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

static double ghz = 2.596;
static int secs = 5;

static void *run(void *arg) {
    long cpu = (long)arg;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
    static const double th[8] = {1, 2, 5, 11, 20, 50, 100, 1000};
    long b[8] = {0};
    unsigned long long prev = __rdtsc();
    unsigned long long end = prev + (unsigned long long)(secs * ghz * 1e9);
    for (;;) {
        unsigned long long t = __rdtsc();
        double us = (t - prev) / (ghz * 1e3);
        prev = t;
        if (t > end)
            break;
        for (int i = 7; i >= 0; i--)
            if (us >= th[i]) {
                b[i]++;
                break;
            }
    }
    printf("cpu%ld:", cpu);
    for (int i = 0; i < 8; i++)
        printf(" >=%gus:%.1f/s", th[i], b[i] / (double)secs);
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1)
        secs = atoi(argv[1]);
    if (argc > 2)
        ghz = atof(argv[2]);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], 0, run, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    return 0;
}
