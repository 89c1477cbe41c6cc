"""Which cgroups a process is in, where a rootful runtime's container goes to stay inside a SLURM job's, and what is
removed after it (agentrepro/cgroups.py), from files laid out as the kernel and SLURM lay them out. A container in a
real SLURM job's cgroups: tests/test_slurm.py."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from agentrepro import cgroups
from agentrepro.containers import job
from agentrepro.containers.runtimes import APPTAINER, PODMAN, RunRequest

V1 = """12:pids:/slurm_n1/uid_1000/job_42/step_0/task_0
4:memory:/slurm_n1/uid_1000/job_42/step_0/task_0
3:cpuset:/slurm_n1/uid_1000/job_42/step_0
2:cpu,cpuacct:/
0::/
"""
V2 = "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n"


def test_each_controller_is_read_from_its_line_and_v2s_under_the_empty_name(tmp_path):
    membership = tmp_path / "cgroup"
    membership.write_text(V1)
    found = cgroups.groups(membership)
    assert found["memory"] == found["pids"] == "/slurm_n1/uid_1000/job_42/step_0/task_0"
    assert found["cpu"] == found["cpuacct"] == found[""] == "/"
    assert cgroups.groups(tmp_path / "absent") == {}


def test_the_container_goes_under_the_job_steps_cgroup_only_inside_a_job(tmp_path):
    """v1: the memory controller's leaf's parent (the step, under the job's limits); v2: the unified leaf's parent
    (v2 gives no controllers to the children of a cgroup that holds processes); none outside a job or at the root."""
    membership = tmp_path / "cgroup"
    membership.write_text(V1)
    inside = {"SLURM_JOB_ID": "42"}
    assert cgroups.container_parent(inside, membership) == "/slurm_n1/uid_1000/job_42/step_0"
    assert cgroups.container_parent({}, membership) is None
    membership.write_text(V2)
    assert cgroups.container_parent(inside, membership) == "/system.slice/slurmstepd.scope/job_42/step_0/user"
    membership.write_text("4:memory:/\n0::/\n")
    assert cgroups.container_parent(inside, membership) is None


def test_what_the_runtime_left_is_removed_up_to_the_job_and_nothing_in_use(tmp_path):
    """In each hierarchy: the conmon's cgroup and the chain up to the job's own where empty; the step that still holds
    a process (here a file, as rmdir refuses both) stays, and so do its parents; nothing above the job is touched."""
    step = "slurm_n1/uid_1000/job_42/step_0"
    managed, unmanaged = tmp_path / "memory", tmp_path / "cpu"
    for root in (managed, unmanaged):
        (root / step / "conmon").mkdir(parents=True)
    (managed / step / "tasks").write_text("123\n")  # the running step's own
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"cgroup {managed} cgroup rw 0 0\ncgroup {unmanaged} cgroup rw 0 0\nproc /proc proc rw 0 0\n"
        f"cgroup2 {tmp_path / 'absent'} cgroup2 rw 0 0\n"
    )
    removed = cgroups.remove_left(f"/{step}", "42", mounts)
    assert not (managed / step / "conmon").exists() and (managed / step).is_dir()
    assert not (unmanaged / "slurm_n1/uid_1000/job_42").exists() and (unmanaged / "slurm_n1/uid_1000").is_dir()
    assert set(removed) == {managed / step / "conmon", *(unmanaged / p for p in (f"{step}/conmon", step))} | {
        unmanaged / "slurm_n1/uid_1000/job_42"
    }
    assert cgroups.remove_left("/slurm_n1/uid_1000", "42", mounts) == []  # not below the job: never
    assert cgroups.remove_left(f"/{step}", "43", mounts) == []


def test_the_cgroup_parent_is_one_word_of_podmans_command_and_apptainer_needs_none(tmp_path):
    request = RunRequest("img@sha256:" + "0" * 64, ("python3", "-V"), cgroup_parent="/slurm/uid_0/job_7/step 0")
    argv, _ = PODMAN.run_argv(request)
    at = argv.index("--cgroup-parent")
    assert argv[at + 1] == "/slurm/uid_0/job_7/step 0" and at < argv.index(request.reference)
    assert "--cgroup-parent" not in PODMAN.run_argv(RunRequest(request.reference, ("python3",)))[0]
    assert "--cgroup-parent" not in " ".join(APPTAINER.run_argv(request)[0])


def test_only_the_cgroupfs_manager_gets_the_jobs_cgroup_and_a_systemd_one_is_said(monkeypatch, capsys):
    """A systemd manager takes slice names only: the container then stays outside the job's limits, which is said."""
    monkeypatch.setattr(cgroups, "container_parent", lambda: "/slurm/uid_0/job_7/step_0")

    def runtime(manager: str) -> SimpleNamespace:
        return SimpleNamespace(own_cgroups=True, manager_argv=lambda: [sys.executable, "-c", f"print({manager!r})"])

    assert job.job_cgroup(runtime("cgroupfs")) == "/slurm/uid_0/job_7/step_0"
    assert capsys.readouterr().err == ""
    assert job.job_cgroup(runtime("systemd")) is None
    err = capsys.readouterr().err
    assert "'systemd', not cgroupfs" in err and "/slurm/uid_0/job_7/step_0" in err and "limits do not hold it" in err
    assert job.job_cgroup(SimpleNamespace(own_cgroups=False)) is None  # Apptainer, rootless podman
