"""A job's Ray cluster over two nodes: the head launcher on one, a worker node (`--join`) on the other, each on a block
of its own node's ports, with real Ray.

The two "nodes" are network namespaces of this machine joined by a veth pair, each with its own address, and the
worker node with its own Ray temp folder (a tmpfs over that path in a mount namespace of its own) and its own port
reservations, as a second host has: what it cannot show is a real interconnect
(bandwidth, NCCL across hosts) and separate kernels. Needs root (namespaces), iproute2 and Ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import require, require_ray

from agentrepro.hooks import agentrepro_ray_head as ray_head

pytestmark = pytest.mark.slow
SCRIPT = Path(ray_head.__file__)
HEAD_IP, WORKER_IP = "10.231.7.1", "10.231.7.2"

DRIVER = """
import json, sys, time, ray
ray.init()
deadline = time.monotonic() + 180
while sum(n["Alive"] for n in ray.nodes()) < 2:
    assert time.monotonic() < deadline, "the worker node never joined"
    time.sleep(0.5)

@ray.remote(num_cpus=1)
class Where:
    def ports(self):
        import psutil
        listening = {c.laddr.port for c in psutil.Process().net_connections(kind="tcp") if c.status == "LISTEN"}
        return ray.util.get_node_ip_address(), sorted(listening)

actors = [Where.options(resources={f"node:{ip}": 0.01}).remote() for ip in sys.argv[1:]]
placed = ray.get([a.ports.remote() for a in actors], timeout=180)
nodes = {n["NodeManagerAddress"]: [n["NodeManagerPort"], n["ObjectManagerPort"]] for n in ray.nodes() if n["Alive"]}
print("RESULT " + json.dumps({"actors": placed, "nodes": nodes}))
"""


@contextlib.contextmanager
def two_nodes():
    """Two network namespaces joined by a veth pair: (head namespace, worker namespace)."""
    require("ray", os.geteuid() == 0 and shutil.which("ip") is not None, "network namespaces need root and iproute2")
    tag = f"{os.getpid() % 100000}"
    head, worker = f"arh{tag}", f"arw{tag}"
    steps = [
        ["ip", "netns", "add", head],
        ["ip", "netns", "add", worker],
        ["ip", "link", "add", f"vh{tag}", "type", "veth", "peer", "name", f"vw{tag}"],
        ["ip", "link", "set", f"vh{tag}", "netns", head],
        ["ip", "link", "set", f"vw{tag}", "netns", worker],
        ["ip", "-n", head, "addr", "add", f"{HEAD_IP}/24", "dev", f"vh{tag}"],
        ["ip", "-n", worker, "addr", "add", f"{WORKER_IP}/24", "dev", f"vw{tag}"],
    ]
    for ns, dev in ((head, f"vh{tag}"), (worker, f"vw{tag}")):
        steps += [["ip", "-n", ns, "link", "set", "lo", "up"], ["ip", "-n", ns, "link", "set", dev, "up"]]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True, text=True)
        yield head, worker
    finally:
        for ns in (head, worker):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _block(stderr: str, what: str) -> range:
    found = re.search(rf"Ray {what} .* on ports (\d+)-(\d+)", stderr)
    assert found, stderr[-3000:]
    return range(int(found[1]), int(found[2]) + 1)


def test_a_worker_node_joins_the_jobs_head_and_each_node_keeps_to_its_own_ports(tmp_path):
    """The head binds its node's address and writes it for the worker node, which reserves a block of its own node's
    ports and joins from its address on the route to the head; an actor placed on each node listens only inside that
    node's block, as do both raylets."""
    ray, python = require_ray()
    shared = tmp_path  # what both nodes see: the head's address, the driver, the worker node's log
    address = shared / "ray-head.address"
    common = ["--key", "two-nodes", "--ray", ray, "--num-cpus", "1", "--memory-mb", "1000", "--worker-ports", "20"]
    driver = shared / "driver.py"
    driver.write_text(DRIVER)
    worker_err = shared / "worker.err"
    with two_nodes() as (head_ns, worker_ns):
        join = [python, str(SCRIPT), *common, "--join", str(address)]  # its address: the one toward the head
        # Ray gives a worker node the head's temp folder path: on another host, a folder of its own
        own_temp = 'mkdir -p "$1" && mount -t tmpfs tmpfs "$1" && shift && exec "$@"'
        own_folder = ["unshare", "--mount", "sh", "-c", own_temp, "sh", ray_head.temp_dir("two-nodes")]
        with open(worker_err, "w") as err:
            worker = subprocess.Popen(
                ["ip", "netns", "exec", worker_ns, *own_folder, *join],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, ray_head.PORTS_ENV: str(shared / "worker-node-ports")},  # its node's own
            )
        try:
            launch = [python, str(SCRIPT), *common, "--node-ip", HEAD_IP, "--address-file", str(address)]
            head = subprocess.run(
                ["ip", "netns", "exec", head_ns, *launch, "--", python, str(driver), HEAD_IP, WORKER_IP],
                capture_output=True,
                text=True,
                timeout=420,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker_code = worker.wait(timeout=120)
    assert head.returncode == 0, head.stderr[-4000:] + worker_err.read_text()[-2000:]
    result = json.loads(next(x for x in head.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    blocks = {HEAD_IP: _block(head.stderr, "head"), WORKER_IP: _block(worker_err.read_text(), "worker node")}
    assert f"at {WORKER_IP} on ports" in worker_err.read_text() and f"joining {HEAD_IP}:" in worker_err.read_text()
    assert {ip for ip, _ in result["actors"]} == {HEAD_IP, WORKER_IP}, result
    for ip, ports in result["actors"]:
        assert ports and all(port in blocks[ip] for port in ports), (ip, ports, blocks[ip])
    assert set(result["nodes"]) == {HEAD_IP, WORKER_IP}
    for ip, raylet_ports in result["nodes"].items():
        assert all(port in blocks[ip] for port in raylet_ports), (ip, raylet_ports, blocks[ip])
    assert not address.exists(), "the head removes its address when it stops"
    assert worker_code in (0, 143), worker_err.read_text()[-2000:]


def test_a_worker_node_without_a_head_address_or_with_garbage_in_it_says_so_in_one_line(tmp_path):
    """Bad input to --join and --node-ip: one line, no Ray started."""
    garbage = tmp_path / "address"
    garbage.write_text("$(reboot):6379\n")
    code = ray_head.join(garbage, key="k", node_ip=WORKER_IP, address_wait_s=0)
    assert code == 1
    with pytest.raises(ray_head.HeadFailed, match="not a Ray head address"):
        ray_head.read_address(garbage, 0)
    with pytest.raises(ray_head.HeadFailed, match=r"no Ray head address in .* after 0 s"):
        ray_head.read_address(tmp_path / "missing", 0)
    bad_ip = subprocess.run(
        ["python3", str(SCRIPT), "--key", "k", "--node-ip", "node1;ls", "--join", str(garbage)],
        capture_output=True,
        text=True,
    )
    assert bad_ip.returncode == 2 and bad_ip.stderr.strip().splitlines() == [
        "agentrepro_ray_head.py: --node-ip 'node1;ls' is not an IPv4 address"
    ]
