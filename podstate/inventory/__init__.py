"""Which pods exist and how to reach them: the pods file, RunPod's API, host keys."""
