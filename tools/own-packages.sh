# Sourced by a tools/*.sh script that runs Debian packages of its own: optional parts of
# the project that the experiments never need (a local SLURM cluster, the container image's
# host side), so they are not in tools/apt-packages.txt. The script declares them once, as
#   PACKAGES=(name ...)
# before it sources this file; the dependency-closure test (tests/deps) reads that
# declaration and checks that every command the script runs is shipped by one of them or
# by tools/apt-packages.txt, whether or not they are installed on the machine it runs on.

# Installs those of PACKAGES that are not installed yet (root; one apt-get call, so that
# apt resolves them together: podman with runc gets runc as its runtime, not crun).
install_own_packages() {
  local missing=() pkg
  for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  echo "$(basename "$0"): installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
}
