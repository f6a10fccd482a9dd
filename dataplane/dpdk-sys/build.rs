//! Generates bindings to the system DPDK (Debian `libdpdk-dev`, 22.11) and builds the C shim.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim.c");
    println!("cargo:rerun-if-changed=shim.h");
    println!("cargo:rerun-if-changed=build.rs");

    let lib = match pkg_config::Config::new()
        .atleast_version("22.11")
        .cargo_metadata(false)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "\nerror: pkg-config cannot find libdpdk >= 22.11 ({e}).\n\
                 Install Debian's DPDK packages first:\n\
                 \x20   apt-get install -y dpdk dpdk-dev libdpdk-dev pkg-config libclang-dev clang\n\
                 (or run `make deps`, which does this for you).\n"
            );
            std::process::exit(1);
        }
    };

    // `pkg-config --cflags` holds `-include rte_config.h`: keep the pair together, and pass the
    // include paths to both cc and bindgen.
    let cflags = pkg_config_output(&["--cflags", "libdpdk"]);
    let args: Vec<String> = cflags.split_whitespace().map(str::to_owned).collect();

    let mut build = cc::Build::new();
    build.file("shim.c").opt_level(3).warnings(false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-include" {
            if let Some(f) = it.next() {
                build.flag("-include").flag(f);
            }
        } else {
            build.flag(a);
        }
    }
    build.compile("dpdk_shim");

    // Link dynamically against the Debian libraries; PMDs are plugins EAL loads at init.
    for p in &lib.link_paths {
        println!("cargo:rustc-link-search=native={}", p.display());
    }
    for l in &lib.libs {
        println!("cargo:rustc-link-lib=dylib={l}");
    }
    // `--as-needed` would drop the PMD-carrying libraries the shim does not reference directly.
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");

    let bindings = bindgen::Builder::default()
        .header("shim.h")
        .clang_args(args.iter().filter(|a| !a.starts_with("-march")))
        .wrap_unsafe_ops(true)
        .wrap_static_fns(false)
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(false)
        .generate_comments(false)
        .allowlist_function("shim_.*")
        .allowlist_function("rte_eal_init")
        .allowlist_function("rte_eal_cleanup")
        .allowlist_function("rte_strerror")
        .allowlist_function("rte_socket_id")
        .allowlist_function("rte_thread_register")
        .allowlist_function("rte_thread_unregister")
        .allowlist_function("rte_pktmbuf_pool_create")
        .allowlist_function("rte_pktmbuf_free_bulk")
        .allowlist_function("rte_mempool_free")
        .allowlist_function("rte_eth_dev_count_avail")
        .allowlist_function("rte_eth_dev_get_port_by_name")
        .allowlist_function("rte_eth_dev_get_name_by_port")
        .allowlist_function("rte_eth_dev_info_get")
        .allowlist_function("rte_eth_dev_configure")
        .allowlist_function("rte_eth_dev_socket_id")
        .allowlist_function("rte_eth_rx_queue_setup")
        .allowlist_function("rte_eth_tx_queue_setup")
        .allowlist_function("rte_eth_dev_start")
        .allowlist_function("rte_eth_dev_stop")
        .allowlist_function("rte_eth_dev_close")
        .allowlist_function("rte_eth_dev_set_mtu")
        .allowlist_function("rte_eth_macaddr_get")
        .allowlist_function("rte_eth_promiscuous_enable")
        .allowlist_function("rte_eth_allmulticast_enable")
        .allowlist_function("rte_eth_stats_get")
        .allowlist_function("rte_eth_stats_reset")
        .allowlist_function("rte_eth_xstats_get")
        .allowlist_function("rte_eth_xstats_get_names")
        .allowlist_function("rte_eth_dev_rss_hash_conf_get")
        .allowlist_function("rte_eth_dev_rss_reta_update")
        .allowlist_function("rte_eth_dev_rss_reta_query")
        .allowlist_function("rte_eal_iova_mode")
        .allowlist_function("rte_extmem_register")
        .allowlist_function("rte_extmem_unregister")
        .allowlist_function("rte_dev_dma_map")
        .allowlist_function("rte_dev_dma_unmap")
        .allowlist_type("rte_eth_rss_reta_entry64")
        .allowlist_type("rte_mbuf_ext_shared_info")
        .allowlist_type("rte_eth_conf")
        .allowlist_type("rte_eth_dev_info")
        .allowlist_type("rte_eth_stats")
        .allowlist_type("rte_eth_xstat")
        .allowlist_type("rte_eth_xstat_name")
        .allowlist_type("rte_ether_addr")
        .allowlist_type("rte_eth_rxconf")
        .allowlist_type("rte_eth_txconf")
        .allowlist_var("RTE_ETH_.*")
        .allowlist_var("RTE_MBUF_.*")
        .allowlist_var("RTE_PKTMBUF_HEADROOM")
        .allowlist_var("RTE_MAX_ETHPORTS")
        .allowlist_type("rte_mbuf")
        .opaque_type("rte_mempool")
        .opaque_type("rte_device")
        .opaque_type("rte_eth_dev_info_.*")
        .generate()
        .expect("bindgen failed on shim.h (is libclang-dev installed?)");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR set by cargo"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}

fn pkg_config_output(args: &[&str]) -> String {
    let out = std::process::Command::new("pkg-config")
        .args(args)
        .output()
        .expect("run pkg-config");
    String::from_utf8(out.stdout).expect("pkg-config output is UTF-8")
}
