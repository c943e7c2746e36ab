# Everything the flake offers for one system, assembled from the pieces in nix/.
{
  nixpkgs,
  system,
}:
let
  cdsimLib = import ./lib.nix;
  pins = cdsimLib.pins;

  # Unfree software is allowed for exactly one package: NVIDIA's nvidia-imex.
  pkgs = import nixpkgs {
    inherit system;
    config.allowUnfreePredicate = pkg: nixpkgs.lib.getName pkg == "nvidia-imex";
  };

  # Only the build inputs: a README or flake edit rebuilds nothing and
  # retags no image.
  src = pkgs.lib.fileset.toSource {
    root = ../.;
    fileset = pkgs.lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../.cargo
      ../crates
      ../xtask
      ../tests
      ../manifests
    ];
  };

  packages = import ./packages.nix {
    inherit pkgs pins src;
  };
  images = import ./images.nix {
    inherit pkgs cdsimLib;
    inherit (packages) cdsim nvidia-imex;
    inherit src;
  };
in
{
  packages = {
    inherit (packages) cdsim nvidia-imex;
    inherit (images) mock-image workload-image;
    default = packages.cdsim;
  };
  apps = import ./apps.nix {
    inherit pkgs images;
    inherit (packages) cdsim;
    inherit src;
  };
  checks = import ./checks.nix {
    inherit pkgs cdsimLib images;
    inherit (packages) cdsim cdsimWith;
    inherit src;
  };
  devShell = pkgs.mkShell {
    packages = [
      pkgs.cargo
      pkgs.rustc
      pkgs.clippy
      pkgs.rustfmt
      pkgs.kind
      pkgs.kubernetes-helm
      pkgs.kubectl
      pkgs.jq
      pkgs.go
      pkgs.docker-client
    ];
  };
  # nixfmt-tree formats the whole tree under a bare `nix fmt`; plain nixfmt
  # would wait on stdin there (Nix >= 2.25 passes no file arguments).
  formatter = pkgs.nixfmt-tree;
}
