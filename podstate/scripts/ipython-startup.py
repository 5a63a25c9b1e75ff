# Managed by podstate: overwritten on every run.
# IPython runs this file in every new kernel. The Jupyter server that starts kernels was
# started before podstate's apply, with the container's environment (RunPod's images point
# pip, uv and the caches at the network volume); this gives the kernel, and every !pip and
# %pip in it, the environment podstate declares instead. It reads the values podstate wrote
# (JSON, never shell code), and the secrets from their own root-only file (parsed, never
# run); it changes nothing else, and without those files it does nothing.


def _podstate_environment(declared: str = "/etc/profile.d/podstate.json") -> None:
    import json
    import os
    import shlex

    try:
        with open(declared, encoding="utf-8") as f:
            data = json.load(f)
        variables = {str(k): str(v) for k, v in data["variables"].items()}
        path = [str(entry) for entry in data["path"]]
        for source in data.get("sources", []):
            if os.access(source, os.R_OK):
                with open(source, encoding="utf-8") as f:
                    words = shlex.split(f.read(), comments=True)
                variables.update(w.partition("=")[::2] for w in words if w != "export")
    except Exception:  # a kernel must start whatever is on the pod
        return
    os.environ.update(variables)
    entries = os.environ.get("PATH", "").split(os.pathsep)
    for entry in reversed(path):
        if entry not in entries:
            entries.insert(0, entry)
    os.environ["PATH"] = os.pathsep.join(entries)


_podstate_environment()
del _podstate_environment
