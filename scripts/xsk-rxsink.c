// An AF_XDP receive-only sink for scripts/xdp-ceiling.sh (SINK=xsk; bar (c), BENCHMARKS.md §4).
//
// dpdk-testpmd's rxonly frees each frame without reading it. Our receiver copies every frame's
// payload out of its UMEM (placement into the memory region, with the CRC). The kernel then
// writes the next frame into UMEM lines that the other core has just read. This sink shows what
// that costs the path: it binds an AF_XDP socket in copy mode to IFACE queue 0 (libxdp loads its
// default redirect program), polls the RX ring for SECS seconds (bursts of up to 32, the fill
// ring refilled as it goes, never a syscall), and with TOUCH=1 copies each frame into a 64 KiB
// buffer before giving it back, as our placement does. It prints the frames received a second,
// and the socket's drop counters at the end.
//
// Build: cc -O2 -o xsk-rxsink scripts/xsk-rxsink.c -lxdp -lbpf
// Usage: xsk-rxsink IFACE SECS TOUCH [RING]
#include "xsk-common.h"

static uint8_t region[65536];

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s IFACE SECS TOUCH [RING]\n", argv[0]);
        return 2;
    }
    const char *ifname = argv[1];
    double secs = atof(argv[2]);
    int touch = atoi(argv[3]);
    unsigned ring = argc > 4 ? (unsigned)atoi(argv[4]) : 1024;
    if (secs <= 0 || ring < 64 || ring > NFRAMES / 2) {
        fprintf(stderr, "xsk-rxsink: SECS > 0, RING 64..%d\n", NFRAMES / 2);
        return 2;
    }
    struct xsk_ring_prod fq;
    struct xsk_ring_cons cq, rx;
    struct xsk_umem *umem;
    void *area = umem_open(&umem, &fq, &cq, ring * 2, ring);
    if (!area) return 1;
    struct xsk_socket_config cfg = {.rx_size = ring, .tx_size = 0, .libxdp_flags = 0,
                                    .xdp_flags = 0, .bind_flags = XDP_COPY};
    struct xsk_socket *xsk = xsk_open(ifname, umem, &rx, NULL, &cfg);
    if (!xsk) return 1;
    uint32_t idx;
    unsigned nfill = ring * 2;
    if (xsk_ring_prod__reserve(&fq, nfill, &idx) != nfill) {
        fprintf(stderr, "xsk-rxsink: fill ring\n");
        return 1;
    }
    for (unsigned i = 0; i < nfill; i++) *xsk_ring_prod__fill_addr(&fq, idx + i) = (uint64_t)i * FSIZE;
    xsk_ring_prod__submit(&fq, nfill);
    printf("xsk-rxsink ready iface=%s touch=%d\n", ifname, touch);
    fflush(stdout);
    uint64_t got = 0, last_got = 0, sum = 0;
    size_t off = 0;
    double t0 = now(), last = t0, t;
    while ((t = now()) - t0 < secs) {
        unsigned n = xsk_ring_cons__peek(&rx, BURST, &idx);
        if (!n) continue;
        uint32_t fidx;
        while (xsk_ring_prod__reserve(&fq, n, &fidx) != n) {
        }
        for (unsigned i = 0; i < n; i++) {
            const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, idx + i);
            if (touch) {
                if (off + d->len > sizeof region) off = 0;
                memcpy(region + off, xsk_umem__get_data(area, d->addr), d->len);
                sum += region[off];
                off += d->len;
            }
            *xsk_ring_prod__fill_addr(&fq, fidx + i) = xsk_umem__extract_addr(d->addr);
        }
        xsk_ring_prod__submit(&fq, n);
        xsk_ring_cons__release(&rx, n);
        got += n;
        if (t - last >= 1.0) {
            printf("xsk-rxsink t=%.1f pps=%.0f\n", t - t0, (double)(got - last_got) / (t - last));
            fflush(stdout);
            last = t, last_got = got;
        }
    }
    struct xdp_statistics st;
    socklen_t sl = sizeof st;
    memset(&st, 0, sizeof st);
    getsockopt(xsk_socket__fd(xsk), SOL_XDP, XDP_STATISTICS, &st, &sl);
    printf("xsk-rxsink iface=%s touch=%d secs=%.2f received=%llu rx_dropped=%llu rx_ring_full=%llu "
           "fill_ring_empty=%llu (sum %llu)\n",
           ifname, touch, now() - t0, (unsigned long long)got, (unsigned long long)st.rx_dropped,
           (unsigned long long)st.rx_ring_full, (unsigned long long)st.rx_fill_ring_empty_descs,
           (unsigned long long)sum);
    xsk_socket__delete(xsk);
    xsk_umem__delete(umem);
    return 0;
}
