# The pure parts of the flake: no nixpkgs, only builtins, so they evaluate
# anywhere (tests/nix_flake.rs evaluates them for real and compares them with
# what the Rust image builder derives from the same files).
let
  root = ../.;
in
{
  # Every external version, from the one file xtask reads too.
  pins = builtins.fromTOML (builtins.readFile (root + "/manifests/versions.toml"));

  # The image spec, shared with crates/image-builder.
  imageSpec = builtins.fromTOML (builtins.readFile (root + "/manifests/images.toml"));
}
