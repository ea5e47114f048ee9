"""Containers named from their cgroup paths, as the people who run them say them.

A container runtime puts each container's processes in a cgroup whose path it writes by a
layout of its own; that path is all the kernel's records give (meta.json `cgroups`). This
reads the layouts of docker, containerd and CRI-O under the kubelet, podman, LXC and
systemd-nspawn / systemd-machined, with both cgroup drivers (systemd's `.slice`/`.scope`
units and the plain cgroupfs directories):

  /system.slice/docker-<64 hex>.scope                    docker, systemd driver
  /docker/<64 hex>                                       docker, cgroupfs driver
  /kubepods.slice/kubepods-burstable.slice/
      kubepods-burstable-pod<uid, _ for ->.slice/
      cri-containerd-<64 hex>.scope                      containerd under the kubelet
  /kubepods/besteffort/pod<uid>/<64 hex>                 the kubelet's cgroupfs driver
  .../crio-<64 hex>.scope, .../crio-conmon-<64 hex>.scope   CRI-O, its monitor
  /machine.slice/libpod-<64 hex>.scope, /libpod_parent/libpod-<64 hex>   podman
  /lxc.payload.<name>, /lxc/<name>                       LXC
  /machine.slice/systemd-nspawn@<name>.service, /machine.slice/machine-<name>.scope
                                                         systemd-nspawn, machined

A pod's QoS class is its slice's (burstable, besteffort) or, a pod directly under kubepods,
guaranteed. A path that matches none of them is not a container (None): it is shown as the
path it is. The outermost match wins: a container that runs its own systemd has cgroups of
its own below its scope.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

ID = r"[0-9a-f]{64}"
SHORT_ID = 12       # as `docker ps` and `crictl ps` print an id
SHORT_POD = 8

# (pattern on one path component, runtime); the id or name is group 1
_UNITS = [
    (re.compile(rf"docker-({ID})\.scope"), "docker"),
    (re.compile(rf"cri-containerd-({ID})\.scope"), "containerd"),
    (re.compile(rf"crio-conmon-({ID})\.scope"), "cri-o conmon"),
    (re.compile(rf"crio-({ID})\.scope"), "cri-o"),
    (re.compile(rf"libpod-conmon-({ID})\.scope"), "podman conmon"),
    (re.compile(rf"libpod-({ID})(?:\.scope)?"), "podman"),
    (re.compile(r"lxc\.payload\.(.+)"), "lxc"),
    (re.compile(r"systemd-nspawn@(.+)\.service"), "systemd-nspawn"),
    (re.compile(r"machine-(.+)\.scope"), "machined"),
]
# a component that names its container only by where it sits: (parent component, runtime)
_BY_PARENT = {"docker": "docker", "lxc": "lxc"}
_POD_UNIT = re.compile(r"kubepods(?:-(burstable|besteffort))?-pod([0-9a-f_]{36})\.slice")
_POD_DIR = re.compile(r"pod([0-9a-f-]{36})")
_QOS = ("burstable", "besteffort")


@dataclass(frozen=True)
class Container:
    """runtime ('docker', 'containerd', 'cri-o', 'podman', 'lxc', 'systemd-nspawn',
    'machined', or 'kubernetes' when the kubelet's cgroupfs layout does not say), id (the
    full hex id, or the name of a named container), pod (the Kubernetes pod's uid, or None),
    qos (guaranteed, burstable, besteffort, or None)."""
    runtime: str
    id: str
    pod: str | None = None
    qos: str | None = None

    @property
    def short_id(self) -> str:
        return self.id[:SHORT_ID] if re.fullmatch(ID, self.id) else self.id

    def label(self) -> str:
        """'containerd container 3f2a9c1b7d4e in pod 5c2e7a1f, burstable' or
        'docker container 3f2a9c1b7d4e', 'systemd-nspawn container web', 'machine web' (a
        machine systemd-machined registered, the runtime not said)."""
        words = (f"machine {self.id}" if self.runtime == "machined"
                 else f"{self.runtime} container {self.short_id}")
        if self.pod:
            words += f" in pod {self.pod[:SHORT_POD]}"
        if self.qos:
            words += f", {self.qos}"
        return words


def _unescape(name: str) -> str:
    """systemd's unit-name escapes (\\x2d for '-') undone."""
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), name)


def _pod(parts: list[str]) -> tuple[str | None, str | None]:
    """The pod uid and QoS class the components above a container give, or (None, None)."""
    for i, p in enumerate(parts):
        m = _POD_UNIT.fullmatch(p)
        if m:
            return m.group(2).replace("_", "-"), m.group(1) or "guaranteed"
        m = _POD_DIR.fullmatch(p)
        if m and i > 0 and (parts[i - 1] == "kubepods" or parts[i - 1] in _QOS):
            return m.group(1), parts[i - 1] if parts[i - 1] in _QOS else "guaranteed"
    return None, None


def container_of(path: str | None) -> Container | None:
    """The container whose cgroup path this is (or which holds it), or None."""
    if not path or path == "/":
        return None
    parts = [p for p in path.split("/") if p]
    for i, p in enumerate(parts):
        for pattern, runtime in _UNITS:
            m = pattern.fullmatch(p)
            if m:
                pod, qos = _pod(parts[:i])
                return Container(runtime, _unescape(m.group(1)), pod, qos)
        parent = parts[i - 1] if i else ""
        if parent in _BY_PARENT and (re.fullmatch(ID, p) or _BY_PARENT[parent] == "lxc"):
            return Container(_BY_PARENT[parent], p)
        if re.fullmatch(ID, p):
            pod, qos = _pod(parts[:i])
            if pod:
                return Container("kubernetes", p, pod, qos)
    return None


def cgroup_words(path: str | None) -> str | None:
    """How a process's cgroup is said: its container's label, else 'cgroup PATH'; None for
    the root cgroup or none; what is not a path ('cgroup 77 (gone)') as it is."""
    if not path or path == "/":
        return None
    if not path.startswith("/"):
        return path
    c = container_of(path)
    return c.label() if c else f"cgroup {path}"
