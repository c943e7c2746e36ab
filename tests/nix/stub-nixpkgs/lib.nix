# The few nixpkgs.lib functions the flake calls, with nixpkgs' semantics.
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
}
