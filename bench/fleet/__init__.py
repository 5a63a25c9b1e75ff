"""The fleet benchmark (``python -m bench``): podstate against raw SSH, the same work with
OpenSSH, plain pyinfra and Ansible; its cycles, its rivals and its report."""
