# The package set of the stub: only what the flake uses. Every builder takes an
# exact argument set (no `...`), so a misspelt argument is an evaluation error,
# and a misspelt attribute is missing. Derivations are real (`nix eval` can
# instantiate them) but their builders only write a marker file.
{ system, config }:
let
  lib = import ./lib.nix;

  drv =
    name: attrs:
    derivation (
      {
        inherit name system;
        builder = "/bin/sh";
        args = [
          "-c"
          "echo stub > $out"
        ];
      }
      // attrs
    );

  tool = name: drv name { } // { pname = name; };

  # nixpkgs refuses unfree packages unless config allows them.
  checkLicense =
    pkg:
    if (pkg.meta.license.free or true) || (config.allowUnfreePredicate or (_: false)) pkg then
      pkg
    else
      throw "stub nixpkgs: refusing unfree package ${pkg.pname}";

  mkDerivation =
    {
      pname,
      version,
      src,
      nativeBuildInputs ? [ ],
      buildInputs ? [ ],
      installPhase ? "",
      meta ? { },
    }:
    checkLicense (
      drv "${pname}-${version}" {
        inherit src nativeBuildInputs buildInputs installPhase;
      }
      // {
        inherit pname version meta;
      }
    );

  buildRustPackage =
    {
      pname,
      version,
      src,
      cargoLock,
      cargoBuildFlags ? [ ],
      cargoTestFlags ? [ ],
      nativeBuildInputs ? [ ],
      nativeCheckInputs ? [ ],
      buildPhase ? null,
      installPhase ? null,
      postInstall ? "",
      preCheck ? "",
      doCheck ? true,
      meta ? { },
    }:
    assert builtins.attrNames cargoLock == [ "lockFile" ];
    assert builtins.pathExists cargoLock.lockFile;
    drv "${pname}-${version}" {
      inherit
        src
        cargoBuildFlags
        cargoTestFlags
        nativeBuildInputs
        nativeCheckInputs
        postInstall
        preCheck
        ;
      buildPhase = if buildPhase == null then "" else buildPhase;
      installPhase = if installPhase == null then "" else installPhase;
      doCheck = if doCheck then "1" else "";
    }
    // {
      inherit pname version meta;
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
    { url, sha256 }:
    derivation {
      name = baseNameOf url;
      inherit system url;
      builder = "/bin/sh";
      args = [
        "-c"
        "exit 1"
      ];
      outputHashMode = "flat";
      outputHashAlgo = "sha256";
      outputHash = sha256;
    };

  writeShellApplication =
    {
      name,
      runtimeInputs ? [ ],
      text,
    }:
    drv name { inherit runtimeInputs text; };

  runCommand =
    name: env: script:
    drv name (env // { inherit script; });

  mkShell = { packages }: drv "nix-shell" { inherit packages; };

  dockerTools = {
    streamLayeredImage =
      {
        name,
        tag,
        contents ? [ ],
        extraCommands ? "",
        config ? { },
      }:
      drv "stream-${name}" {
        inherit contents extraCommands;
        imageTag = tag;
        imageConfig = builtins.toJSON config;
      };
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
  rustc = tool "rustc";
  rustfmt = tool "rustfmt";
  pkgsStatic.busybox = tool "busybox";
}
