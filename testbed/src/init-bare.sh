#!/bin/busybox sh
# /init of the bare VM: busybox, the kernel modules, and whatever the run
# appended (/bin/rverbs and /run.sh). No host share, no iproute2, no
# dynamic loader: the run proves rverbs stands alone. Only when the run
# asks for it (rverbs.userland=1, and a virtio-9p share tagged "userland"
# holding rdma-core's tools of the guest's architecture, unpacked from
# Debian's packages) are those tools there, under /rdma, each callable by
# name through a chroot.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp && mount -t tmpfs tmp /tmp
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
NETDEV=$(arg netdev)
[ -n "$HOSTNO" ] || HOSTNO=1
[ -n "$NETDEV" ] || NETDEV=veth0
for m in $(cat /modules.order); do
    insmod "/modules/$m" 2>/tmp/insmod.err || fail "module $m failed to load: $(cat /tmp/insmod.err)"
done
# Local TCP (the pingpong exchange to our own address) goes through lo.
ip link set lo up || fail "cannot bring lo up"
if [ "$NETDEV" = veth0 ]; then
    # The veth pair, with busybox's ip. busybox cannot name the peer: the
    # kernel names it from "veth%d", so create the other end first and let
    # the peer become veth0.
    ip link add vethpeer type veth || fail "cannot create the veth pair"
    ip link show veth0 >/dev/null 2>&1 || fail "the veth peer is not veth0: $(ip link)"
    ip link set vethpeer up || fail "cannot bring vethpeer up"
fi
ip addr add "10.77.0.$HOSTNO/24" dev "$NETDEV" || fail "cannot address $NETDEV"
ip link set "$NETDEV" up || fail "cannot bring $NETDEV up"
[ -x /bin/rverbs ] || fail "no /bin/rverbs in the initramfs"
for l in /lib/ld-linux*; do [ -e "$l" ] && fail "a dynamic loader is present: $l"; done
export RVERBS_IN_VM=1 RVERBS_TEST_ADDR="10.77.0.$HOSTNO" RVERBS_TEST_GID=1 HOME=/tmp NETDEV
[ "$NETDEV" = veth0 ] || export RVERBS_PEER_ADDR="10.77.0.$((3 - HOSTNO))"
if [ "$(arg userland)" = 1 ]; then
    mkdir -p /rdma
    mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose userland /rdma ||
        fail "cannot mount the userland share"
    for d in proc sys dev tmp; do mount --bind /$d /rdma/$d || fail "cannot bind /$d into /rdma"; done
    mount -t tmpfs run /rdma/run || fail "cannot mount /rdma/run"
    # The tools by name; busybox's applets keep theirs.
    for t in /rdma/usr/bin/*; do
        n=${t##*/}
        [ -e "/bin/$n" ] && continue
        printf '#!/bin/sh\nexec chroot /rdma /usr/bin/%s "$@"\n' "$n" >"/bin/$n"
        chmod 755 "/bin/$n"
    done
fi
say "ready host=$HOSTNO"
cd /tmp
sh /run.sh
rc=$?
sync
say "exit-status $rc"
# With peers, stay on the link until the test bed stops every host (see
# init.sh).
[ "$(arg linger)" = 1 ] && say lingering && exec sleep 86400
poweroff -f
sleep 5
