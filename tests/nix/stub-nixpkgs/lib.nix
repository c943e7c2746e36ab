# The few nixpkgs.lib functions the flake and the stub call, with nixpkgs'
# semantics (lib/attrsets.nix, lib/strings.nix, lib/trivial.nix,
# lib/fileset/default.nix).
rec {
  genAttrs =
    names: f:
    builtins.listToAttrs (
      map (name: {
        inherit name;
        value = f name;
      }) names
    );

  getName = pkg: pkg.pname or (builtins.parseDrvName pkg.name).name;

  importTOML = path: builtins.fromTOML (builtins.readFile path);

  makeBinPath = packages: builtins.concatStringsSep ":" (map (pkg: "${pkg}/bin") packages);

  licenses = {
    asl20 = {
      shortName = "asl20";
      free = true;
    };
    unfree = {
      shortName = "unfree";
      free = false;
    };
  };

  # lib.fileset, for filesets built from paths with `unions`: every path must
  # exist (nixpkgs throws otherwise), and toSource copies exactly the files
  # under them, below `root`, into the store.
  fileset = {
    unions =
      paths:
      map (
        path:
        if builtins.pathExists path then
          toString path
        else
          throw "lib.fileset.unions: Element ${toString path} is a path that does not exist."
      ) paths;

    toSource =
      { root, fileset }:
      let
        under = path: prefix: path == prefix || builtins.substring 0 (builtins.stringLength prefix + 1) path == "${prefix}/";
      in
      builtins.path {
        name = "source";
        path = root;
        filter =
          path: type:
          builtins.any (
            wanted: under path wanted || (type == "directory" && under wanted path)
          ) fileset;
      };
  };
}
