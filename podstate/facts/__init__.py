"""What podstate reads on a pod: the probe, one remote command per pod."""
