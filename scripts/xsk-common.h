// What scripts/xsk-txgen.c and scripts/xsk-rxsink.c share (bar (c), BENCHMARKS.md §4): the
// headers, the UMEM's shape, a clock, and the UMEM's and socket's creation in copy mode.
#ifndef XSK_COMMON_H
#define XSK_COMMON_H

#include <errno.h>
#include <linux/if_xdp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <xdp/xsk.h>

#define NFRAMES 4096
#define FSIZE 2048
#define BURST 32

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// An anonymous UMEM of NFRAMES frames of FSIZE bytes with its fill and completion rings of
// `fill` and `comp` entries; its area, or NULL after a message on stderr.
static void *umem_open(struct xsk_umem **umem, struct xsk_ring_prod *fq, struct xsk_ring_cons *cq,
                       unsigned fill, unsigned comp) {
    void *area = mmap(NULL, (size_t)NFRAMES * FSIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        perror("mmap");
        return NULL;
    }
    struct xsk_umem_config ucfg = {.fill_size = fill, .comp_size = comp, .frame_size = FSIZE,
                                   .frame_headroom = 0, .flags = 0};
    int err = xsk_umem__create(umem, area, (uint64_t)NFRAMES * FSIZE, fq, cq, &ucfg);
    if (err) {
        fprintf(stderr, "xsk_umem__create: %s\n", strerror(-err));
        return NULL;
    }
    return area;
}

// An AF_XDP socket on IFACE queue 0 over `umem` (`rx` or `tx` NULL: no such ring); NULL after a
// message on stderr.
static struct xsk_socket *xsk_open(const char *ifname, struct xsk_umem *umem,
                                   struct xsk_ring_cons *rx, struct xsk_ring_prod *tx,
                                   const struct xsk_socket_config *cfg) {
    struct xsk_socket *xsk;
    int err = xsk_socket__create(&xsk, ifname, 0, umem, rx, tx, cfg);
    if (err) {
        fprintf(stderr, "xsk_socket__create: %s\n", strerror(-err));
        return NULL;
    }
    return xsk;
}

#endif
