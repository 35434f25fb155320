{
  # The pinned environment of tcpeval: everything the experiments, the analysis and the
  # manuscript need. `nix develop` gives a shell with all of it; `nix build .#cc` builds
  # the BPF objects of the six 3.16 ports; `nix build .#python-env` the Python environment.
  # nixpkgs is pinned by flake.lock: the last commit of nixos-24.11 (2025-06-30). The lock's
  # `original` must stay this input's URL, or nix re-resolves the branch; to move the pin:
  # `nix flake update`, then commit flake.lock (tests/test_nix_pin.py reads it offline).
  description = "tcpeval: TCP congestion control algorithms in 10G networks, reproduced";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f (import nixpkgs { inherit system; }));
    in {
      packages = forAll (pkgs: rec {
        python-env = import ./nix/python.nix { inherit pkgs; };
        tex = import ./nix/tex.nix { inherit pkgs; };
        cc = import ./nix/cc.nix { inherit pkgs; src = ./.; };
        default = python-env;
      });

      devShells = forAll (pkgs: {
        default = import ./nix/shell.nix {
          inherit pkgs;
          python-env = import ./nix/python.nix { inherit pkgs; };
          tex = import ./nix/tex.nix { inherit pkgs; };
        };
      });
    };
}
