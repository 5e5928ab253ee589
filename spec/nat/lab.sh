#!/bin/sh
# A small internet in network namespaces, for holepunching tests:
#
#   ludx-pub  bridge 10.50.0.1/24 (the DHT lives here)
#     ├── ludx-r1  10.50.0.11 ── NAT (masquerade) ── 192.168.1.1 ── ludx-h1 192.168.1.2
#     └── ludx-r2  10.50.0.12 ── NAT (masquerade) ── 192.168.2.1 ── ludx-h2 192.168.2.2
#
#   spec/nat/lab.sh up|down [PREFIX]   (root, iproute2, nftables)
#
# The namespaces are PREFIXpub, PREFIXr1, ... (default prefix "ludx-"); give
# each concurrent run its own prefix.
set -e
P=${2:-ludx-}
down() {
  for ns in pub r1 r2 h1 h2; do ip netns del ${P}$ns 2>/dev/null || true; done
}
up() {
  down
  for ns in pub r1 r2 h1 h2; do
    ip netns add ${P}$ns
    ip -n ${P}$ns link set lo up
  done
  ip -n ${P}pub link add br0 type bridge
  ip -n ${P}pub addr add 10.50.0.1/24 dev br0
  ip -n ${P}pub link set br0 up
  for i in 1 2; do
    r=${P}r$i
    h=${P}h$i
    # router <-> public bridge
    ip link add lx-r${i}w netns $r type veth peer name lx-p$i netns ${P}pub
    ip -n ${P}pub link set lx-p$i master br0 up
    ip -n $r addr add 10.50.0.1$i/24 dev lx-r${i}w
    ip -n $r link set lx-r${i}w up
    # router <-> host
    ip link add lx-r${i}l netns $r type veth peer name lx-h$i netns $h
    ip -n $r addr add 192.168.$i.1/24 dev lx-r${i}l
    ip -n $r link set lx-r${i}l up
    ip -n $h addr add 192.168.$i.2/24 dev lx-h$i
    ip -n $h link set lx-h$i up
    ip -n $h route add default via 192.168.$i.1
    ip netns exec $r sysctl -q -w net.ipv4.ip_forward=1
    # the NAT: masquerade what leaves towards the public side; conntrack
    # lets in only replies to flows the host opened (a firewall too)
    ip netns exec $r nft add table ip nat
    ip netns exec $r nft "add chain ip nat post { type nat hook postrouting priority 100; }"
    ip netns exec $r nft add rule ip nat post oifname "lx-r${i}w" masquerade
    ip netns exec $r nft add table ip filter
    ip netns exec $r nft "add chain ip filter lanfwd { type filter hook forward priority 0; policy drop; }"
    ip netns exec $r nft add rule ip filter lanfwd iifname "lx-r${i}l" accept
    ip netns exec $r nft add rule ip filter lanfwd ct state established,related accept
    # like a home router, drop what nobody asked for, so it never becomes a
    # conntrack entry (a dropped packet's entry is never confirmed) that
    # would later clash with a mapping the host opens
    ip netns exec $r nft "add chain ip filter input { type filter hook input priority 0; policy drop; }"
    ip netns exec $r nft add rule ip filter input ct state established,related accept
    ip netns exec $r nft add rule ip filter input iifname "lx-r${i}l" accept
    ip netns exec $r nft add rule ip filter input iifname lo accept
  done
}
case "$1" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down [PREFIX]" >&2; exit 2 ;;
esac
