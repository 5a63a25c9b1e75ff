"""Sandbox pods: real OpenSSH servers on 127.0.0.1, shaped like RunPod pods.

Each pod is an ``sshd -D`` in its own Linux mount and UTS namespace, like a RunPod pod is
a Docker container whose start script runs sshd as root with no systemd:

* hostname is the pod name; its root filesystem is its own, like a container's: an
  overlayfs over the host's ``/`` whose writable layer is a tmpfs of ``disk`` bytes (the
  container disk, ``df /``), so whatever a pod writes (``/scratch``, ``/etc``, ...) stays
  in that pod and vanishes with it; ``/root`` and ``/tmp`` start empty but for what RunPod
  puts there; ``/run`` and ``/dev/shm`` are the pod's own tmpfs;
* ``/workspace`` is a local directory or, like a network volume, an sshfs mount served by
  one storage sshd;
* ``/root/.bashrc`` ends with ``source /etc/rp_environment``, after Debian's "not
  interactive, return" guard, as on RunPod, so non-interactive SSH commands miss it;
* ``/usr/local/bin/nvidia-smi`` is a stand-in answering from the pod's GPU layout;
* every pod but the privileged one runs with Docker's default capability set, so no
  CAP_SYS_ADMIN and no mounts from inside.

Pod shapes cycle through ``shapes.SHAPES``. The modules, by concern:

* ``lifecycle``: ``up``, ``down`` and ``status`` of the whole sandbox (``up`` writes the
  pods file and pods.json);
* ``container``: what RunPod does to one pod's container (``restart``, ``stop_pod``,
  ``set_start_command``);
* ``inside``: reaching into a running pod beneath SSH (``pod_exec``, ``gpu_fault``, what
  its sshd served and started);
* ``ssh``: OpenSSH, the pods' servers and the client that reaches them as a user would;
* ``api``: the sandbox's RunPod API (``api_env`` says where, with its key), which lists
  the same pods as RunPod's ``GET /v2/pods`` would; ``vast_api``: its Vast API, which lists
  the sandbox's Vast instances (``up(vast=N)``) as Vast's ``GET /api/v1/instances`` would;
* ``shapes`` (what pods look like), ``prepare`` (each pod's files before it starts),
  ``processes`` (processes in namespaces, marked: start, check, end), ``storage`` (the sshd
  behind the sshfs volumes) and ``state`` (the state directory and its records).

The sandbox imports only podstate's leaves, never the product it tests.
"""
