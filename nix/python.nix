# Python with the analysis and workflow stack (versions follow the nixpkgs pin; the
# pip pins in requirements.lock are what Debian-based machines use).
{ pkgs }:
pkgs.python3.withPackages (ps: with ps; [
  snakemake
  pandas
  pyarrow
  numpy
  seaborn
  matplotlib
  jsonschema
  pyyaml
  pytest
  dvc
  dvc-ssh  # DVC remotes over SSH (TCPEVAL_DVC_REMOTE=ssh://...)
])
