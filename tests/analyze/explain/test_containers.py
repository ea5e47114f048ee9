"""Containers named from cgroup paths (analyze/explain/containers.py), and the antagonists
grouped by container, on the layouts the runtimes write (paths as each runtime makes them,
ids and pod uids made up)."""
import pytest

from fixtures import MS, make_run, occ, occupant, req, rq, task
from analyze.explain.attribute import df_bands
from analyze.explain.containers import Container, cgroup_words, container_of
from analyze.explain.decompose import df_decompose
from analyze.explain.findings import Findings
from analyze.render.summary import summary_dict
from analyze.render.words import process_words

CID = "3f2a9c1b7d4e" + "0" * 52
UID = "5c2e7a1f-1234-4abc-8def-0123456789ab"
UID_ = UID.replace("-", "_")


@pytest.mark.parametrize("path,expected,label", [
    (f"/system.slice/docker-{CID}.scope", Container("docker", CID),
     "docker container 3f2a9c1b7d4e"),
    (f"/docker/{CID}", Container("docker", CID), "docker container 3f2a9c1b7d4e"),
    (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
     f"cri-containerd-{CID}.scope", Container("containerd", CID, UID, "burstable"),
     "containerd container 3f2a9c1b7d4e in pod 5c2e7a1f, burstable"),
    (f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/"
     f"crio-{CID}.scope", Container("cri-o", CID, UID, "besteffort"),
     "cri-o container 3f2a9c1b7d4e in pod 5c2e7a1f, besteffort"),
    (f"/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{CID}.scope",
     Container("cri-o conmon", CID, UID, "guaranteed"),
     "cri-o conmon container 3f2a9c1b7d4e in pod 5c2e7a1f, guaranteed"),
    (f"/kubepods/burstable/pod{UID}/{CID}", Container("kubernetes", CID, UID, "burstable"),
     "kubernetes container 3f2a9c1b7d4e in pod 5c2e7a1f, burstable"),
    (f"/kubepods/pod{UID}/{CID}", Container("kubernetes", CID, UID, "guaranteed"),
     "kubernetes container 3f2a9c1b7d4e in pod 5c2e7a1f, guaranteed"),
    (f"/machine.slice/libpod-{CID}.scope/container", Container("podman", CID),
     "podman container 3f2a9c1b7d4e"),
    (f"/libpod_parent/libpod-{CID}", Container("podman", CID), "podman container 3f2a9c1b7d4e"),
    ("/lxc.payload.web", Container("lxc", "web"), "lxc container web"),
    ("/lxc/web/init.scope", Container("lxc", "web"), "lxc container web"),
    ("/machine.slice/systemd-nspawn@debian\\x2d12.service/payload/system.slice/nginx.service",
     Container("systemd-nspawn", "debian-12"), "systemd-nspawn container debian-12"),
    ("/machine.slice/machine-web.scope", Container("machined", "web"), "machine web"),
    # the outermost match: a container with its own systemd, and a docker inside it
    (f"/system.slice/docker-{CID}.scope/system.slice/docker-{'a' * 64}.scope",
     Container("docker", CID), "docker container 3f2a9c1b7d4e"),
])
def test_each_runtime_layout_names_its_container(path, expected, label):
    assert container_of(path) == expected
    assert expected.label() == label == cgroup_words(path)


@pytest.mark.parametrize("path", ["/", "/batch", "/system.slice/nginx.service",
                                  "/user.slice/user-1000.slice/session-3.scope",
                                  f"/kubepods.slice/kubepods-pod{UID_}.slice",  # a pod, no container
                                  "/docker", f"/srv/{CID}", None, ""])
def test_other_paths_are_not_containers(path):
    assert container_of(path) is None


def test_words_for_what_is_not_a_container():
    assert cgroup_words("/batch") == "cgroup /batch"
    assert cgroup_words("/") is None and cgroup_words(None) is None
    assert cgroup_words("cgroup 77 (gone)") == "cgroup 77 (gone)"


# A victim (tid 101) runnable on CPU 0 for [1 ms, 9 ms] while three processes held it: java
# (pid 500) 4 ms and its sidecar (pid 510) 2 ms, both in one pod's container, then hog (pid
# 600) 2 ms in a plain cgroup.
POD_CG = (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
          f"cri-containerd-{CID}.scope")
META = {"ncpus": 1, "cgroups": {"77": POD_CG, "78": "/batch", "1": "/"}}


def pod_run():
    return make_run(
        runq=[rq(101, 1 * MS, 9 * MS, "preempt")],
        occupancy=[occ(0, 0, 500), occ(0, 5 * MS, 510), occ(0, 7 * MS, 600),
                   occ(0, 9 * MS, 101, pid=100)],
        occupants=[occupant(500, "java", cgroup_id=77), occupant(510, "envoy", cgroup_id=77),
                   occupant(600, "hog", cgroup_id=78), occupant(101, "w1", pid=100)],
        tasks=[task(101, "w1")], switches=[], meta=META,
        requests=[req(1, 101, 0, 10 * MS)])


def test_antagonists_are_grouped_by_container_and_named_by_it():
    run = pod_run()
    d = df_decompose(run)
    a = summary_dict(Findings(run, d, df_bands(d)))["antagonists"]["≥P99"]
    label = "containerd container 3f2a9c1b7d4e in pod 5c2e7a1f, burstable"
    assert a["containers"] == [{"container": label, "processes": 2, "ms": 6.0,
                                "share": pytest.approx(6 / 8)}]
    top = {t["pid"]: t for t in a["top"]}
    assert top[500]["container"] == label and top[500]["cgroup"] == POD_CG
    assert top[500]["ms"] == 4.0 and top[600]["container"] is None
    assert process_words(run, top[500]) == f"java (pid 500, not traced, {label})"
    assert process_words(run, top[600]) == "hog (pid 600, not traced, cgroup /batch)"


def test_the_report_says_the_containers():
    from types import SimpleNamespace

    from analyze.render.html import _who_had_cpu
    run = pod_run()
    d = df_decompose(run)
    page = _who_had_cpu(SimpleNamespace(summary=summary_dict(Findings(run, d, df_bands(d)))))
    assert ("≥P99, by container: containerd container 3f2a9c1b7d4e in pod 5c2e7a1f, burstable "
            "(2 processes) 75%.") in page
    assert "java (pid 500, containerd container 3f2a9c1b7d4e in pod 5c2e7a1f, burstable)" in page
