#!/bin/sh
# /start.sh of a podstate sandbox pod's image: what RunPod's start script
# (runpod/containers container-template/start.sh) does at every container start.
#
# It is the container's command: the pod's bootstrap execs it, or the pod's start command
# does (`exec /start.sh`, as a RunPod template's start command ends), so it runs with the
# environment the start command left (a sourced boot hook's values among it). File
# descriptor 4 is the pod's sshd log and 6 where the host key's public half goes; the
# bootstrap opened both. It appends PUBLIC_KEY to authorized_keys, makes the host key if it
# is missing (RunPod's base image has none, so a start gets a new one unless the start
# command put one back), appends this script's own values of the container's variables to
# /etc/rp_environment (as RunPod's printenv does) and its source line to ~/.bashrc, runs the
# image's /post_start.sh if there is one (in the foreground, as RunPod's does), then execs
# sshd.
fail() {
    echo "$(hostname): $*" >&2
    exit 1
}

ENV=/run/podstate-sandbox/container.env
[ -n "${PUBLIC_KEY:-}" ] || fail "no PUBLIC_KEY in the container's environment"
{ mkdir -p /root/.ssh && chmod 700 /root/.ssh &&
    printf '%s\n' "$PUBLIC_KEY" >>/root/.ssh/authorized_keys &&
    chmod 600 /root/.ssh/authorized_keys; } || fail "cannot add PUBLIC_KEY to authorized_keys"
if [ ! -f /etc/ssh/ssh_host_ed25519_key ]; then
    ssh-keygen -q -t ed25519 -N '' -C "root@$(hostname)" -f /etc/ssh/ssh_host_ed25519_key \
        </dev/null >/dev/null || fail "cannot make the host key"
fi
cat /etc/ssh/ssh_host_ed25519_key.pub >&6 || fail "cannot read the host key"
while IFS= read -r line; do
    name=${line#export }
    name=${name%%=*}
    value=
    eval "value=\${$name-}"
    printf 'export %s="%s"\n' "$name" "$value"
done <"$ENV" >>/etc/rp_environment || fail "cannot write /etc/rp_environment"
echo 'source /etc/rp_environment' >>/root/.bashrc || fail "cannot append to ~/.bashrc"
if [ -f /post_start.sh ]; then
    bash /post_start.sh </dev/null
fi

exec 2>&4 4>&- 5>&- 6>&- </dev/null >/dev/null
exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
