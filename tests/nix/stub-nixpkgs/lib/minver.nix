# nixpkgs' lib/minver.nix holds the oldest Nix its lib supports (2.18 for 26.05). The stub's
# lib needs nothing newer than the Nix this project's tests run (Debian's 2.8), so it says 2.3.
"2.3"
