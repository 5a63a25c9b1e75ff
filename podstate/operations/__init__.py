"""pyinfra operations of the roles: commands built from the probe and the desired state."""
