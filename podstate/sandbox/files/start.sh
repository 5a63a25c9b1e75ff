#!/bin/sh
# /start.sh of a podstate sandbox pod's image: what RunPod's start script
# (runpod/containers container-template/start.sh) does at every container start, in its
# order.
#
# It is the container's command: the pod's bootstrap execs it, or the pod's start command
# does (`exec /start.sh`, as a RunPod template's start command ends), so it runs with the
# environment the start command left (a sourced boot hook's values among it), and so does
# everything it starts. File descriptor 4 is the pod's sshd log, 6 where the host key's
# public half goes and 7 the pod's `started` file; the bootstrap opened them.
#
# In RunPod's order: it starts nginx (`service nginx start`: here a stand-in, sleep under
# the name nginx, as a daemon); appends PUBLIC_KEY to authorized_keys and makes the host key
# if it is missing (RunPod's base image has none, so a start gets a new one unless the start
# command put one back), printing "ED25519 key fingerprint:" and its `ssh-keygen -lf` line;
# starts sshd in the background (`service ssh start`), so SSH answers from here on and
# writes "sshd PID" to fd 7; prints "SSH host keys:" and, for each key, "Key: PATH" and its
# `ssh-keygen -lf` line (to stdout: the container's log); with JUPYTER_PASSWORD set, starts
# Jupyter Lab (a stand-in: a Python process named jupyter-lab); only then appends this
# script's own values of the container's variables to /etc/rp_environment (as RunPod's
# printenv does) and its source line to ~/.bashrc; runs the image's /post_start.sh if there
# is one (in the foreground, as RunPod's does, after its "Start script(s) finished" line);
# writes "finished" to fd 7 and ends in
# `sleep infinity`, the container's keep-alive, which it waits for, as RunPod's does: so this
# script stays the container's process 1, which waits for (reaps) every orphan that ends.
# In a Vast instance (VAST_CONTAINERLABEL set) the key is SSH_PUBLIC_KEY's and there is no
# /etc/rp_environment: the template's environment stays out of SSH sessions, as on Vast; and
# once sshd answers, the template's onstart script runs, /root/onstart.sh (on the container
# disk, which Vast keeps), with bash, in the foreground, as Vast's entrypoint runs it at
# every container start.
fail() {
    echo "$(hostname): $*" >&2
    exit 1
}

ENV=/run/podstate-sandbox/container.env
# What RunPod's daemons get: no descriptor of the pod's bootstrap.
daemon() {
    "$@" </dev/null >/dev/null 2>&1 4>&- 6>&- 7>&- &
}

daemon nginx infinity

# A Vast instance's image has its key in SSH_PUBLIC_KEY, and no /etc/rp_environment.
VAST=${VAST_CONTAINERLABEL:+1}
PUBLIC_KEY=${PUBLIC_KEY:-${SSH_PUBLIC_KEY:-}}
[ -n "${PUBLIC_KEY:-}" ] || fail "no PUBLIC_KEY in the container's environment"
{ mkdir -p /root/.ssh && chmod 700 /root/.ssh &&
    printf '%s\n' "$PUBLIC_KEY" >>/root/.ssh/authorized_keys &&
    chmod 600 /root/.ssh/authorized_keys; } || fail "cannot add PUBLIC_KEY to authorized_keys"
if [ ! -f /etc/ssh/ssh_host_ed25519_key ]; then
    ssh-keygen -q -t ed25519 -N '' -C "root@$(hostname)" -f /etc/ssh/ssh_host_ed25519_key \
        </dev/null >/dev/null || fail "cannot make the host key"
    echo "ED25519 key fingerprint:"
    ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub || fail "cannot read the host key"
fi
cat /etc/ssh/ssh_host_ed25519_key.pub >&6 || fail "cannot read the host key"
/usr/sbin/sshd -D -e -f /etc/ssh/sshd_config </dev/null >/dev/null 2>&4 4>&- 6>&- 7>&- &
echo "sshd $!" >&7 || fail "cannot record sshd's pid"
echo "SSH host keys:"
for key in /etc/ssh/*.pub; do
    echo "Key: $key"
    ssh-keygen -lf "$key" || fail "cannot read the host key $key"
done

if [ -n "$VAST" ] && [ -f /root/onstart.sh ]; then
    bash /root/onstart.sh </dev/null 4>&- 6>&- 7>&- || echo "onstart.sh failed (exit status $?)"
fi

if [ -n "${JUPYTER_PASSWORD:-}" ]; then
    cd / && daemon jupyter-lab --allow-root --no-browser --port=8888 --ip='*'
fi

if [ -z "$VAST" ]; then
    while IFS= read -r line; do
        name=${line#export }
        name=${name%%=*}
        value=
        eval "value=\${$name-}"
        printf 'export %s="%s"\n' "$name" "$value"
    done <"$ENV" >>/etc/rp_environment || fail "cannot write /etc/rp_environment"
    echo 'source /etc/rp_environment' >>/root/.bashrc || fail "cannot append to ~/.bashrc"
fi
echo "Start script(s) finished, Pod is ready to use."
if [ -f /post_start.sh ]; then
    bash /post_start.sh </dev/null
fi

echo finished >&7 || fail "cannot record the end of the start script"
exec 4>&- 6>&- 7>&- </dev/null >/dev/null
sleep infinity
