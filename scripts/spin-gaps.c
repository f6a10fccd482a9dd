// spin-gaps SECONDS THRESHOLD_CYCLES: one thread pinned per CPU (0 and 1) spins on rdtsc and
// prints every gap above THRESHOLD_CYCLES as "cpu start_tsc end_tsc" (scripts/spin-gaps.sh).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
static unsigned long long dur, thr;
struct r { int cpu; unsigned long long (*g)[2]; long n; };
static void *spin(void *p) {
  struct r *r = p; cpu_set_t s; CPU_ZERO(&s); CPU_SET(r->cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
  unsigned long long t0 = __rdtsc(), prev = t0, now;
  while ((now = __rdtsc()) - t0 < dur) {
    if (now - prev > thr && r->n < 100000) { r->g[r->n][0] = prev; r->g[r->n][1] = now; r->n++; }
    prev = now;
  }
  return 0;
}
int main(int c, char **v) {
  double hz = 2596117878.0; /* this guest's TSC rate (iwarp-perf --outliers prints it) */ dur = atof(v[1]) * hz; thr = atoll(v[2]);
  pthread_t t[2]; struct r r[2];
  for (int i = 0; i < 2; i++) { r[i].cpu = i; r[i].n = 0; r[i].g = malloc(sizeof(*r[i].g) * 100000);
    for (long k = 0; k < 100000; k++) r[i].g[k][0] = r[i].g[k][1] = 0; // prefault
    pthread_create(&t[i], 0, spin, &r[i]); }
  for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
  for (int i = 0; i < 2; i++) for (long k = 0; k < r[i].n; k++) printf("%d %llu %llu\n", i, r[i].g[k][0], r[i].g[k][1]);
  return 0;
}
