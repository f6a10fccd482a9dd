/* C shim over DPDK's static-inline functions and macros, which bindgen cannot bind. */
#ifndef IWARP_DPDK_SHIM_H
#define IWARP_DPDK_SHIM_H
#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_version.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_memory.h>
#include <rte_memzone.h>
#include <rte_devargs.h>
#include <rte_spinlock.h>

uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp);
int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned n);
void shim_pktmbuf_free(struct rte_mbuf *m);
void *shim_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t shim_pktmbuf_data_len(const struct rte_mbuf *m);
uint32_t shim_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t shim_pktmbuf_nb_segs(const struct rte_mbuf *m);
struct rte_mbuf *shim_pktmbuf_next(const struct rte_mbuf *m);
char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
char *shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
char *shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m);
uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t shim_mbuf_refcnt_read(const struct rte_mbuf *m);
void shim_mbuf_refcnt_update(struct rte_mbuf *m, int16_t v);
uint64_t shim_mbuf_ol_flags(const struct rte_mbuf *m);
uint32_t shim_mbuf_rss_hash(const struct rte_mbuf *m);
unsigned shim_mempool_avail_count(const struct rte_mempool *mp);
unsigned shim_mempool_in_use_count(const struct rte_mempool *mp);
int shim_errno(void);
unsigned shim_lcore_id(void);
uint64_t shim_rdtsc(void);
uint64_t shim_tsc_hz(void);
const char *shim_version(void);
int shim_link_up(uint16_t port, uint32_t *speed_mbps);
int shim_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail);
void shim_attach_extbuf(struct rte_mbuf *m, void *addr, uint64_t iova, uint16_t len, struct rte_mbuf_ext_shared_info *shinfo);
int shim_dev_is_vdev(const struct rte_device *dev);
const char *shim_dev_args(const struct rte_device *dev);
int *shim_memif_disconnect_lock(uint16_t port, const char *name, uint32_t id, int role, const char *socket);
#endif
