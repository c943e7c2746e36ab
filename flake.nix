{
  description = "cdsim: NVIDIA ComputeDomain (multi-node NVLink / IMEX) simulation on a kind cluster";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      perSystem = f: nixpkgs.lib.genAttrs systems (system: f (import ./nix { inherit nixpkgs system; }));
    in
    {
      packages = perSystem (it: it.packages);
      apps = perSystem (it: it.apps);
      checks = perSystem (it: it.checks);
      devShells = perSystem (it: { default = it.devShell; });
      formatter = perSystem (it: it.formatter);

      # The pure parts, evaluable without nixpkgs: pins and image contents.
      lib = import ./nix/lib.nix;
    };
}
