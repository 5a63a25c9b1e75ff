"""The CI examples in examples/ci/: valid for their CI system, and their check steps do what
the README says, run command by command against sandbox pods listed by a fake RunPod API.

A CI run starts from a fresh checkout, so each run here gets a fresh workspace (the
repository's inventories/ and deploy/) and the host-key store travels between runs only
through the example's own persistence step: the cache path it names, copied out after a run
and into the next workspace before it, as the CI system's cache does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from junitparser import Failure, JUnitXml

from podstate.check import shards
from podstate.inventory import hostkeys
from tests.api_server import ProviderApi
from tests.e2e import ROOT, apply, write_vars
from tests.test_runpod import BIN, KEY, _sandbox_pod, rotate_host_key, served_key

SANDBOX = {"pods": 3}
EXAMPLES = ROOT / "examples" / "ci"
HOURLY = EXAMPLES / "podstate-check.yml"
PULL_REQUEST = EXAMPLES / "podstate-pr.yml"
GITLAB = EXAMPLES / "gitlab-ci.yml"
SHARDED = EXAMPLES / "podstate-check-sharded.yml"
WATCH = EXAMPLES / "podstate-watch.yml"
REPORT_SCHEMA = json.loads((ROOT / "schema/check-report.schema.json").read_text())
PODS = {"pod-1", "pod-2", "pod-3"}


# --- the examples are valid -------------------------------------------------------------


@pytest.mark.parametrize(
    "example,schema",
    [
        (HOURLY, "vendor.github-workflows"),
        (PULL_REQUEST, "vendor.github-workflows"),
        (GITLAB, "vendor.gitlab-ci"),
        (SHARDED, "vendor.github-workflows"),
        (WATCH, "vendor.github-workflows"),
    ],
)
def test_example_validates_against_its_ci_systems_schema(example, schema):
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", schema, str(example)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_example_is_listed_here():
    assert sorted(EXAMPLES.iterdir()) == sorted([HOURLY, PULL_REQUEST, GITLAB, SHARDED, WATCH])


@pytest.mark.parametrize("example", [HOURLY, PULL_REQUEST, GITLAB, SHARDED, WATCH])
def test_examples_pin_actions_and_install_regularly(example):
    text = example.read_text()
    assert "pip install ." in text and "pip install -e" not in text
    for action in re.findall(r"uses:\s*(\S+)", text):
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@v\d+\.\d+\.\d+", action), action


# --- reading an example's check step ----------------------------------------------------


def _expand(value: object, secrets: dict[str, str]) -> str:
    """Return a workflow value with ``${{ secrets.NAME }}`` filled in; any other expression
    fails the test, since the check step must not depend on one."""

    def secret(match: re.Match) -> str:
        return secrets[match.group(1)]

    text = re.sub(r"\$\{\{\s*secrets\.(\w+)\s*\}\}", secret, str(value))
    assert "${{" not in text, f"an expression the test cannot evaluate: {text}"
    return text


def github_check(example: Path) -> tuple[str, dict[str, str], str]:
    """Return the check step's script, its environment (workflow, job, step) and the path
    the workflow's cache restores and saves."""
    workflow = yaml.safe_load(example.read_text())
    (job,) = workflow["jobs"].values()
    (step,) = [s for s in job["steps"] if "podstate check" in s.get("run", "")]
    (restore,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/restore")]
    saves = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/save")]
    assert all(
        s["with"]["path"] == restore["with"]["path"] and s["if"] == "always()" for s in saves
    )
    env = {**workflow.get("env", {}), **job.get("env", {}), **step.get("env", {})}
    values = {k: _expand(v, {"RUNPOD_API_KEY": KEY}) for k, v in env.items()}
    return step["run"], values, restore["with"]["path"]


def gitlab_check(example: Path) -> tuple[list[str], dict[str, str], str]:
    """Return the job's script lines, its variables and the path its cache keeps."""
    (job,) = [v for v in yaml.safe_load(example.read_text()).values() if "script" in v]
    (cache,) = job["cache"]
    (path,) = cache["paths"]
    return job["script"], {k: str(v) for k, v in job["variables"].items()}, path


def workspace(target: Path, host_vars: dict[str, dict] | None = None) -> Path:
    """Return a fresh checkout's worth of the repository: inventories/ and deploy/, with the
    desired state's host_vars (pod-3's small /dev/shm accepted, and ``host_vars``)."""
    shutil.copytree(ROOT / "inventories", target / "inventories", ignore=_no_pods_file)
    shutil.copytree(ROOT / "deploy", target / "deploy", ignore=shutil.ignore_patterns("__py*"))
    for pod, data in {"pod-3": {"shm": {"min_size": "32M"}}, **(host_vars or {})}.items():
        write_vars(target / "inventories", f"host_vars/{pod}.yaml", data)
    return target


def _no_pods_file(directory: str, names: list[str]) -> list[str]:
    return ["pods.yaml"] if Path(directory) == ROOT / "inventories" else []


def bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run a script as GitHub's and GitLab's runners do: bash, -e and pipefail, no stdin."""
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    out = result.stdout + result.stderr
    assert KEY not in out and "Traceback" not in out, out
    return result


class Reports:
    """What a check step left in its workspace: JSON (validated), JUnit, Markdown."""

    def __init__(self, where: Path, run: subprocess.CompletedProcess) -> None:
        self.run = run
        self.json = json.loads((where / "podstate-check.json").read_text())
        jsonschema.validate(self.json, REPORT_SCHEMA)
        self.junit = [
            c for suite in JUnitXml.fromfile(str(where / "podstate-check.xml")) for c in suite
        ]
        self.markdown = (where / "podstate-check.md").read_text()
        for text in (self.markdown, json.dumps(self.json)):
            assert KEY not in text

    def trust(self) -> dict[str, str]:
        return {name: pod["host_key"]["trust"] for name, pod in self.json["pods"].items()}

    def status(self) -> dict[str, str]:
        return {name: pod["status"] for name, pod in self.json["pods"].items()}


def fingerprint_of(port: int, tmp_path: Path) -> str:
    """Return the SHA256 fingerprint ssh-keygen gives the key the pod on ``port`` serves."""
    key = tmp_path / f"served-{port}.pub"
    key.write_text(served_key(port) + "\n")
    out = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(key)], capture_output=True, text=True, check=True
    )
    return out.stdout.split()[1]


# --- sandbox pods behind a fake RunPod API ----------------------------------------------


@pytest.fixture(scope="module")
def ci(fleet):
    """Three converged sandbox pods, pod-1 then edited by hand (drift), listed by the tests' API;
    and the environment a CI runner gives the check step, less the workflow's own."""
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    converged = apply(fleet)
    assert converged.returncode == 0, converged.stderr
    fleet.out("pod-1", "sed -i 's|/scratch/pip|/workspace/pip|' /etc/profile.d/podstate.sh")
    records = json.loads((fleet.state / "pods.json").read_text())
    started = {name: "2026-06-01T12:00:00Z" for name in records}
    api = ProviderApi("runpod")

    def publish() -> None:
        api.serve({"pods": [_sandbox_pod(rec, n, started[n]) for n, rec in records.items()]})

    publish()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PODSTATE_", "RUNPOD_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        RUNPOD_API_URL=api.url,
        PODSTATE_SANDBOX=str(fleet.state),
        PODSTATE_SSH_KEY=str(fleet.state / "id_ed25519"),
    )
    yield {"api": api, "env": env, "records": records, "started": started, "publish": publish}
    api.close()
    fleet.host_vars("pod-3", None)


def port(ci: dict, pod: str) -> int:
    return ci["records"][pod]["port"]


def run_github(ci: dict, example: Path, where: Path) -> Reports:
    script, env, _ = github_check(example)
    summary = where / "step-summary.md"
    run = bash(script, where, {**ci["env"], **env, "GITHUB_STEP_SUMMARY": str(summary)})
    reports = Reports(where, run)
    assert summary.read_text() == reports.markdown  # the job summary is the report
    return reports


def test_hourly_workflow_keeps_trust_across_runs_and_refuses_a_changed_key(ci, tmp_path):
    _, env, cache_path = github_check(HOURLY)
    assert env["PODSTATE_HOSTKEYS"] == cache_path  # the cache carries the store

    first = run_github(ci, HOURLY, workspace(tmp_path / "run-1"))
    assert first.run.returncode == 2, first.run.stdout + first.run.stderr  # drift only
    assert first.status() == {"pod-1": "drift", "pod-2": "ok", "pod-3": "ok"}
    assert first.trust() == dict.fromkeys(PODS, "first-use")
    assert first.json["summary"]["host_keys"] == {
        "verified": 0,
        "first_use": 3,
        "rekeyed": 0,
        "refused": 0,
    }
    pod1_key = first.json["pods"]["pod-1"]["host_key"]["fingerprint"]
    assert pod1_key == fingerprint_of(port(ci, "pod-1"), tmp_path)
    assert "host keys: 3 trusted on first use" in first.run.stdout
    # The fake API has no logs: each key is unverified, and the reports say why.
    assert first.json["pods"]["pod-1"]["host_key"]["unverified"] == (
        "RunPod's log answered 404 Not Found"
    )
    assert "(unverified: RunPod's log answered 404 Not Found)" in first.run.stdout
    assert (
        "- trusted on first use (unverified: nothing stored to compare with): 3 pods"
        in first.markdown
    )
    assert "+export PIP_CACHE_DIR=/scratch/pip" in first.markdown
    failed = {
        (c.classname, c.name) for c in first.junit if any(isinstance(r, Failure) for r in c.result)
    }
    assert failed == {("pod-1", "Environment")}
    host_key_cases = [c for c in first.junit if c.name == "Host key"]
    assert {c.classname for c in host_key_cases} == PODS
    assert all("trusted on first use" in c.system_out for c in host_key_cases)

    cache = tmp_path / "cache"  # the save step after run 1, the restore step before run 2
    shutil.copytree(tmp_path / "run-1" / cache_path, cache)
    rotate_host_key("pod-2", port(ci, "pod-2"))  # no restart reported: a possible interception
    second_dir = workspace(tmp_path / "run-2")
    shutil.copytree(cache, second_dir / cache_path)
    second = run_github(ci, HOURLY, second_dir)
    assert second.run.returncode == 1
    assert second.trust() == {"pod-1": "known", "pod-2": "refused", "pod-3": "known"}
    assert second.status() == {"pod-1": "drift", "pod-2": "unreachable", "pod-3": "ok"}
    assert second.json["summary"]["host_keys"] == {
        "verified": 0,
        "first_use": 0,
        "rekeyed": 0,
        "refused": 1,
    }
    pod2 = second.json["pods"]["pod-2"]
    assert pod2["error"].startswith("host key refused: the pod's key differs from the stored")
    assert pod2["host_key"]["fingerprint"] == first.json["pods"]["pod-2"]["host_key"]["fingerprint"]
    assert "- refused: 1 pod: pod-2" in second.markdown
    assert "- **unreachable** host key refused" in second.markdown
    assert "trusted on first use" not in second.markdown + second.run.stdout
    pod_id = ci["records"]["pod-2"]["pod_id"]
    stored = f"{cache_path}/{pod_id}.known_hosts"
    assert (second_dir / stored).read_text() == (cache / f"{pod_id}.known_hosts").read_text()
    (case,) = [c for c in second.junit if c.classname == "pod-2"]
    assert "host key refused" in case.result[0].message


def test_gitlab_job_keeps_trust_and_rekeys_after_a_reported_restart(ci, tmp_path):
    script, variables, cache_path = gitlab_check(GITLAB)
    assert variables["PODSTATE_HOSTKEYS"] == cache_path

    def job(where: Path) -> Reports:
        env = {**ci["env"], **variables, "RUNPOD_API_KEY": KEY}
        for line in script:  # GitLab stops at the first failing line
            run = bash(line, where, env)
            if run.returncode:
                break
        return Reports(where, run)

    first = job(workspace(tmp_path / "run-1"))
    assert first.run.returncode == 2
    assert first.trust() == dict.fromkeys(PODS, "first-use")
    old = first.json["pods"]["pod-2"]["host_key"]["fingerprint"]
    cache = tmp_path / "cache"
    shutil.copytree(tmp_path / "run-1" / cache_path, cache)

    ci["started"]["pod-2"] = "2026-06-01T14:00:00Z"  # RunPod reports a restart
    ci["publish"]()
    rotate_host_key("pod-2", port(ci, "pod-2"))
    second_dir = workspace(tmp_path / "run-2")
    shutil.copytree(cache, second_dir / cache_path)
    second = job(second_dir)
    assert second.run.returncode == 2, second.run.stdout + second.run.stderr
    assert second.trust() == {"pod-1": "known", "pod-2": "rekeyed", "pod-3": "known"}
    rekeyed = second.json["pods"]["pod-2"]["host_key"]
    new = fingerprint_of(port(ci, "pod-2"), tmp_path)
    assert (rekeyed["old_fingerprint"], rekeyed["fingerprint"]) == (old, new) and old != new
    assert f"host key re-keyed after a restart: {old} -> {new}" in second.run.stdout
    assert f"  - pod-2: `{old}` → `{new}`" in second.markdown
    assert second.json["summary"]["host_keys"] == {
        "verified": 0,
        "first_use": 0,
        "rekeyed": 1,
        "refused": 0,
    }


def test_pull_request_workflow_reports_the_prs_desired_state(ci, tmp_path):
    changed = workspace(tmp_path / "pr", {"pod-2": {"env": {"TEAM": "ml"}}})
    report = run_github(ci, PULL_REQUEST, changed)
    assert report.run.returncode == 2
    assert report.status() == {"pod-1": "drift", "pod-2": "drift", "pod-3": "ok"}
    assert "TEAM=ml" in report.json["pods"]["pod-2"]["changes"][0]["diff"]
    assert "TEAM" in report.markdown and "<details>" in report.markdown
    workflow = yaml.safe_load(PULL_REQUEST.read_text())
    (job,) = workflow["jobs"].values()
    (comment,) = [s for s in job["steps"] if "gh pr comment" in s.get("run", "")]
    assert "--body-file podstate-check.md" in comment["run"]  # the file the check wrote
    assert "always()" in comment["if"]  # posted when the check fails too
    assert not [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/save")]


def test_strict_host_keys_refuse_new_keys_and_accept_a_seeded_store(ci, tmp_path):
    where = workspace(tmp_path / "strict")
    env = {**ci["env"], "RUNPOD_API_KEY": KEY, "PODSTATE_HOSTKEYS": str(where / "keys")}
    command = "podstate check --strict-host-keys --json podstate-check.json"
    command += " --junit podstate-check.xml --markdown podstate-check.md"
    refused = Reports(where, bash(command, where, env))
    assert refused.run.returncode == 1
    assert refused.trust() == dict.fromkeys(PODS, "refused")
    assert "--strict-host-keys" in refused.json["pods"]["pod-1"]["error"]
    assert not [p for p in (where / "keys").glob("*.known_hosts") if p.read_text().strip()]
    assert not list((where / "keys").glob("*.json"))  # nothing recorded as trusted

    seeded = bash(command.replace("--strict-host-keys ", ""), where, env)  # a team seeds it
    assert seeded.returncode == 2
    strict = Reports(where, bash(command, where, env))
    assert strict.run.returncode == 2
    assert strict.trust() == dict.fromkeys(PODS, "known")


def test_a_report_path_that_cannot_be_written_is_one_line(ci, tmp_path):
    env = {**ci["env"], "RUNPOD_API_KEY": KEY, "PODSTATE_HOSTKEYS": str(tmp_path / "keys")}
    result = bash(
        f"podstate check --markdown {tmp_path}/missing/report.md",
        workspace(tmp_path / "w"),
        env,
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"podstate: cannot write the report {tmp_path}/missing/report.md: ")


def test_fingerprints_match_ssh_keygen(tmp_path):
    known_hosts = tmp_path / "k"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True
    )
    known_hosts.write_text("[h]:2200 " + (tmp_path / "id.pub").read_text())
    expected = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(tmp_path / "id.pub")], capture_output=True, text=True
    ).stdout.split()[1]
    assert hostkeys.fingerprint(known_hosts) == expected


def test_scheduled_watch_puts_the_drifted_pod_back_and_keeps_the_store(ci, fleet, tmp_path):
    """The watch workflow's step in each job of its matrix (a fresh checkout each), on the
    live inventory: one pass per shard that checks the shard's pods, applies to the drifted
    one only, in its shard's job, and exits as the shard is after it."""
    workflow = yaml.safe_load(WATCH.read_text())
    (job,) = workflow["jobs"].values()
    (step,) = [s for s in job["steps"] if "podstate watch" in s.get("run", "")]
    (restore,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/restore")]
    count = int(workflow["env"]["SHARDS"])
    assert job["strategy"]["matrix"]["shard"] == list(range(1, count + 1))
    applies, stores = [], {}
    try:
        for k in job["strategy"]["matrix"]["shard"]:
            env = {**workflow.get("env", {}), **job.get("env", {}), **step.get("env", {})}
            env = {
                n: _expand(str(v).replace("${{ matrix.shard }}", str(k)), {"RUNPOD_API_KEY": KEY})
                for n, v in env.items()
            }
            assert env["PODSTATE_HOSTKEYS"] == restore["with"]["path"]  # the cache carries it
            where = workspace(tmp_path / f"watch-{k}")
            shutil.copy2(ROOT / "config.py", where / "config.py")  # a checkout has it
            run = bash(step["run"], where, {**ci["env"], **env})
            assert run.returncode == 0, run.stdout + run.stderr
            log = (where / f"podstate-watch-{k}.log").read_text()
            assert run.stdout == log  # the event lines are in the job's output too
            mine = shards.select(sorted(PODS), shards.Shard(k, count))
            assert (
                "* pass -> check: done" in log and f": shard {k}/{count}: {len(mine)} pods" in log
            )
            applies += [line.split(" ", 2)[2] for line in log.splitlines() if " -> apply: " in line]
            stores[k] = {p.name for p in (where / env["PODSTATE_HOSTKEYS"]).glob("*.known_hosts")}
        assert [line.split(" (")[0] for line in applies] == [
            "pod-1 drift -> apply: started",
            "pod-1 drift -> apply: ok",
        ]
        assert all(len(store) == 3 for store in stores.values())
    finally:  # the drift this module's fixture made, for any test after this one
        fleet.out("pod-1", "sed -i 's|/scratch/pip|/workspace/pip|' /etc/profile.d/podstate.sh")
