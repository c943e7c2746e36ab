# The two images with dockerTools, derived from manifests/images.toml through
# the same plan tests/nix_flake.rs compares with the Rust builder.
{
  pkgs,
  cdsimLib,
  cdsim,
  nvidia-imex,
  src,
}:
let
  plan = cdsimLib.imagePlan { imex = true; };
  spec = cdsimLib.imageSpec.images;

  attrFromPath =
    path: builtins.foldl' (set: key: set.${key}) pkgs (builtins.filter builtins.isString (builtins.split "\\." path));

  # Where a planned file's bytes come from in the Nix store.
  storeSource =
    source:
    let
      kind = builtins.head (builtins.split ":" source);
      rest = builtins.substring (builtins.stringLength kind + 1) (-1) source;
      name = baseNameOf rest;
    in
    if kind == "artifact" then
      "${cdsim}/${if builtins.match ".*\\.so" name != null then "lib" else "bin"}/${name}"
    else if kind == "repo" then
      "${src}/${rest}"
    else if kind == "imex" then
      "${nvidia-imex}/${rest}"
    else
      let
        attr = builtins.head (builtins.split "/" rest);
      in
      "${attrFromPath attr}/${builtins.substring (builtins.stringLength attr + 1) (-1) rest}";

  install =
    entry:
    if entry.kind == "dir" then
      "mkdir -p .${entry.path} && chmod ${entry.mode} .${entry.path}"
    else if entry.kind == "link" then
      "mkdir -p .${dirOf entry.path} && ln -s ${entry.target} .${entry.path}"
    else
      "install -D -m ${entry.mode} ${storeSource entry.source} .${entry.path}";

  image =
    name:
    pkgs.dockerTools.streamLayeredImage {
      inherit name;
      # null: dockerTools tags with the output hash, so the tag follows content.
      tag = null;
      extraCommands = builtins.concatStringsSep "\n" (map install plan.${name});
      config = {
        Cmd = spec.${name}.cmd or [ ];
        Entrypoint = spec.${name}.entrypoint or [ ];
        Env = spec.${name}.env or [ ];
        WorkingDir = spec.${name}.workdir or "/";
        Labels =
          (spec.${name}.labels or { })
          // (if spec.${name} ? imex_label then { ${spec.${name}.imex_label} = "present"; } else { });
      };
    };
in
{
  mock-image = image "nvml-mock";
  workload-image = image "nvml-mock-workload";

  # For the image-contents check: every path the spec puts in each image.
  expectedPaths = {
    mock-image = map (entry: entry.path) plan.nvml-mock;
    workload-image = map (entry: entry.path) plan.nvml-mock-workload;
  };
}
