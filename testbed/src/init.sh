#!/bin/busybox sh
# /init of the rverbs test VM. The host (testbed/src/image.rs) builds this initramfs:
# busybox, the decompressed kernel modules listed in /modules.order, and this
# script. It brings up rxe, then runs the host-written run script inside a
# chroot of the host's root (shared read-only over 9p), so that paths inside
# the VM are the host's. Lines that start with "rverbs-vm:" are for the host.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec </dev/null

say() { echo "rverbs-vm: $*"; }
fail() {
    say "setup-failed: $*"
    poweroff -f
    sleep 5
}

arg() { # value of rverbs.$1= on the kernel command line
    for w in $(cat /proc/cmdline); do
        case "$w" in "rverbs.$1="*) echo "${w#*=}" ;; esac
    done
}
HOSTNO=$(arg host)
RUNDIR=$(arg rundir)
OUTDIR=$(arg outdir)
NETDEV=$(arg netdev)
[ -n "$HOSTNO" ] && [ -n "$RUNDIR" ] && [ -n "$NETDEV" ] || fail "kernel command line lacks rverbs.host/rundir/netdev"

for m in $(cat /modules.order); do
    insmod "/modules/$m" 2>/tmp/insmod.err || fail "module $m failed to load: $(cat /tmp/insmod.err)"
done

mkdir -p /host
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose host /host ||
    fail "cannot mount the host root over 9p"
for d in proc sys dev; do mount --bind /$d /host/$d || fail "cannot bind /$d"; done
# The guest's /tmp is a fresh tmpfs, which would hide the host's /tmp. Host
# directories the run needs that live under /tmp (a checkout there, its
# target/) are set aside and bound back on top of the tmpfs.
KEEP=$(arg keep)
mkdir -p /keep
i=0
for p in $(echo "$KEEP" | tr ':' ' '); do
    case "$p" in
    /tmp/*)
        mkdir -p /keep/$i && mount --bind "/host$p" /keep/$i || fail "cannot set aside $p"
        i=$((i + 1))
        ;;
    esac
done
mount -t tmpfs tmp /host/tmp || fail "cannot mount /tmp"
i=0
for p in $(echo "$KEEP" | tr ':' ' '); do
    case "$p" in
    /tmp/*)
        mkdir -p "/host$p" && mount --move /keep/$i "/host$p" || fail "cannot bring back $p"
        i=$((i + 1))
        ;;
    esac
done
mount -t tmpfs run /host/run || fail "cannot mount /run"
mkdir -p /host/dev/shm && mount -t tmpfs shm /host/dev/shm || fail "cannot mount /dev/shm"
if [ -n "$OUTDIR" ]; then
    mount -t 9p -o trans=virtio,version=9p2000.L,rw out "/host$OUTDIR" ||
        fail "cannot mount the writable share at $OUTDIR"
fi

# A few 2 MiB huge pages (16 MiB of the guest's 2 GiB) for the tests of
# MRs in huge pages; the tests also check the error when they run out.
echo 8 > /proc/sys/vm/nr_hugepages || fail "cannot reserve huge pages"

# Network and rxe, with the host's iproute2 (ip, rdma) through the chroot.
H="chroot /host /usr/bin/env -i PATH=/usr/sbin:/usr/bin"
$H ip link set lo up || fail "ip link set lo up"
if [ "$NETDEV" = veth0 ]; then
    $H ip link add veth0 type veth peer name veth1 || fail "cannot create veth0/veth1: $($H ip -br link)"
    $H ip link set veth1 up || fail "veth1 up"
fi
# The IPv6 link-local address comes after rxe's IPv4 GID, not with the
# link: rxe lists every address of its netdev as a GID, and when addrconf's
# link-local (DAD done) beat the IPv4 address into the table it took index
# 1, where every tool is told to find ::ffff:10.77.0.N (seen once in CI, a
# slow host of the arm64 pair). It is added below, once GID 1 is the IPv4
# one. (The default GID at index 0 is made from the MAC either way; the
# address is what routes a RoCE v2 AH to a link-local GID.)
$H ip link set "$NETDEV" addrgenmode none || fail "cannot hold back IPv6 link-local addresses on $NETDEV"
$H ip addr add "10.77.0.$HOSTNO/24" dev "$NETDEV" || fail "cannot address $NETDEV"
$H ip link set "$NETDEV" up || fail "cannot bring $NETDEV up"
$H rdma link add rxe0 type rxe netdev "$NETDEV" 2>/tmp/rdma.err ||
    fail "rdma link add rxe0 on $NETDEV failed: $(cat /tmp/rdma.err)"
[ -e /dev/infiniband/uverbs0 ] || fail "no /dev/infiniband/uverbs0 after rdma link add"
# The IPv4-mapped RoCE v2 GID appears asynchronously once the address is in.
i=0
GIDTAIL=$(printf '0a4d:%04x' "$HOSTNO")
while ! grep -q "0000:0000:0000:0000:0000:ffff:$GIDTAIL" /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 100 ] && fail "GID 1 of rxe0 is not ::ffff:10.77.0.$HOSTNO: $(cat /sys/class/infiniband/rxe0/ports/1/gids/1)"
    sleep 0.1
done
# The link-local address addrconf would have made (EUI-64 of the MAC), with
# no duplicate detection to wait for: its GID lands after the IPv4 one.
# addrconf makes it again itself whenever a test takes the link down and up
# (which flushes it): the mode goes back to EUI-64 first.
$H ip link set "$NETDEV" addrgenmode eui64 || fail "cannot restore IPv6 link-local addresses on $NETDEV"
set -- $(tr ':' ' ' < "/sys/class/net/$NETDEV/address")
LL=$(printf 'fe80::%02x%s:%sff:fe%s:%s%s' $((0x$1 ^ 2)) "$2" "$3" "$4" "$5" "$6")
$H ip -6 addr add "$LL/64" dev "$NETDEV" nodad 2>/dev/null
$H ip -6 addr show dev "$NETDEV" | grep -q "inet6 fe80:" || fail "no link-local address on $NETDEV"

say "ready host=$HOSTNO"
chroot /host /usr/bin/env -i /bin/sh "$RUNDIR/run.sh"
rc=$?
sync
say "exit-status $rc"
# With peers, the host stays on the link until the test bed stops every
# host at once: a server that exits right after its last reply must still
# be there to retransmit that reply (a lost TCP segment, a netem link) to
# a client that is still reading.
# "lingering" after the status: a host that says it and no status was
# read lost its status line, which the bed reports at once.
[ "$(arg linger)" = 1 ] && say lingering && exec sleep 86400
poweroff -f
sleep 5
