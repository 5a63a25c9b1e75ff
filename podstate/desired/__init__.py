"""The desired state: YAML vars files loaded, merged per pod and validated, and secret values."""
