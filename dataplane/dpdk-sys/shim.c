#include "shim.h"
#include <string.h>

uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n) { return rte_eth_rx_burst(port, queue, pkts, n); }
uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n) { return rte_eth_tx_burst(port, queue, pkts, n); }
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp) { return rte_pktmbuf_alloc(mp); }
int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned n) { return rte_pktmbuf_alloc_bulk(mp, mbufs, n); }
void shim_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }
void *shim_pktmbuf_mtod(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }
uint16_t shim_pktmbuf_data_len(const struct rte_mbuf *m) { return rte_pktmbuf_data_len(m); }
uint32_t shim_pktmbuf_pkt_len(const struct rte_mbuf *m) { return rte_pktmbuf_pkt_len(m); }
uint16_t shim_pktmbuf_nb_segs(const struct rte_mbuf *m) { return m->nb_segs; }
struct rte_mbuf *shim_pktmbuf_next(const struct rte_mbuf *m) { return m->next; }
char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_append(m, len); }
char *shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_prepend(m, len); }
char *shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_adj(m, len); }
int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_trim(m, len); }
uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m) { return rte_pktmbuf_tailroom(m); }
uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m) { return rte_pktmbuf_headroom(m); }
uint16_t shim_mbuf_refcnt_read(const struct rte_mbuf *m) { return rte_mbuf_refcnt_read(m); }
void shim_mbuf_refcnt_update(struct rte_mbuf *m, int16_t v) { rte_mbuf_refcnt_update(m, v); }
uint64_t shim_mbuf_ol_flags(const struct rte_mbuf *m) { return m->ol_flags; }
uint32_t shim_mbuf_rss_hash(const struct rte_mbuf *m) { return m->hash.rss; }
unsigned shim_mempool_avail_count(const struct rte_mempool *mp) { return rte_mempool_avail_count(mp); }
unsigned shim_mempool_in_use_count(const struct rte_mempool *mp) { return rte_mempool_in_use_count(mp); }
int shim_errno(void) { return rte_errno; }
unsigned shim_lcore_id(void) { return rte_lcore_id(); }
uint64_t shim_rdtsc(void) { return rte_rdtsc(); }
uint64_t shim_tsc_hz(void) { return rte_get_tsc_hz(); }
const char *shim_version(void) { return rte_version(); }
int shim_link_up(uint16_t port, uint32_t *speed_mbps) {
    struct rte_eth_link link;
    if (rte_eth_link_get_nowait(port, &link) != 0) return -1;
    if (speed_mbps) *speed_mbps = link.link_speed;
    return link.link_status == RTE_ETH_LINK_UP;
}
int shim_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail) { return rte_pktmbuf_chain(head, tail); }
/* Attach [addr, addr + len) as the mbuf's buffer and make all of it the packet's data. The caller
 * has counted the mbuf in shinfo->refcnt. */
void shim_attach_extbuf(struct rte_mbuf *m, void *addr, uint64_t iova, uint16_t len, struct rte_mbuf_ext_shared_info *shinfo) {
    rte_pktmbuf_attach_extbuf(m, addr, iova, len, shinfo);
    m->data_len = len;
    m->pkt_len = len;
}
/* 1 when the device sits on the virtual-device bus (no DMA). */
int shim_dev_is_vdev(const struct rte_device *dev) {
    const struct rte_bus *bus = dev ? rte_dev_bus(dev) : NULL;
    const char *name = bus ? rte_bus_name(bus) : NULL;
    return name && strcmp(name, "vdev") == 0;
}

/* The device's arguments (what follows the name in --vdev), or NULL. */
const char *shim_dev_args(const struct rte_device *dev) {
    const struct rte_devargs *da = dev ? rte_dev_devargs(dev) : NULL;
    return da ? da->args : NULL;
}

/* DPDK 22.11's net_memif tears a connection down from the EAL interrupt thread
 * (memif_disconnect(): clear the connected flag, take pmd->cc_lock, ..., release it, close the
 * queues' eventfds, munmap the shared regions) with nothing that waits for a burst in progress
 * on another thread: a burst that passed the connected check reads unmapped memory (SIGSEGV)
 * or a closed, possibly reused, fd. Holding cc_lock around each burst closes the race: a burst
 * that holds it finishes before the teardown passes the lock, and one that takes it afterwards
 * sees the flag cleared and returns before touching the rings or the fds.
 *
 * This returns &pmd->cc_lock.locked, found through public data only (the "rte_eth_dev_data"
 * memzone, whose entry for the port is the one holding the port's name and the queue arrays
 * rte_eth_fp_ops points to) and checked against what the port was created with (id, role,
 * socket path); NULL when anything does not match (another DPDK version or layout). */
struct shim_memif_head { /* struct pmd_internals, DPDK 22.11 drivers/net/memif/rte_eth_memif.h */
    uint32_t id;
    int role; /* 0 server, 1 client */
    uint32_t flags;
    char *socket_filename;
    char secret[24];
    void *cc;
    rte_spinlock_t cc_lock;
};

int *shim_memif_disconnect_lock(uint16_t port, const char *name, uint32_t id, int role, const char *socket) {
    /* struct rte_eth_dev_data (DPDK 22.11 ethdev_driver.h): name[64], rx_queues, tx_queues, queue
     * counts, sriov, dev_private; cache-line aligned entries. */
    const size_t rxq_at = 64, txq_at = 72, priv_at = 96, entry_align = 64;
    const struct rte_memzone *mz;
    const char *base;
    void **rxq, **txq;
    size_t off;
    if (port >= RTE_MAX_ETHPORTS || name == NULL || socket == NULL)
        return NULL;
    if (strncmp(rte_version(), "DPDK 22.11", 10) != 0)
        return NULL;
    rxq = rte_eth_fp_ops[port].rxq.data;
    txq = rte_eth_fp_ops[port].txq.data;
    mz = rte_memzone_lookup("rte_eth_dev_data");
    if (mz == NULL || mz->addr == NULL || rxq == NULL || txq == NULL)
        return NULL;
    base = mz->addr;
    for (off = 0; off + priv_at + sizeof(void *) <= mz->len; off += entry_align) {
        const char *d = base + off;
        void *r, *t, *priv;
        const struct shim_memif_head *h;
        if (strncmp(d, name, RTE_ETH_NAME_MAX_LEN) != 0)
            continue;
        memcpy(&r, d + rxq_at, sizeof(r));
        memcpy(&t, d + txq_at, sizeof(t));
        memcpy(&priv, d + priv_at, sizeof(priv));
        if (r != (void *)rxq || t != (void *)txq || priv == NULL)
            continue;
        h = priv;
        if (h->id != id || h->role != role || (h->flags & ~0x1fu) != 0 ||
            h->socket_filename == NULL || strcmp(h->socket_filename, socket) != 0 ||
            (h->cc_lock.locked != 0 && h->cc_lock.locked != 1))
            return NULL;
        return (int *)&((struct shim_memif_head *)priv)->cc_lock.locked;
    }
    return NULL;
}
