# One of the flake's build or check commands, run in Nix's real build sandbox
# (tests/nix_sandbox.rs). nixpkgs cannot be fetched here, so this derivation
# replays what its stdenv and Rust hooks do around the command, with the
# build host's tools standing in for the nixpkgs packages:
#
# - PATH holds only the declared tools: stdenv's common path
#   (pkgs/stdenv/common-path.nix) and cc, plus the derivation's
#   nativeBuildInputs / nativeCheckInputs, each a symlink to the host's binary
#   (the host's /usr is visible read-only so those binaries run; nothing
#   else of the host is on PATH).
# - The host Rust toolchain is at /rust (extra-sandbox-paths), the vendored
#   crates at /cdsim-vendor (`cargo vendor` of Cargo.lock, as importCargoLock
#   builds it), a cargo target dir kept between runs at /cdsim-target.
# - buildRustPackage derivations get cargoSetupHook's vendoring config; the
#   source is copied to /build/source (fresh mtimes, so cargo rebuilds every
#   workspace crate and reuses only the dependencies from the kept target dir).
# - Everything else is the sandbox's own: uid 1000, HOME=/homeless-shelter,
#   no network, a bare /etc (no ld.so.cache), TMPDIR=/build.
{
  name,
  system,
  src,
  # "name=/host/path" pairs, one per PATH entry.
  tools,
  # "1" for buildRustPackage (cargoSetupHook), "" for runCommand.
  cargoSetup,
  command,
  # Differs per run, so the build always runs (its inputs outside the store,
  # the toolchain and the target dir, are not part of the hash).
  nonce,
}:
derivation {
  inherit
    name
    system
    src
    tools
    cargoSetup
    command
    nonce
    ;
  builder = "/bin/sh";
  # stdenv's setup exports this (1980-01-01) for reproducible timestamps.
  SOURCE_DATE_EPOCH = "315532800";
  args = [
    "-c"
    ''
      set -eu
      # The target dir is shared by the nixbld users across runs.
      umask 0002
      /usr/bin/mkdir -p /build/path
      for tool in $tools; do
        /usr/bin/ln -s "''${tool#*=}" "/build/path/''${tool%%=*}"
      done
      export PATH=/build/path
      if [ -n "$cargoSetup" ]; then
        cp -r "$src" /build/source
        chmod -R u+w /build/source
        cd /build/source
        mkdir -p .cargo
        printf '%s\n' \
          '[source.crates-io]' \
          'replace-with = "vendored-sources"' \
          '[source.vendored-sources]' \
          'directory = "/cdsim-vendor"' >> .cargo/config.toml
        export CARGO_TARGET_DIR=/cdsim-target
      fi
      echo "rehearsal: $command"
      eval "$command"
      echo passed > "$out"
      # Nix rejects a group-writable output (the umask above).
      chmod go-w "$out"
    ''
  ];
}
