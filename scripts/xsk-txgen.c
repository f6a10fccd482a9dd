// A paced AF_XDP transmit-only generator for scripts/xdp-ceiling.sh (bar (c), BENCHMARKS.md §4).
//
// dpdk-testpmd's txonly cannot be paced: into a veth whose receiving end runs its NAPI in a
// SCHED_FIFO kthread on the sink's core, an unpaced generator keeps that kthread busy and starves
// the sink (the XSK RX ring overflows for nearly every frame), so the path's ceiling cannot be
// read from it. This sends FRAME-byte frames from an AF_XDP socket in copy mode on IFACE queue 0
// (the kernel path our af_xdp engines' transmissions take: sendto -> __xsk_generic_xmit ->
// veth_xmit) at PPS frames a second (0: as fast as it can) for SECS seconds, in bursts of 32
// (paced: whole bursts only; a burst per kick lets the receiving NAPI work on 32 frames a wake-up
// as it does behind our loaded senders, whose TX bursts carry 30-63 frames) with a sendto kick
// each, as DPDK's net_af_xdp does, and prints once a second and at the end
// the frames the kernel completed. No XDP program is loaded on IFACE (transmit only).
//
// Build: cc -O2 -o xsk-txgen scripts/xsk-txgen.c -lxdp -lbpf   (Debian: libxdp-dev and libbpf-dev,
// which libdpdk-dev pulls in; scripts/xdp-ceiling.sh builds it with GEN=xsk)
// Usage: xsk-txgen IFACE FRAME PPS SECS [RING]
#include "xsk-common.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s IFACE FRAME PPS SECS [RING]\n", argv[0]);
        return 2;
    }
    const char *ifname = argv[1];
    unsigned frame = (unsigned)atoi(argv[2]);
    double pps = atof(argv[3]), secs = atof(argv[4]);
    unsigned ring = argc > 5 ? (unsigned)atoi(argv[5]) : 1024;
    if (frame < 60 || frame > 1514 || secs <= 0 || ring < 64 || ring > NFRAMES) {
        fprintf(stderr, "xsk-txgen: FRAME 60..1514, SECS > 0, RING 64..%d\n", NFRAMES);
        return 2;
    }
    struct xsk_ring_prod fq, tx;
    struct xsk_ring_cons cq;
    struct xsk_umem *umem;
    void *area = umem_open(&umem, &fq, &cq, ring, ring);
    if (!area) return 1;
    // Every frame the same: broadcast, a local experimental EtherType (the sink's XDP program
    // redirects every frame of the queue to its socket, whatever it carries).
    for (unsigned i = 0; i < NFRAMES; i++) {
        uint8_t *f = (uint8_t *)area + (size_t)i * FSIZE;
        memset(f, 0xff, 6);
        memcpy(f + 6, "\x02\x00\x00\x00\x00\x01\x88\xb5", 8);
        for (unsigned j = 14; j < frame; j++) f[j] = (uint8_t)j;
    }
    struct xsk_socket_config cfg = {.rx_size = 0, .tx_size = ring,
                                    .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
                                    .xdp_flags = 0, .bind_flags = XDP_COPY | XDP_USE_NEED_WAKEUP};
    struct xsk_socket *xsk = xsk_open(ifname, umem, NULL, &tx, &cfg);
    if (!xsk) return 1;
    int fd = xsk_socket__fd(xsk);
    uint64_t freel[NFRAMES];
    unsigned nfree = 0;
    for (unsigned i = 0; i < NFRAMES; i++) freel[nfree++] = (uint64_t)i * FSIZE;
    uint64_t queued = 0, done = 0, kicks = 0, busy = 0, last_done = 0;
    double t0 = now(), last = t0, t;
    while ((t = now()) - t0 < secs) {
        uint32_t idx;
        unsigned n = xsk_ring_cons__peek(&cq, ring, &idx);
        for (unsigned i = 0; i < n; i++) freel[nfree++] = *xsk_ring_cons__comp_addr(&cq, idx + i);
        if (n) xsk_ring_cons__release(&cq, n);
        done += n;
        unsigned want = BURST;
        if (pps > 0) {
            double allowed = pps * (t - t0) - (double)queued;
            want = allowed < BURST ? 0 : BURST; // whole bursts only, as a loaded sender makes them

        }
        if (want > nfree) want = nfree;
        if (want && xsk_ring_prod__reserve(&tx, want, &idx) == want) {
            for (unsigned i = 0; i < want; i++) {
                struct xdp_desc *d = xsk_ring_prod__tx_desc(&tx, idx + i);
                d->addr = freel[--nfree];
                d->len = frame;
                d->options = 0;
            }
            xsk_ring_prod__submit(&tx, want);
            queued += want;
        }
        // Kick while the kernel has not taken every descriptor of the TX ring (it takes 32 a
        // call, and none while the veth's queue is stopped); completions of frames it took may
        // come later (in copy mode when the skb is freed, by the receiving NAPI): they are not
        // waited for with syscalls.
        if (xsk_prod_nb_free(&tx, ring) < ring && xsk_ring_prod__needs_wakeup(&tx)) {
            kicks++;
            if (sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0) {
                if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS) {
                    perror("sendto");
                    return 1;
                }
                busy++;
            }
        }
        if (t - last >= 1.0) {
            printf("xsk-txgen t=%.1f pps=%.0f\n", t - t0, (double)(done - last_done) / (t - last));
            fflush(stdout);
            last = t, last_done = done;
        }
    }
    double el = now() - t0;
    printf("xsk-txgen iface=%s frame=%u target_pps=%.0f secs=%.2f completed=%llu mpps=%.4f kicks=%llu "
           "kicks_busy=%llu\n",
           ifname, frame, pps, el, (unsigned long long)done, (double)done / el / 1e6,
           (unsigned long long)kicks, (unsigned long long)busy);
    xsk_socket__delete(xsk);
    xsk_umem__delete(umem);
    return 0;
}
