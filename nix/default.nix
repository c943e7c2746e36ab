# Everything the flake offers for one system, assembled from the pieces in nix/.
{
  nixpkgs,
  system,
  self,
}:
let
  cdsimLib = import ./lib.nix;
  pins = cdsimLib.pins;

  # Unfree software is allowed for exactly one package: NVIDIA's nvidia-imex.
  pkgs = import nixpkgs {
    inherit system;
    config.allowUnfreePredicate = pkg: nixpkgs.lib.getName pkg == "nvidia-imex";
  };

  packages = import ./packages.nix {
    inherit pkgs pins;
    src = self;
  };
  images = import ./images.nix {
    inherit pkgs cdsimLib;
    inherit (packages) cdsim nvidia-imex;
    src = self;
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
    src = self;
  };
  checks = import ./checks.nix {
    inherit pkgs cdsimLib images;
    inherit (packages) cdsim cdsimWith;
    src = self;
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
  formatter = pkgs.nixfmt;
}
