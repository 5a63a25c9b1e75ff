#!/bin/sh
# The `make demo` walk-through: sandbox pods, one converge, what each pod now looks like.
set -u
pods=${1:-4}
podstate sandbox status | grep -q running && podstate sandbox down >/dev/null
podstate sandbox up --pods "$pods" || exit 1
export PODSTATE_PODS="${PODSTATE_SANDBOX:-.sandbox}/pods.yaml"

echo
echo "==> Converging $pods sandbox pods: pyinfra -y inventories/pods.py deploy/*.py"
pyinfra -y inventories/pods.py deploy/*.py
echo "==> pyinfra exited $? (non-zero: a pod has a violation apply cannot fix, shown above)"

echo
echo "==> The drift check CI runs: podstate check (changes nothing; exit 0 ok, 2 drift, 1 worse)"
podstate check
echo "==> podstate check exited $?"

echo
echo "==> What a plain \`ssh pod CMD\` sees now on each pod"
key="${PODSTATE_SANDBOX:-.sandbox}/id_ed25519"
known="${PODSTATE_SANDBOX:-.sandbox}/known_hosts"
for port in $(sed -n 's/^ *ssh_port: *//p' "$PODSTATE_PODS"); do
  ssh -q -i "$key" -o UserKnownHostsFile="$known" -o BatchMode=yes -p "$port" root@127.0.0.1 \
    'printf "%-6s TMPDIR=%s PIP_CACHE_DIR=%s NCCL_P2P_DISABLE=%s /scratch on %s\n" \
       "$(hostname)" "$TMPDIR" "$PIP_CACHE_DIR" "${NCCL_P2P_DISABLE:-unset}" \
       "$(stat -f -c %T /scratch)"'
done

cat <<MSG

Explore:  ssh -i $key -o UserKnownHostsFile=$known -p PORT root@127.0.0.1
          (ports in $PODSTATE_PODS; \`podstate sandbox status\` lists them)
Re-run:   PODSTATE_PODS=$PODSTATE_PODS .venv/bin/pyinfra -y inventories/pods.py deploy/*.py
Stop:     make down   (or .venv/bin/podstate sandbox down)
MSG
