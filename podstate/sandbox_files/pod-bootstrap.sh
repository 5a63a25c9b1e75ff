#!/bin/sh
# Bootstrap of one podstate sandbox pod.
#
# Started as `unshare --mount --uts --propagation private -- /bin/sh pod-bootstrap.sh` with the
# pod's state directory as working directory and pod.env (written by podstate.sandbox) in it.
# It builds the pod's private view of the filesystem, then execs sshd in the foreground, so
# this shell's pid is the pod's sshd pid.
#
# Every host path below is relative to the working directory: the mounts made here may hide
# the state directory's absolute path (for instance when it lives under /tmp or /root), but
# the working directory keeps pointing at it.
set -eu

. ./pod.env

fail() {
    echo "$POD_NAME: $*" >&2
    [ ! -s sshfs.pid ] || kill "$(cat sshfs.pid)" 2>/dev/null || true
    exit 1
}

hostname "$POD_NAME" || fail "cannot set hostname (UTS namespace missing?)"

# Writable layers for /etc, /opt, /usr/local and /var. They live in upper/ and work/ on the
# state directory's filesystem; if that filesystem cannot hold overlayfs upper layers (an
# overlayfs root in a container, for instance), they move to a tmpfs private to this pod.
LAYERS=.
overlay() { # overlay <mount point> <layer name>
    [ -d "$1" ] || return 0
    mount -t overlay "pod-$2" \
        -o "lowerdir=$1,upperdir=$LAYERS/upper/$2,workdir=$LAYERS/work/$2" "$1"
}
if ! overlay /etc etc 2>/dev/null; then
    mkdir -p layers-tmpfs
    mount -t tmpfs -o mode=0755 pod-layers layers-tmpfs
    cp -a upper work layers-tmpfs/
    LAYERS=layers-tmpfs
    overlay /etc etc || fail "overlayfs mount of /etc failed"
fi
# The pod has its own ed25519 host key; hide the host's other host keys.
for key in /etc/ssh/ssh_host_*; do
    case $key in
        */ssh_host_ed25519_key | */ssh_host_ed25519_key.pub) ;;
        *) rm -f "$key" ;;
    esac
done
overlay /opt opt || fail "overlayfs mount of /opt failed"
overlay /usr/local usr-local || fail "overlayfs mount of /usr/local failed"
overlay /var var || fail "overlayfs mount of /var failed"

mount --bind root /root || fail "cannot bind-mount /root"
mount --bind tmp /tmp || fail "cannot bind-mount /tmp"
mount -t tmpfs -o mode=0755,nosuid,nodev pod-run /run || fail "cannot mount /run"
mkdir -p /run/sshd /run/podstate-sandbox
chmod 0755 /run/sshd
chmod 0700 /run/podstate-sandbox
mount -t tmpfs -o "size=$POD_SHM,mode=1777,nosuid,nodev,noexec" shm /dev/shm ||
    fail "cannot mount /dev/shm"

if [ "$POD_WORKSPACE" = sshfs ]; then
    # The pod's network volume: an sshfs mount served by the sandbox storage sshd.
    cp storage_key /run/podstate-sandbox/storage_key
    cp storage_known_hosts /run/podstate-sandbox/storage_known_hosts
    chmod 0600 /run/podstate-sandbox/storage_key
    sshfs -f -F /dev/null -p "$STORAGE_PORT" \
        -o IdentityFile=/run/podstate-sandbox/storage_key \
        -o UserKnownHostsFile=/run/podstate-sandbox/storage_known_hosts \
        -o StrictHostKeyChecking=yes -o BatchMode=yes \
        -o reconnect,ServerAliveInterval=15,ServerAliveCountMax=3 \
        -o idmap=none,allow_other,default_permissions \
        "root@127.0.0.1:$STORAGE_DIR" /workspace </dev/null &
    echo $! >sshfs.pid
    tries=0
    until grep -q ' /workspace fuse.sshfs ' /proc/self/mounts; do
        kill -0 "$(cat sshfs.pid)" 2>/dev/null || fail "sshfs mount of /workspace failed"
        tries=$((tries + 1))
        [ "$tries" -lt 600 ] || fail "sshfs mount of /workspace timed out"
        sleep 0.05
    done
else
    mount --bind workspace /workspace || fail "cannot bind-mount /workspace"
fi

echo $$ >sshd.pid
exec 2>>sshd.log </dev/null >/dev/null
cd /
if [ "$POD_PRIVILEGED" = 1 ]; then
    exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
fi
# Docker's default capability set: no CAP_SYS_ADMIN, so no mounts from inside the pod.
exec setpriv --bounding-set "-all,$DOCKER_CAPS" -- /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
