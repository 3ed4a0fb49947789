#!/usr/bin/env bash
# A second host on this machine for the split-host matrix (seed 004, "Internal vs External Routing
# Split-Host Matrix": the model server on one host, the controller and its tools on another): a Linux
# network namespace with its own network stack, joined to this host by a veth link.
#
#   bash benchmarks/split_host_netns.sh up     # namespace almanac-model, 10.231.0.2 there, 10.231.0.1 here
#   bash benchmarks/split_host_netns.sh down   # remove both (the veth goes with the namespace)
#   bash benchmarks/split_host_netns.sh status
#
# A managed server is started there with the HTTP backend's settings
#   server_netns: almanac-model, host: 10.231.0.2
# (data/matrices/split-host.yaml). Needs root (CAP_NET_ADMIN) and iproute2. Environment: NETNS (name), HERE_IF and THERE_IF (the veth ends),
# NET (the /30's first three octets, default 10.231.0).
set -euo pipefail
NS=${NETNS:-almanac-model}
NET=${NET:-10.231.0}
HERE_IF=${HERE_IF:-alm-ctl0}   # this end of the veth link (15 characters at most)
THERE_IF=${THERE_IF:-alm-mdl0}
case "${1:-}" in
  up)
    if ip netns list | grep -qw "$NS"; then echo "namespace $NS already up"; exit 0; fi
    ip netns add "$NS"
    ip link add "$HERE_IF" type veth peer name "$THERE_IF"
    ip link set "$THERE_IF" netns "$NS"
    ip addr add "$NET.1/30" dev "$HERE_IF"
    ip link set "$HERE_IF" up
    ip netns exec "$NS" ip addr add "$NET.2/30" dev "$THERE_IF"
    ip netns exec "$NS" ip link set "$THERE_IF" up
    ip netns exec "$NS" ip link set lo up
    echo "namespace $NS up: $NET.2 there, $NET.1 here"
    ;;
  down)
    ip netns del "$NS" 2>/dev/null || true   # its end of the veth goes with it, and so does ours
    ip link del "$HERE_IF" 2>/dev/null || true
    echo "namespace $NS down"
    ;;
  status)
    ip netns list | grep -w "$NS" || { echo "namespace $NS: down"; exit 1; }
    ip netns exec "$NS" ip -brief addr
    ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
