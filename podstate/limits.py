"""The kernel's limit that bounds every command podstate sends, and the sizes it implies."""

# Linux starts no program with an argument of this many bytes or more (MAX_ARG_STRLEN, the
# terminating NUL included); the command sshd runs is one argument of ``sh -c``.
ARG_MAX = 128 << 10
# Managed files larger than this are not read, nor written: podstate rewrites a file's whole
# content inside one command, base64-encoded (a third larger), which must fit in ARG_MAX.
MAX_FILE = 64 << 10
