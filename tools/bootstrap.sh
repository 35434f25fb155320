#!/usr/bin/env bash
# Bring a fresh Debian/Ubuntu machine to what tcpeval needs; a no-op when all is there.
#   1. Debian packages listed in tools/apt-packages.txt (needs root for apt-get)
#   2. a Python virtual environment .venv with the pinned versions (requirements.*), made
#      with Debian's /usr/bin/python3 (PYTHON=... to choose another)
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
while read -r pkg; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < tools/apt-packages.txt

if ((${#missing[@]})); then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "bootstrap: not root; run: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's python3 (tools/apt-packages.txt), not whichever python3 comes first on PATH
py=${PYTHON:-/usr/bin/python3}
stamp=.venv/.bootstrap-stamp
want="$(readlink -f "$py") $(cat requirements.txt requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)"
have=$(cat "$stamp" 2>/dev/null || true)
if [[ ! -x .venv/bin/python || "$have" != "$want" ]]; then
  echo "bootstrap: preparing .venv (pinned Python packages, $py)"
  if [[ ! -x .venv/bin/python || "${have%% *}" != "${want%% *}" ]]; then
    "$py" -m venv --clear .venv   # new, or made by another interpreter
  fi
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -r requirements.txt -c requirements.lock
  .venv/bin/pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
