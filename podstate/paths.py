"""The paths podstate owns on a pod: on the container disk (wiped by a restart) and on the
volume (kept). Every module that reads or writes one of them names it from here."""

# On the container disk, under /run: gone at a restart, as a run's state should be.
LOCK = "/run/podstate.lock"  # the pod lock (run/lock.py, scripts/lock.sh)
GPU_CACHE = "/run/podstate.gpu"  # what nvidia-smi says that cannot change while it runs
IDLE_RECORD = "/run/podstate.idle"  # since when the pod's processes are quiet (facts/work.py)
ID_CACHE = "/run/podstate.id"  # the container's identity, read once a container (facts/boot.py)

# On the container disk, under /etc/podstate.
READY_MARKER = "/etc/podstate/ready"  # the applied state's digest: the pod is in state
BOOT_FLAG = "/etc/podstate/boot"  # what the boot hook did at this start
SECRETS_DIR = "/etc/podstate/secrets"  # root-only (0700): every secret podstate writes
SECRETS_FILE = f"{SECRETS_DIR}/env.sh"  # root-only 0600 ``export NAME='value'`` lines
MADE = "/etc/podstate/made"  # root-only: what podstate made on the container disk
SAVED = "/etc/podstate/saved"  # root-only: the user's files podstate wrote over, kept
GIT_KNOWN_HOSTS = "/etc/podstate/git_known_hosts"  # what a repo fetch with ssh_key records

# The environment profile and the files each kind of shell or kernel reads.
PROFILE = "/etc/profile.d/podstate.sh"
HOOKED = {"bash": "~/.bashrc", "zsh": "~/.zshenv"}  # the file each hooked shell reads
DECLARED = "/etc/profile.d/podstate.json"  # the declared values as data, for notebook kernels
KERNEL_STARTUP = "~/.ipython/profile_default/startup/00-podstate.py"
ENV_FILES = [PROFILE, *HOOKED.values(), DECLARED, KERNEL_STARTUP]

READY_COMMAND = "/usr/local/bin/podstate-ready"

# On the volume: what must outlive a restart. The volume is boot.volume, this by default;
# podstate.operations.boot.Layout names every path podstate keeps on it, and where the boot
# hook lives (on Vast, whose stop keeps the container disk, there).
VOLUME = "/workspace"
