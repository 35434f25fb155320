"""Which Debian packages tools/apt-packages.txt brings onto a fresh machine, and which
package owns a file here.

The closure follows Depends and Pre-Depends only (what `apt-get install
--no-install-recommends` installs), as apt resolves them: of an alternative group
`a | b` the first is taken unless another member is listed or in the base system; a
virtual package is satisfied by a listed or base provider, else by its only provider
(several providers and none chosen: every one of them is unaccounted for, so the group
counts as unsatisfied). The base system is what debootstrap puts on every Debian:
the packages marked Essential or of Priority required; they are accepted as given.
"""
from __future__ import annotations

import functools
import io
import os
import re
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

APT_DEPENDS = ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
               "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"]
# /usr-merge: a file a package ships as /bin/x is reached as /usr/bin/x, and back
MERGED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def listed_packages(apt_list: Path) -> list[str]:
    """The package names of tools/apt-packages.txt, read as tools/bootstrap.sh reads it:
    one per line, blank lines and lines starting with # skipped."""
    names = []
    for line in apt_list.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(line)
    return names


def _name(token: str) -> str:
    return token.strip().strip("<>").split(":")[0]


def parse_depends(text: str) -> dict[str, list[list[tuple[str, list[str]]]]]:
    """`apt-cache depends` output -> package -> groups of alternatives; each
    alternative is (name, providers) where providers is non-empty for a virtual name."""
    graph: dict[str, list[list[tuple[str, list[str]]]]] = {}
    groups = None
    open_group = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            groups = graph.setdefault(_name(line), []) if not line.startswith("<") else None
            open_group = False
            continue
        if groups is None:
            continue
        m = re.match(r"^ ([ |])(Pre)?Depends: (.+)$", line)
        if m:
            alt = (_name(m.group(3)), [])
            if open_group:
                groups[-1].append(alt)
            else:
                groups.append([alt])
            open_group = m.group(1) == "|"
        elif line.startswith("    ") and groups and groups[-1]:
            groups[-1][-1][1].append(_name(line))
    return graph


@dataclass
class Closure:
    listed: list[str]
    base: set[str]
    installs: set[str] = field(default_factory=set)
    # package -> the listed package it was reached from (for messages)
    via: dict[str, str] = field(default_factory=dict)

    def accounts_for(self, package: str) -> bool:
        return package in self.installs or package in self.base


def closure(listed: list[str], graph: dict, base: set[str]) -> Closure:
    given = set(listed) | base
    result = Closure(listed, base)
    todo = [(p, p) for p in listed]
    while todo:
        pkg, root = todo.pop()
        if pkg in result.installs:
            continue
        result.installs.add(pkg)
        result.via.setdefault(pkg, root)
        for group in graph.get(pkg, []):
            todo += [(p, root) for p in _choose(group, given)]
    return result


def _choose(group: list[tuple[str, list[str]]], given: set[str]) -> list[str]:
    for name, providers in group:
        if name in given:
            return [name]
        chosen = [p for p in providers if p in given]
        if chosen:
            return chosen[:1]
    name, providers = group[0]
    if not providers:
        return [name]
    return providers if len(providers) == 1 else []


def base_packages() -> set[str]:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Essential}\t${Priority}\n"],
                         capture_output=True, text=True, check=True).stdout
    base = set()
    for line in out.splitlines():
        name, essential, priority = (line.split("\t") + ["", ""])[:3]
        if essential == "yes" or priority == "required":
            base.add(name)
    return base


@functools.lru_cache(maxsize=None)
def closure_of(apt_list: Path) -> Closure:
    """The closure of tools/apt-packages.txt on this machine's package lists (cached)."""
    listed = listed_packages(apt_list)
    proc = subprocess.run([*APT_DEPENDS, *listed], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"apt-cache depends failed for {apt_list}: {proc.stderr.strip()} "
                           "(a package name that apt does not know? run `apt-get update`)")
    graph = parse_depends(proc.stdout)
    unknown = [name for name in listed if name not in graph]
    if unknown:
        raise RuntimeError(f"{apt_list} lists packages apt does not know: {', '.join(unknown)} "
                           "(a typo, a virtual name, or stale package lists: run `apt-get update`)")
    return closure(listed, graph, base_packages())


def spellings(path: Path) -> list[Path]:
    """The path, with its /usr-merge twin."""
    s = str(path)
    for top in MERGED:
        if s.startswith(top + "/"):
            return [path, Path("/usr" + s)]
        if s.startswith("/usr" + top + "/"):
            return [path, Path(s[len("/usr"):])]
    return [path]


def owners(paths: list[Path]) -> dict[Path, list[str]]:
    """path -> the packages dpkg records as shipping it (either /usr-merge spelling),
    one dpkg-query call for all; an unowned path maps to []."""
    asked = {p: spellings(p) for p in paths}
    flat = sorted({str(s) for ss in asked.values() for s in ss})
    if not flat:
        return {}
    out = subprocess.run(["dpkg-query", "-S", *flat], capture_output=True, text=True).stdout
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("diversion ") or ": " not in line:
            continue
        pkgs, _, file = line.partition(": ")
        if file in flat:
            found.setdefault(file, []).extend(_name(p) for p in pkgs.split(", "))
    return {p: sorted({pkg for s in ss for pkg in found.get(str(s), [])}) for p, ss in asked.items()}


def hops(path: Path) -> list[Path]:
    """The path, every symlink it goes through (alternatives, versioned names), and the
    file it finally names."""
    seen = [path]
    current = path
    for _ in range(40):
        if not current.is_symlink():
            break
        target = Path(os.readlink(current))
        current = target if target.is_absolute() else current.parent / target
        current = Path(os.path.normpath(current))
        seen.append(current)
    real = path.resolve()
    if real not in seen:
        seen.append(real)
    return seen


def candidate_versions(packages: tuple[str, ...]) -> dict[str, str]:
    """package -> the version apt would install (one apt-cache call for all)."""
    proc = subprocess.run(["apt-cache", "show", "--no-all-versions", *packages], capture_output=True, text=True)
    found = dict(re.findall(r"^Package: (\S+)\n(?:.+\n)*?Version: (\S+)$", proc.stdout, re.M))
    unknown = [p for p in packages if p not in found]
    if unknown:
        raise RuntimeError(f"apt does not know the package(s) {', '.join(unknown)} "
                           "(a typo? stale package lists: run `apt-get update`)")
    return found


def _members(deb: Path, part: str) -> dict[str, tarfile.TarInfo | bytes]:
    """A .deb's file system (part "fsys": name -> member) or control files ("ctrl": name -> bytes)."""
    tar = subprocess.run(["dpkg-deb", f"--{part}-tarfile", str(deb)], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        members = {"/" + os.path.normpath(m.name): m for m in archive.getmembers() if not m.isdir()}
        if part == "ctrl":
            return {name: archive.extractfile(m).read() for name, m in members.items() if m.isfile()}
        return members


# `update-alternatives --install LINK NAME PATH ...` in a maintainer script: LINK is the
# package's too, though no .deb holds it (Debian's slurmd ships /usr/sbin/slurmd-wlm, and
# its postinst makes /usr/sbin/slurmd)
ALTERNATIVE = re.compile(rb"update-alternatives\s+--install\s+(/\S+)\s+\S+\s+(/\S+)")


def _deb_files(deb: Path) -> set[str]:
    files = set(_members(deb, "fsys"))
    for script in _members(deb, "ctrl").values():
        files |= {link.decode() for link, path in ALTERNATIVE.findall(script) if path.decode() in files}
    return files


def _package_files(package: str, version: str, cache: Path) -> set[str]:
    """The paths a version of a Debian package ships, read from its .deb (`apt-get
    download`), installed or not; kept in `cache` by name and version."""
    listing = cache / f"{package}_{version.replace(':', '%')}.txt"
    if not listing.exists():
        with tempfile.TemporaryDirectory() as tmp:
            got = subprocess.run(["apt-get", "download", "-q", f"{package}={version}"], cwd=tmp,
                                 capture_output=True, text=True)
            debs = list(Path(tmp).glob("*.deb"))
            if got.returncode != 0 or not debs:
                raise RuntimeError(f"apt-get download {package}={version} failed: {got.stderr.strip()}")
            names = sorted(_deb_files(debs[0]))
        cache.mkdir(parents=True, exist_ok=True)
        partial = listing.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text("\n".join(names) + "\n")
        partial.replace(listing)
    return set(listing.read_text().split())


@functools.lru_cache(maxsize=None)
def packages_files(packages: tuple[str, ...], cache: Path) -> dict[str, set[str]]:
    """package -> the paths its candidate version ships."""
    return {p: _package_files(p, v, cache) for p, v in candidate_versions(packages).items()}


def ships_command(packages: list[str], command: str, cache: Path) -> bool:
    """Does one of the packages ship the command in a system directory?"""
    paths = {str(p) for d in ("/usr/bin", "/usr/sbin") for p in spellings(Path(d) / command)}
    return any(paths & files for files in packages_files(tuple(sorted(packages)), cache).values())
