# shellcheck shell=bash
# The engine configuration that the benchmark and demo scripts give `iwarpd` and `iwarp-perf -d`
# (embedded mode) for two stacks on one wire: sourced by scripts/demo.sh, bench-rdma.sh,
# ab-memif.sh and lat-outliers.sh (issue #8), so that they measure the same stacks.
#
#   engine_conf KEY=VALUE...     one engine's TOML on stdout. Keys: prefix (EAL file_prefix;
#                                name it after the script and $$ so the cleanup can remove
#                                /var/run/dpdk/<prefix>), device (the DPDK vdev), ip (without
#                                the /24), core (the dataplane core), idle (dataplane.idle,
#                                default "yield"); more lines: port ([port]), mpa ([mpa]),
#                                extra (after everything: whole tables such as [control]).
#   memif_device ROLE SOCKET     one end (server|client) of a memif wire on a socket file.
#   memif_conf SIDE PREFIX DIR [KEY=VALUE...]
#                                engine_conf for one side of the memif wire on DIR/memif.sock:
#                                side a the memif server 10.77.0.1 on core 0, side b the client
#                                10.77.0.2 on core 1; more keys as engine_conf.
#
# The stacks: MTU 1500, 512 MB of EAL memory, one dataplane core each, MPA without the first
# FPDU's delay for Linux siw (both ends are our stack), log level warn.

engine_conf() {
    local prefix="" device="" ip="" core="" idle=yield port="" mpa="" extra="" kv
    for kv in "$@"; do
        case ${kv%%=*} in
            prefix) prefix=${kv#*=} ;;
            device) device=${kv#*=} ;;
            ip) ip=${kv#*=} ;;
            core) core=${kv#*=} ;;
            idle) idle=${kv#*=} ;;
            port) port=${kv#*=} ;;
            mpa) mpa=${kv#*=} ;;
            extra) extra=${kv#*=} ;;
            *) echo "engine_conf: unknown argument '$kv'" >&2; return 2 ;;
        esac
    done
    [[ -n $prefix && -n $device && -n $ip && -n $core ]] \
        || { echo "engine_conf: prefix, device, ip and core are required" >&2; return 2; }
    cat <<EOT
[eal]
memory_mb = 512
file_prefix = "$prefix"
[port]
device = "$device"
ip = "$ip/24"
mtu = 1500
$port
[dataplane]
cores = [$core]
idle = "$idle"
[mpa]
# Both ends are our stack: no wait for Linux siw's responder race (README, mpa.first_fpdu_delay_ms).
first_fpdu_delay_ms = 0
$mpa
[log]
level = "warn"
$extra
EOT
}

memif_device() { # role socket
    echo "net_memif0,role=$1,id=0,socket=$2,socket-abstract=no"
}

memif_conf() { # side prefix dir [key=value...]
    local side=$1 prefix=$2 dir=$3
    shift 3
    case $side in
        a) engine_conf prefix="$prefix" device="$(memif_device server "$dir/memif.sock")" ip=10.77.0.1 core=0 "$@" ;;
        b) engine_conf prefix="$prefix" device="$(memif_device client "$dir/memif.sock")" ip=10.77.0.2 core=1 "$@" ;;
        *) echo "memif_conf: side a or b, not '$side'" >&2; return 2 ;;
    esac
}
