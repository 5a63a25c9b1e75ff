"""Fleet benchmark: podstate against raw SSH and Ansible, at real network latency."""
