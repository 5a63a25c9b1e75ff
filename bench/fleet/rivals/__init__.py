"""The fleet benchmark's rivals: the same work done by plain pyinfra, by Ansible and by
podstate's own commands replayed with OpenSSH."""
