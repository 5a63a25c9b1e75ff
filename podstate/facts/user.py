"""The probe's user sections: whether the login can mount, and its user and login shell.

The shell's own capabilities are those the commands it starts as root keep: CAP_SYS_ADMIN
says whether a tmpfs can be mounted (roles/scratch.py). The user and the login shell are
those sshd runs every command with, which must read podstate's profile (roles/env.py): from
/etc/passwd by the user id the capabilities' line reads (``i``), else as the system's name
service says.
"""

from __future__ import annotations

from podstate.facts.decode import decode
from podstate.facts.section import Section

CAP_SYS_ADMIN = 21
CAPS_LINE = (
    'while read -r k v; do case $k in CapEff:) echo "caps $v"; break ;;'
    " Uid:) i=${v#*[!0-9]}; i=${i%%[!0-9]*} ;; esac; done </proc/self/status"
)
USER_LINE = (
    "u= s=; { while IFS=: read -r n _ x _ _ _ h; do"
    ' [ "$x" = "$i" ] && u=$n s=$h && break; done </etc/passwd; } 2>/dev/null;'
    ' if [ -z "$u" ]; then u=$(id -un); s=$(getent passwd "$u" 2>/dev/null);'
    ' s=${s##*:}; fi; enc "$u"; echo "user $enc_v"; enc "$s"; echo "shell $enc_v"'
)


def can_mount(caps: str | None) -> bool:
    """Return whether the ``caps`` line's value (CapEff, hexadecimal) holds CAP_SYS_ADMIN;
    False when there is none."""
    return bool(int(caps or "0", 16) >> CAP_SYS_ADMIN & 1)


CAPS = Section(
    "caps",
    fields=("can_mount",),
    parse=lambda answer: {"can_mount": can_mount(answer.value("caps"))},
    lines=lambda arguments: (CAPS_LINE,),
)
USER = Section(
    "user",
    fields=("user", "shell"),
    parse=lambda answer: {
        "user": decode(answer.value("user") or "").strip(),
        "shell": decode(answer.value("shell") or "").strip(),
    },
    lines=lambda arguments: (USER_LINE,),
)
