#!/bin/sh
# Bootstrap of one podstate sandbox pod.
#
# Started as `unshare --mount --uts --propagation private -- /bin/sh pod-bootstrap.sh` with the
# pod's state directory as working directory and pod.env, container.env, submounts, seed/
# and perhaps start_command (written by podstate.sandbox) in it. It builds the pod's root
# filesystem, pivots into it, then execs the container's command: the pod's start command if
# it has one, then (or else) the image's /start.sh, RunPod's start script, which starts sshd
# and ends in `sleep infinity`, so this shell's pid is the container's main process (its
# sshd's pid goes to the pod's `started` file). It runs at every container start:
# `podstate sandbox restart` starts it again.
#
# The pod's root is an overlayfs whose lower layer is its image, $POD_IMAGE (the host's /, or
# a Debian release's root filesystem built by podstate.sandbox.images), and whose upper layer
# lives on a tmpfs of $POD_DISK private to this mount namespace: the pod's container disk.
# Every write outside the pod's other mounts lands there, and all of it vanishes with the
# namespace (but a Vast instance's: POD_KEEP_DISK below). Host directories that are separate
# mounts (/usr, /home, ... listed in submounts; none for a built image) are not part of the
# lower layer, so each gets an overlay of its own on top.
set -eu

. ./pod.env
SSHFS_PID=

fail() {
    echo "$POD_NAME: $*" >&2
    [ -z "$SSHFS_PID" ] || kill "$SSHFS_PID" 2>/dev/null || true
    exit 1
}

hostname "$POD_NAME" || fail "cannot set hostname (UTS namespace missing?)"

# The container disk: the upper layers of every overlay (U), and the new root's mount point.
# A Vast instance's (POD_KEEP_DISK=1) is kept/ in the state directory, which outlives the
# namespace, so it survives a stop as Vast's does; it is new only at the first start.
mount -t tmpfs -o "size=$POD_DISK,mode=0755" pod-disk disk || fail "cannot mount the pod disk"
mkdir disk/root
U=disk FIRST=1
if [ "${POD_KEEP_DISK:-0}" = 1 ]; then
    U=kept
    [ ! -d kept/upper ] || FIRST=
fi
mkdir -p "$U/upper" "$U/work" "$U/layers"
# Whiteouts: /tmp, /root and /workspace start empty (re-created from seed/ below, which
# makes them opaque directories hiding the host's).
if [ -n "$FIRST" ]; then
    for dir in tmp root workspace; do
        mknod "$U/upper/$dir" c 0 0
    done
fi
R=$(pwd -P)/disk/root
mount -t overlay overlay -o "lowerdir=$POD_IMAGE,upperdir=$U/upper,workdir=$U/work" "$R" ||
    fail "overlayfs mount of the image $POD_IMAGE failed"

n=0
while IFS= read -r point; do
    [ -n "$point" ] && [ -d "$R$point" ] || continue
    n=$((n + 1))
    mkdir -p "$U/layers/$n/upper" "$U/layers/$n/work"
    if ! mount -t overlay overlay \
        -o "lowerdir=$point,upperdir=$U/layers/$n/upper,workdir=$U/layers/$n/work" "$R$point"; then
        # Not overlayable (a FUSE or network filesystem, say): read-only, still private.
        mount --rbind "$point" "$R$point" || fail "cannot mount $point"
        mount -o remount,bind,ro "$R$point" || true
    fi
done <submounts

# The pod's own files: /etc changes, /root, /tmp, /workspace, nvidia-smi (the image's,
# at the first start of a kept disk). Directories in seed/ carry the modes and owners of
# the host's, so copying them over changes nothing.
if [ -n "$FIRST" ]; then
    cp -R --preserve=mode,ownership seed/. "$R/" || fail "cannot write the pod's files"
    # No host keys, as RunPod's base image has none: hide the host's.
    rm -f "$R"/etc/ssh/ssh_host_*
fi

mount -t proc proc "$R/proc" || fail "cannot mount /proc"
mount --rbind /sys "$R/sys" || fail "cannot bind-mount /sys"
# The pod's cgroups (podstate.sandbox.cgroups): this shell, and all it starts, counts there
# from here on, and the pod sees each at its hierarchy's root, as a container does; the
# machine's hierarchies are hidden from it.
mount -t tmpfs -o mode=0755 cgroup "$R/sys/fs/cgroup" || fail "cannot hide the machine's cgroups"
while read -r ctrl path; do
    echo 0 >"$path/cgroup.procs" && mkdir "$R/sys/fs/cgroup/$ctrl" &&
        mount --bind "$path" "$R/sys/fs/cgroup/$ctrl" || fail "cannot join the cgroup $path"
done <cgroups
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
cp container.env "$R/run/podstate-sandbox/"
if [ -f start_command ]; then
    cp start_command "$R/run/podstate-sandbox/"
fi
if [ "$POD_WORKSPACE" = sshfs ]; then
    cp storage_key storage_known_hosts "$R/run/podstate-sandbox/"
    chmod 0600 "$R/run/podstate-sandbox/storage_key"
else
    mount --bind workspace "$R/workspace" || fail "cannot bind-mount /workspace"
fi

# Files of the state directory still needed once it is out of reach; container.log, new at
# every start, is the container's output (its stdout), which the sandbox's API serves as
# RunPod's serves a container's log.
exec 4>>sshd.log 5>sshfs.pid 6>host_key.pub 7>started 8>container.log

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
        "root@127.0.0.1:$STORAGE_DIR" /workspace </dev/null 4>&- 5>&- 6>&- 7>&- 8>&- &
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

# Exec a command as the container's processes run: as process 1 of a pid namespace of its
# own, with a /proc of its own that lists the pod's processes alone, as a container's does
# (sshfs, standing in for the host's mount of the volume, stays outside it; the namespace
# ends with every process in it when unshare, this shell's pid, ends); with Docker's
# default capability set (no CAP_SYS_ADMIN, so no mounts from inside the pod) unless the
# pod is privileged.
exec_in_container() {
    if [ "$POD_PRIVILEGED" != 1 ]; then
        set -- setpriv --bounding-set "-all,$DOCKER_CAPS" -- "$@"
    fi
    exec unshare --pid --fork --kill-child --mount-proc --propagation private -- "$@"
}

ENV=/run/podstate-sandbox/container.env
# The container's command, with the container's environment (HOME=/root): the pod's start
# command (the template's container start command) if it has one, else the image's
# /start.sh (RunPod's start script: files/start.sh, which starts sshd, nginx and perhaps
# Jupyter, then sleeps). The start command is sourced by /bin/sh, which then goes on with
# /start.sh unless the command execs it itself (`bash -c '. /workspace/.podstate/boot.sh;
# exec /start.sh'`, as on RunPod), so what a sourced command exports reaches the start
# script and all it starts. A start command that fails, or exits, fails the start.
# Everything runs as the container's processes do (exec_in_container), its first process
# the container's main process, whose environment (/proc/1/environ) is the container's.
HOME=/root
export HOME
# shellcheck source=/dev/null
. "$ENV"
exec 5>&- >&8 8>&-
if [ ! -f /run/podstate-sandbox/start_command ]; then
    exec_in_container /bin/sh /start.sh
fi
exec_in_container /bin/sh -c "trap 'echo \"$POD_NAME: the start command failed (exit status \$?)\" >&2' EXIT
. /run/podstate-sandbox/start_command || exit
trap - EXIT
exec /bin/sh /start.sh"
