#!/bin/sh
# Bootstrap of one podstate sandbox pod.
#
# Started as `unshare --mount --uts --propagation private -- /bin/sh pod-bootstrap.sh` with the
# pod's state directory as working directory and pod.env, submounts and seed/ (written by
# podstate.sandbox) in it. It builds the pod's root filesystem, pivots into it, then execs
# sshd in the foreground, so this shell's pid is the pod's sshd pid.
#
# The pod's root is an overlayfs whose lower layer is the host's / and whose upper layer
# lives on a tmpfs of $POD_DISK private to this mount namespace: the pod's container disk.
# Every write outside the pod's other mounts lands there, and all of it vanishes with the
# namespace. Host directories that are separate mounts (/usr, /home, ... listed in
# submounts) are not part of the lower layer, so each gets an overlay of its own on top.
set -eu

. ./pod.env
SSHFS_PID=

fail() {
    echo "$POD_NAME: $*" >&2
    [ -z "$SSHFS_PID" ] || kill "$SSHFS_PID" 2>/dev/null || true
    exit 1
}

hostname "$POD_NAME" || fail "cannot set hostname (UTS namespace missing?)"

# The container disk: the upper layers of every overlay, and the new root's mount point.
mount -t tmpfs -o "size=$POD_DISK,mode=0755" pod-disk disk || fail "cannot mount the pod disk"
mkdir disk/upper disk/work disk/root disk/layers
# Whiteouts: /tmp, /root and /workspace start empty (re-created from seed/ below, which
# makes them opaque directories hiding the host's).
for dir in tmp root workspace; do
    mknod "disk/upper/$dir" c 0 0
done
R=$(pwd -P)/disk/root
mount -t overlay overlay -o lowerdir=/,upperdir=disk/upper,workdir=disk/work "$R" ||
    fail "overlayfs mount of / failed"

n=0
while IFS= read -r point; do
    [ -n "$point" ] && [ -d "$R$point" ] || continue
    n=$((n + 1))
    mkdir "disk/layers/$n" "disk/layers/$n/upper" "disk/layers/$n/work"
    if ! mount -t overlay overlay \
        -o "lowerdir=$point,upperdir=disk/layers/$n/upper,workdir=disk/layers/$n/work" "$R$point"; then
        # Not overlayable (a FUSE or network filesystem, say): read-only, still private.
        mount --rbind "$point" "$R$point" || fail "cannot mount $point"
        mount -o remount,bind,ro "$R$point" || true
    fi
done <submounts

# The pod's own files: /etc changes, /root, /tmp, /workspace, nvidia-smi. Directories in
# seed/ carry the modes and owners of the host's, so copying them over changes nothing.
cp -R --preserve=mode,ownership seed/. "$R/" || fail "cannot write the pod's files"
# The pod has its own ed25519 host key; hide the host's other host keys.
for key in "$R"/etc/ssh/ssh_host_*; do
    case $key in
        */ssh_host_ed25519_key | */ssh_host_ed25519_key.pub) ;;
        *) rm -f "$key" ;;
    esac
done

mount -t proc proc "$R/proc" 2>/dev/null || mount --rbind /proc "$R/proc" ||
    fail "cannot mount /proc"
mount --rbind /sys "$R/sys" || fail "cannot bind-mount /sys"
mount --rbind /dev "$R/dev" || fail "cannot bind-mount /dev"
while mountpoint -q "$R/dev/shm"; do
    umount "$R/dev/shm" 2>/dev/null || umount -l "$R/dev/shm" ||
        fail "cannot unmount the host's /dev/shm"
done
mount -t tmpfs -o "size=$POD_SHM,mode=1777,nosuid,nodev,noexec" shm "$R/dev/shm" ||
    fail "cannot mount /dev/shm"
mount -t tmpfs -o mode=0755,nosuid,nodev pod-run "$R/run" || fail "cannot mount /run"
mkdir -p "$R/run/sshd" "$R/run/podstate-sandbox"
chmod 0755 "$R/run/sshd"
chmod 0700 "$R/run/podstate-sandbox"
if [ "$POD_WORKSPACE" = sshfs ]; then
    cp storage_key storage_known_hosts "$R/run/podstate-sandbox/"
    chmod 0600 "$R/run/podstate-sandbox/storage_key"
else
    mount --bind workspace "$R/workspace" || fail "cannot bind-mount /workspace"
fi

# Files of the state directory still needed once it is out of reach.
echo $$ >sshd.pid
exec 4>>sshd.log 5>sshfs.pid

cd "$R"
pivot_root . . || fail "pivot_root into the pod's root failed"
umount -l . || fail "cannot detach the host's root"
cd /

if [ "$POD_WORKSPACE" = sshfs ]; then
    # The pod's network volume: an sshfs mount served by the sandbox storage sshd.
    sshfs -f -F /dev/null -p "$STORAGE_PORT" \
        -o IdentityFile=/run/podstate-sandbox/storage_key \
        -o UserKnownHostsFile=/run/podstate-sandbox/storage_known_hosts \
        -o StrictHostKeyChecking=yes -o BatchMode=yes \
        -o reconnect,ServerAliveInterval=15,ServerAliveCountMax=3 \
        -o idmap=none,allow_other,default_permissions \
        "root@127.0.0.1:$STORAGE_DIR" /workspace </dev/null 4>&- 5>&- &
    SSHFS_PID=$!
    echo "$SSHFS_PID" >&5
    tries=0
    until grep -q ' /workspace fuse.sshfs ' /proc/self/mounts; do
        kill -0 "$SSHFS_PID" 2>/dev/null || fail "sshfs mount of /workspace failed"
        tries=$((tries + 1))
        [ "$tries" -lt 600 ] || fail "sshfs mount of /workspace timed out"
        sleep 0.05
    done
fi

exec 2>&4 4>&- 5>&- </dev/null >/dev/null
if [ "$POD_PRIVILEGED" = 1 ]; then
    exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
fi
# Docker's default capability set: no CAP_SYS_ADMIN, so no mounts from inside the pod.
exec setpriv --bounding-set "-all,$DOCKER_CAPS" -- /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
