# A stand-in for nixpkgs, for evaluating this project's flake on machines that
# cannot fetch nixpkgs (see tests/nix_flake.rs). It is a double, not a peer:
# it proves the flake's wiring (attribute names, argument names, what depends on
# what), never that the real builders succeed.
{
  outputs =
    { self }:
    {
      lib = import ./lib.nix;
    };
}
