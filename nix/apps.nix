# `nix run .#<command>`: xtask with the pinned tools on PATH and, for the
# commands that install, the Nix-built image archives.
{
  pkgs,
  cdsim,
  images,
  src,
}:
let
  tools = [
    pkgs.kind
    pkgs.kubernetes-helm
    pkgs.kubectl
    pkgs.jq
    pkgs.docker-client
  ];

  # The images are streamed (no tarball in the store); the wrapper writes each
  # once per build into the user's cache and hands the path to xtask.
  imageFlags = ''
    cache="''${XDG_CACHE_HOME:-$HOME/.cache}/cdsim"
    mkdir -p "$cache"
    [ -s "$cache/${baseNameOf images.mock-image}.tar" ] || ${images.mock-image} > "$cache/${baseNameOf images.mock-image}.tar"
    [ -s "$cache/${baseNameOf images.workload-image}.tar" ] || ${images.workload-image} > "$cache/${baseNameOf images.workload-image}.tar"
    set -- --mock-image "$cache/${baseNameOf images.mock-image}.tar" --workload-image "$cache/${baseNameOf images.workload-image}.tar" "$@"
  '';

  app =
    command: withImages:
    let
      wrapper = pkgs.writeShellApplication {
        name = "cdsim-${command}";
        runtimeInputs = tools;
        text = ''
          export CDSIM_ROOT=${src}
          ${if withImages then imageFlags else ""}
          exec ${cdsim}/bin/xtask ${command} "$@"
        '';
      };
    in
    {
      type = "app";
      program = "${wrapper}/bin/cdsim-${command}";
    };
in
rec {
  demo = app "demo" true;
  up = app "up" true;
  down = app "down" false;
  scenario1 = app "scenario1" false;
  scenario2 = app "scenario2" false;
  scenario3 = app "scenario3" false;
  doctor = app "doctor" false;
  default = demo;
}
