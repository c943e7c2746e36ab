# The package set of the stub: only what the flake uses, each builder with the
# argument handling of the nixpkgs file named beside it. Argument sets are open
# where the real ones are (`...`, passed through to the derivation) and closed
# where the real ones are; the only rejections are the ones nixpkgs makes.
# Derivations are real (`nix eval` can instantiate them, tests/nix_flake.rs
# builds some) but their builders only write placeholders, never build.
{
  system,
  config ? { },
  overlays ? [ ],
}:
let
  lib = import ./lib.nix;

  rustTriple = if system == "aarch64-linux" then "aarch64-unknown-linux-gnu" else "x86_64-unknown-linux-gnu";

  # What a workspace build produces, read from its manifests (stub only: the
  # real build runs cargo).
  workspace =
    let
      members =
        src:
        map (member: {
          dir = src + "/${member}";
          manifest = builtins.fromTOML (builtins.readFile (src + "/${member}/Cargo.toml"));
        }) (builtins.fromTOML (builtins.readFile (src + "/Cargo.toml"))).workspace.members;
    in
    {
      bins =
        src:
        builtins.concatMap (
          it:
          if it.manifest ? bin then
            map (bin: bin.name) it.manifest.bin
          else if builtins.pathExists (it.dir + "/src/main.rs") then
            [ it.manifest.package.name ]
          else
            [ ]
        ) (members src);
      cdylibs =
        src:
        builtins.concatMap (
          it:
          if builtins.elem "cdylib" (it.manifest.lib.crate-type or [ ]) then
            [ (it.manifest.lib.name or it.manifest.package.name) ]
          else
            [ ]
        ) (members src);
    };

  # Attributes nixpkgs keeps out of the derivation's environment.
  notEnv = [
    "meta"
    "passthru"
  ];

  drv =
    name: attrs: script:
    derivation (
      builtins.removeAttrs attrs notEnv
      // {
        inherit name system;
        # The placeholder scripts use the build host's coreutils.
        PATH = "/usr/bin:/bin";
        builder = "/bin/sh";
        args = [
          "-c"
          script
        ];
      }
    )
    // {
      meta = attrs.meta or { };
    }
    // (attrs.passthru or { });

  stubScript = "echo stub > $out";

  # A package's output as a tree of empty placeholder files: its install
  # phases run with `install` writing an empty file at the destination, so
  # the tree has the paths the package really installs (sources are never
  # built, so they are not read). The image stub below runs against it.
  placeholderScript = ''
    set -e
    runHook() { :; }
    install() {
      dest=""; make=""
      for arg in "$@"; do
        case $arg in
          -D*) make=1 ;;
          -m*|-[0-9]*) ;;
          *) dest=$arg ;;
        esac
      done
      [ -z "$make" ] || mkdir -p "$(dirname "$dest")"
      : > "$dest"
    }
    mkdir -p "$out"
    for file in ''${placeholderOutputFiles:-}; do
      mkdir -p "$(dirname "$out/$file")" && : > "$out/$file"
    done
    for file in ''${placeholderBuildFiles:-}; do
      mkdir -p "$(dirname "$file")" && : > "$file"
    done
    eval "''${installPhase:-}"
    eval "''${postInstall:-}"
  '';

  tool = name: drv name { } stubScript // { pname = name; };

  # pkgs/stdenv/generic/check-meta.nix: an unfree package is refused unless
  # config.allowUnfree or config.allowUnfreePredicate allows it, with this
  # message (its first line; nixpkgs goes on with the ways to allow it).
  checkLicense =
    pkg:
    let
      license = pkg.meta.license or { free = true; };
      pos = builtins.unsafeGetAttrPos "description" pkg.meta;
      where = if pos == null then "«unknown-file»" else "${pos.file}:${toString pos.line}";
    in
    if
      (license.free or true)
      || (config.allowUnfree or false)
      || (config.allowUnfreePredicate or (_: false)) pkg
    then
      pkg
    else
      throw "Refusing to evaluate package '${pkg.name}' in ${where} because it has an unfree license (‘${license.shortName}’)";

  # pkgs/stdenv/generic/make-derivation.nix: any argument is accepted and,
  # apart from meta and passthru, becomes part of the derivation.
  mkDerivation =
    args@{
      pname,
      version,
      ...
    }:
    let
      # A fetched source is instantiated (its pinned hash is checked) but never
      # fetched: the placeholder build does not read it.
      unfetched =
        if args ? src && builtins.isAttrs args.src && args.src ? drvPath then
          { src = builtins.unsafeDiscardOutputDependency args.src.drvPath; }
        else
          { };
    in
    checkLicense (
      drv "${pname}-${version}" (args // unfetched) placeholderScript
      // {
        inherit pname version;
      }
    );

  # pkgs/build-support/rust/build-rust-package/default.nix: open (`...`,
  # passed on to mkDerivation); the vendored dependencies must come from one
  # of four arguments, else this throw. The check phase is cargo-check-hook.sh:
  # `cargo test` with cargoTestFlags, then `--` checkFlags; the derivation's
  # cargoBuildType and cargoCheckType are the arguments buildType (default
  # release) and checkType (default the build type).
  buildRustPackage =
    args@{
      pname,
      version,
      src,
      cargoLock ? null,
      cargoHash ? null,
      cargoDeps ? null,
      cargoVendorDir ? null,
      buildType ? "release",
      checkType ? buildType,
      doCheck ? true,
      ...
    }:
    if cargoLock == null && cargoHash == null && cargoDeps == null && cargoVendorDir == null then
      throw "cargoHash, cargoVendorDir, cargoDeps, or cargoLock must be set"
    else
      assert cargoLock == null || builtins.pathExists cargoLock.lockFile;
      mkDerivation (
        builtins.removeAttrs args [ "cargoLock" ]
        // {
          # cargo-install-hook.sh: every binary target into $out/bin; the
          # build leaves the cdylibs in target/<triple>/<type>.
          placeholderOutputFiles = map (bin: "bin/${bin}") (workspace.bins src);
          placeholderBuildFiles = map (
            name: "target/${rustTriple}/${buildType}/lib${name}.so"
          ) (workspace.cdylibs src);
          cargoBuildType = buildType;
          cargoCheckType = checkType;
          doCheck = if doCheck then "1" else "";
        }
      );

  # pkgs/build-support/trivial-builders/default.nix: a closed argument set;
  # the script text gets the shebang, the bash options and, with
  # runtimeInputs, `export PATH="<their bin dirs>:$PATH"` before the text.
  writeShellApplication =
    {
      name,
      text,
      runtimeInputs ? [ ],
      runtimeEnv ? null,
      meta ? { },
      passthru ? { },
      checkPhase ? null,
      excludeShellChecks ? [ ],
      extraShellCheckFlags ? [ ],
      bashOptions ? [
        "errexit"
        "nounset"
        "pipefail"
      ],
      derivationArgs ? { },
      inheritPath ? true,
    }:
    let
      script =
        ''
          #!/bin/bash
          ${builtins.concatStringsSep "\n" (map (option: "set -o ${option}") bashOptions)}
        ''
        + (
          if runtimeInputs != [ ] then
            ''

              export PATH="${lib.makeBinPath runtimeInputs}${if inheritPath then ":$PATH" else ""}"
            ''
          else
            ""
        )
        + ''

          ${text}
        '';
    in
    drv name {
      inherit meta passthru;
      text = script;
    } "echo stub > $out";

  # trivial-builders: runCommand name env buildCommand; env is open.
  runCommand =
    name: env: buildCommand:
    drv name (env // { inherit buildCommand; }) stubScript;

  # pkgs/build-support/mkshell/default.nix: open, passed to mkDerivation.
  mkShell =
    args@{
      name ? "nix-shell",
      packages ? [ ],
      ...
    }:
    drv name (builtins.removeAttrs args [ "name" ]) stubScript;

  # pkgs/build-support/docker/default.nix: streamLayeredImage takes a closed
  # argument set (the ones below are the real ones the flake may use). The
  # stub runs extraCommands in an empty image root, as dockerTools does, with
  # every store path it names present as a placeholder tree (see tree below),
  # so a payload path that the package does not install fails the build.
  streamLayeredImage =
    {
      name,
      tag ? null,
      fromImage ? null,
      contents ? [ ],
      config ? { },
      architecture ? "amd64",
      created ? "1970-01-01T00:00:01Z",
      uid ? 0,
      gid ? 0,
      uname ? "root",
      gname ? "root",
      maxLayers ? 100,
      extraCommands ? "",
      fakeRootCommands ? "",
      enableFakechroot ? false,
      includeStorePaths ? true,
      passthru ? { },
      meta ? { },
    }:
    drv "stream-${name}" {
      inherit meta passthru extraCommands;
      imageTag = if tag == null then "" else tag;
      imageConfig = builtins.toJSON config;
    } ''
      set -e
      mkdir -p "$TMPDIR/root" && cd "$TMPDIR/root"
      eval "$extraCommands"
      echo stub > "$out"
    '';

  # A package whose output is a tree of empty placeholder files at the given
  # relative paths, for the image stubs above.
  tree =
    name: files:
    drv name { inherit files; } ''
      set -e
      for file in $files; do
        mkdir -p "$out/$(dirname "$file")"
        : > "$out/$file"
      done
      mkdir -p "$out"
    ''
    // {
      pname = name;
    };
in
{
  inherit lib;

  stdenv = {
    inherit mkDerivation;
    cc.cc.lib = tool "gcc-lib";
    hostPlatform.isAarch64 = system == "aarch64-linux";
  };

  rustPlatform = {
    inherit buildRustPackage;
  };

  fetchurl =
    {
      url,
      sha256 ? "",
      hash ? "",
      name ? baseNameOf url,
      ...
    }:
    derivation {
      inherit name system url;
      builder = "/bin/sh";
      args = [
        "-c"
        "exit 1"
      ];
      outputHashMode = "flat";
      outputHashAlgo = "sha256";
      outputHash = if hash != "" then hash else sha256;
    };

  inherit
    writeShellApplication
    runCommand
    mkShell
    ;

  dockerTools = {
    inherit streamLayeredImage;
  };

  autoPatchelfHook = tool "auto-patchelf-hook";
  cargo = tool "cargo";
  clippy = tool "clippy";
  docker-client = tool "docker-client";
  gnutar = tool "gnutar";
  go = tool "go";
  jq = tool "jq";
  kind = tool "kind";
  kubectl = tool "kubectl";
  kubernetes-helm = tool "kubernetes-helm";
  nixfmt = tool "nixfmt";
  nixfmt-tree = tool "nixfmt-tree";
  rustc = tool "rustc";
  rustfmt = tool "rustfmt";
  util-linux = tool "util-linux";
  pkgsStatic.busybox = tree "busybox" [ "bin/busybox" ];
}
