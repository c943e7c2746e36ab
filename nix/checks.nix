# `nix flake check`: the crate tests, lints, the chart, the images against their
# spec, and the topology of every shipped manifest.
{
  pkgs,
  cdsim,
  cdsimWith,
  cdsimLib,
  images,
  src,
}:
{
  # The crate and unit tests run inside the package build.
  cargo-tests = cdsim;

  clippy = cdsimWith {
    pname = "cdsim-clippy";
    nativeBuildInputs = [ pkgs.clippy ];
    buildPhase = "cargo clippy --workspace --all-targets --offline -- -D warnings";
    doCheck = false;
    installPhase = "touch $out";
  };

  # Not `--all`: that makes cargo resolve the dependencies, and the sandbox
  # has no registry. Without it cargo-fmt formats every workspace member from
  # `cargo metadata --no-deps`.
  rustfmt = pkgs.runCommand "cdsim-rustfmt" {
    nativeBuildInputs = [
      pkgs.cargo
      pkgs.rustfmt
    ];
  } "cd ${src} && cargo fmt -- --check && touch $out";

  # helm lint plus the Rust tests over `helm template` output.
  chart = cdsimWith {
    pname = "cdsim-chart";
    nativeCheckInputs = [ pkgs.kubernetes-helm ];
    preCheck = "helm lint --strict manifests/helm/nvml-mock";
    cargoTestFlags = [
      "--package"
      "integration-tests"
      "--test"
      "chart"
    ];
  };

  # Every shipped topology and profile parses and validates.
  manifests = cdsimWith {
    pname = "cdsim-manifests";
    cargoTestFlags = [
      "--package"
      "integration-tests"
      "--test"
      "manifests"
    ];
  };

  # Each Nix-built image holds exactly the files its spec names.
  image-contents =
    pkgs.runCommand "cdsim-image-contents"
      {
        nativeBuildInputs = [
          pkgs.gnutar
          pkgs.jq
        ];
        expected = builtins.toJSON images.expectedPaths;
      }
      ''
        for image in mock-image workload-image; do
          case $image in
            mock-image) stream=${images.mock-image} ;;
            workload-image) stream=${images.workload-image} ;;
          esac
          $stream > image.tar
          mkdir -p $image && tar -xf image.tar -C $image
          for layer in $(jq -r '.[0].Layers[]' $image/manifest.json); do
            tar -tf $image/$layer
          done | sed 's#^\./##; s#/$##' | sort -u > $image.actual
          echo "$expected" | jq -r --arg image $image '.[$image][]' | sed 's#^/##' | sort -u > $image.expected
          comm -23 $image.expected $image.actual > $image.missing
          if [ -s $image.missing ]; then
            echo "$image lacks files its spec names:" >&2
            cat $image.missing >&2
            exit 1
          fi
        done
        touch $out
      '';
}
