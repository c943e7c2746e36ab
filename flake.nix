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
      # nixpkgs' lib needs a recent Nix (its own lib/minver.nix; 2.18 for 26.05) and fails
      # deep inside on an older one (`attribute 'readFileType' missing`): say so in one line
      # before anything of nixpkgs' lib is evaluated.
      minimumNix = import "${nixpkgs}/lib/minver.nix";
      nixTooOld = builtins.compareVersions builtins.nixVersion minimumNix < 0;
      perSystem =
        f:
        if nixTooOld then
          throw "cdsim's flake needs Nix >= ${minimumNix} (nixpkgs' lib/minver.nix); this is Nix ${builtins.nixVersion}: upgrade Nix, or use `cargo xtask` without Nix (README.md)"
        else
          nixpkgs.lib.genAttrs systems (system: f (import ./nix { inherit nixpkgs system; }));
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
