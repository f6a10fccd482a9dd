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
