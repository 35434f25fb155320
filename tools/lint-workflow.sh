#!/usr/bin/env bash
# `snakemake --lint` of the workflow under each configuration given, failing on any finding
# but Snakemake's advice to give every rule a conda environment or a container (the rules
# run the pinned .venv, or the container image, instead).
#   tools/lint-workflow.sh SNAKEMAKE [CONFIG...]
#   tools/lint-workflow.sh .venv/bin/snakemake "" "campaign=short design=config/designs/udp-burst.yaml"
# CONFIG: --config entries (name=value, space-separated; "" for config/config.yaml as it is).
# snakemake --lint exits 1 on any finding, that advice too (and with --lint json it still
# prints text, Snakemake 9.27), so its text is read: a finding is a line "    * <title>:".
set -uo pipefail
snakemake=${1:?usage: $0 SNAKEMAKE [CONFIG...]}
[[ $snakemake != */* ]] || snakemake=$(realpath "$snakemake")  # a path, before the cd
shift
cd "$(dirname "$0")/.."
[[ $# -gt 0 ]] || set -- ""
allowed='Specify a conda environment or container for each rule.'
status=0
for cfg in "$@"; do
  # shellcheck disable=SC2086  # CONFIG is a list of name=value words
  out=$("$snakemake" --lint ${cfg:+--config $cfg} 2>&1)
  code=$?
  label="snakemake --lint${cfg:+ --config $cfg}"
  findings=$(grep -E '^    \* ' <<<"$out" | grep -vF "    * $allowed:" || true)
  if [[ -n $findings ]]; then
    echo "$label: findings other than conda/container:" >&2
    awk -v ok="    * $allowed:" '/^Lints for / {head = $0; next}
      /^    \* / && $0 != ok {if (head) print head; head = ""; print}' <<<"$out" >&2
    status=1
  elif [[ $code -ne 0 ]] && ! grep -q '^Lints for ' <<<"$out"; then
    # not a lint exit: the workflow did not load (a config or design error)
    echo "$label: failed:" >&2
    tail -20 <<<"$out" >&2
    status=1
  else
    echo "$label: clean (but for the conda/container advice)"
  fi
done
exit $status
