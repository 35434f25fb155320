#!/usr/bin/env bash
# Bring a fresh Debian/Ubuntu machine to what tcpeval needs; a no-op when all is there.
#   1. packages:    the Debian packages listed in tools/apt-packages.txt (root, apt-get)
#   2. python-deps: a virtual environment .venv with the pinned Python packages
#                   (requirements.txt, requirements.lock), made with Debian's /usr/bin/python3
#                   (PYTHON=... to choose another)
#   3. project:     tcpeval itself into .venv (editable)
# With no argument, all three; with one, that step alone (the Dockerfile runs them as
# separate layers, so that a change under src/ redoes neither apt nor pip's downloads).
set -euo pipefail
cd "$(dirname "$0")/.."

packages() {
  local missing=() pkg
  while read -r pkg; do
    [[ -z "$pkg" || "$pkg" == \#* ]] && continue
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done < tools/apt-packages.txt
  ((${#missing[@]})) || return 0
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "bootstrap: not root; run: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Debian's python3 (tools/apt-packages.txt), not whichever python3 comes first on PATH
py=${PYTHON:-/usr/bin/python3}
interpreter=$(readlink -f "$py")
digest() { cat "$@" | sha256sum | cut -d' ' -f1; }
# each step's stamp: what it was made from; a step runs again when that changes
deps_stamp=.venv/.bootstrap-python-deps
project_stamp=.venv/.bootstrap-project

python_deps() {
  local want have
  want="$interpreter $(digest requirements.txt requirements.lock)"
  have=$(cat "$deps_stamp" 2>/dev/null || true)
  [[ -x .venv/bin/python && "$have" == "$want" ]] && return 0
  echo "bootstrap: preparing .venv (pinned Python packages, $py)"
  if [[ ! -x .venv/bin/python || "${have%% *}" != "$interpreter" ]]; then
    "$py" -m venv --clear .venv   # new, or made by another interpreter
  fi
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -r requirements.txt -c requirements.lock
  echo "$want" > "$deps_stamp"
  rm -f "$project_stamp"
}

project() {
  local want
  want=$(digest pyproject.toml)
  [[ -f "$project_stamp" && "$(cat "$project_stamp")" == "$want" ]] && return 0
  .venv/bin/pip install -q --no-deps -e .
  echo "$want" > "$project_stamp"
}

case ${1:-all} in
  packages) packages ;;
  python-deps) python_deps ;;
  project) project ;;
  all) packages; python_deps; project ;;
  *) echo "bootstrap: unknown step '$1' (packages, python-deps, project)" >&2; exit 2 ;;
esac
