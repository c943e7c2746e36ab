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
  # once per build into the cache directory xtask uses too ($CDSIM_CACHE_DIR,
  # else /var/cache/cdsim for root, else $XDG_CACHE_HOME/cdsim) and hands the
  # path to xtask. Each archive is streamed into a temporary file and renamed
  # only when complete, so an interrupted stream is never reused.
  archive = image: ''
    archive="$images/${baseNameOf image}.tar"
    if [ ! -s "$archive" ]; then
      ${image} > "$archive.partial.$$"
      mv -f "$archive.partial.$$" "$archive"
    fi
  '';
  imageFlags = ''
    if [ -n "''${CDSIM_CACHE_DIR:-}" ]; then
      cache=$CDSIM_CACHE_DIR
    elif [ "$EUID" -eq 0 ]; then
      cache=/var/cache/cdsim
    else
      cache="''${XDG_CACHE_HOME:-$HOME/.cache}/cdsim"
    fi
    images="$cache/images"
    mkdir -p "$images"
    trap 'rm -f "$images"/*.partial.$$' EXIT
    ${archive images.mock-image}
    ${archive images.workload-image}
    trap - EXIT
    set -- --mock-image "$images/${baseNameOf images.mock-image}.tar" --workload-image "$images/${baseNameOf images.workload-image}.tar" "$@"
  '';

  app =
    command: description: withImages:
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
      meta = { inherit description; };
    };
in
rec {
  demo = app "demo" "The whole demo: cluster, chart, Nix-built images, the five scenarios (4 and 5 with NVIDIA's released charts and images)" true;
  up = app "up" "Create or reuse the kind cluster and install the chart with the Nix-built images" true;
  down = app "down" "Delete the demo's kind cluster" false;
  scenario1 = app "scenario1" "Scenario 1 on the running setup: per-node fabric identity" false;
  scenario2 = app "scenario2" "Scenario 2 on the running setup: a real IMEX domain in no-GPU mode (needs --imex)" false;
  scenario3 = app "scenario3" "Scenario 3 on the running setup: live topology rebinding" false;
  scenario4 = app "scenario4" "Scenario 4 on the running setup: NVIDIA's ComputeDomain flow with its released DRA driver" false;
  scenario5 = app "scenario5" "Scenario 5 on the running setup: NVIDIA's released device plugin, GFD and NFD, and the DRA driver's GPUs" false;
  doctor = app "doctor" "Check this machine for what the demo needs" false;
  status = app "status" "What is deployed and whether it is healthy" false;
  default = demo;
}
