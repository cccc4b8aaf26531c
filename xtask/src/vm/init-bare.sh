#!/bin/busybox sh
# /init of the bare VM: busybox, the kernel modules, and whatever the run
# appended (/bin/rverbs and /run.sh). No host share, no iproute2, no
# rdma-core, no dynamic loader: the run proves rverbs stands alone.
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
for m in $(cat /modules.order); do
    insmod "/modules/$m" 2>/tmp/insmod.err || fail "module $m failed to load: $(cat /tmp/insmod.err)"
done
# Local TCP (the pingpong exchange to our own address) goes through lo.
ip link set lo up || fail "cannot bring lo up"
# The veth pair, with busybox's ip. busybox cannot name the peer: the
# kernel names it from "veth%d", so create the other end first and let the
# peer become veth0.
ip link add vethpeer type veth || fail "cannot create the veth pair"
ip link show veth0 >/dev/null 2>&1 || fail "the veth peer is not veth0: $(ip link)"
ip addr add 10.77.0.1/24 dev veth0 || fail "cannot address veth0"
ip link set veth0 up && ip link set vethpeer up || fail "cannot bring the veth pair up"
[ -x /bin/rverbs ] || fail "no /bin/rverbs in the initramfs"
[ -e /lib/ld-linux-x86-64.so.2 ] && fail "a dynamic loader is present"
export RVERBS_IN_VM=1 RVERBS_TEST_ADDR=10.77.0.1 RVERBS_TEST_GID=1 HOME=/tmp
say "ready host=1"
cd /tmp
sh /run.sh
rc=$?
say "exit-status $rc"
sync
poweroff -f
sleep 5
