# The pure parts of the flake: no nixpkgs, only builtins, so they evaluate
# anywhere (tests/nix_flake.rs evaluates them for real and compares them with
# what the Rust image builder derives from the same files).
let
  root = ../.;

  hasSuffix =
    suffix: text:
    let
      textLength = builtins.stringLength text;
      suffixLength = builtins.stringLength suffix;
    in
    textLength >= suffixLength && builtins.substring (textLength - suffixLength) suffixLength text == suffix;

  # The regular files directly in a repository directory, by name.
  repoFiles =
    dir: suffix:
    let
      entries = builtins.readDir (root + "/${dir}");
    in
    builtins.filter (name: entries.${name} == "regular" && hasSuffix suffix name) (
      builtins.attrNames entries
    );

  sourceOf =
    file:
    if file ? artifact then
      "artifact:${file.package}/${file.artifact}"
    else if file ? repo then
      "repo:${file.repo}"
    else if file ? host then
      "host:${file.nix}/${file.nix_path}"
    else
      "imex:${file.imex}";

  besides = path: name: if dirOf path == "/" then "/${name}" else "${dirOf path}/${name}";

  # One spec entry as the records it puts into the image.
  planFile =
    imex: file:
    if file.dir or false then
      [
        {
          inherit (file) path mode;
          kind = "dir";
        }
      ]
    else if file ? repo_dir then
      map (name: {
        path = "${file.path}/${name}";
        inherit (file) mode;
        kind = "file";
        source = "repo:${file.repo_dir}/${name}";
      }) (repoFiles file.repo_dir (file.suffix or ""))
    else if file ? imex && !imex then
      [ ]
    else
      [
        {
          inherit (file) path mode;
          kind = "file";
          source = sourceOf file;
        }
      ]
      ++ map (name: {
        path = besides file.path name;
        kind = "link";
        target = baseNameOf file.path;
      }) (file.links or [ ]);
in
rec {
  # Every external version, from the one file xtask reads too.
  pins = builtins.fromTOML (builtins.readFile (root + "/manifests/versions.toml"));

  # The image spec, shared with crates/image-builder.
  imageSpec = builtins.fromTOML (builtins.readFile (root + "/manifests/images.toml"));

  # What each image holds according to the spec, before the shared-library
  # closure: one record per path, sorted by path. Without the nvidia-imex
  # payload (`imex = false`) its files are left out, as the Rust builder does.
  imagePlan =
    { imex }:
    builtins.mapAttrs (
      name: image:
      builtins.sort (a: b: a.path < b.path) (builtins.concatMap (planFile imex) image.files)
    ) imageSpec.images;
}
