# The workspace (binaries, the mock library, xtask) and the nvidia-imex payload.
{
  pkgs,
  pins,
  src,
}:
let
  inherit (pkgs) lib;
  version = (lib.importTOML (src + "/Cargo.toml")).workspace.package.version;

  # One description of the Rust build; checks reuse it with other phases.
  cdsimWith =
    overrides:
    pkgs.rustPlatform.buildRustPackage (
      {
        pname = "cdsim";
        inherit version src;
        cargoLock.lockFile = src + "/Cargo.lock";
        cargoBuildFlags = [ "--workspace" ];
        # Crate and unit tests run in the build, in the Nix sandbox: no
        # network, not root, HOME=/homeless-shelter, PATH only what the
        # derivation declares, no /etc/ld.so.cache. The real-peer tests under
        # tests/ need Docker, Go modules and PyPI; `cargo xtask ci` runs them.
        # tests/nix_sandbox.rs runs exactly this selection in a real sandbox.
        cargoTestFlags = [
          "--workspace"
          "--exclude"
          "integration-tests"
        ];
        # The tests build in the dev profile: the release profile's fat LTO
        # would link every crate's test binary (xtask's and harness's with
        # kube and tokio in them) through LTO, which dominated the check's
        # time; the installed binaries stay release.
        checkType = "debug";
        # lock.rs holds its lock from another process with util-linux flock(1).
        nativeCheckInputs = [ pkgs.util-linux ];
        # Tests that need what the sandbox does not have, by exact name. Each
        # runs in `cargo xtask ci` (its `cargo test --workspace` step) instead.
        checkFlags = [ "--exact" ] ++ map (name: "--skip=${name}") [
          # helm (xtask's pinned one); the chart check runs it with helm.
          "plan::tests::values_render_through_the_real_chart"
          # valgrind memcheck over the mock library, minutes under valgrind.
          "sixteen_threads_under_valgrind_memcheck"
          # root (CAP_MKNOD): the stager creates device nodes.
          "stages_the_whole_tree"
          "device_nodes_are_0666_whatever_the_umask"
          "restaging_is_idempotent_and_prunes_what_is_no_longer_planned"
          "a_used_major_is_refused_naming_its_owner"
          "an_invalid_topology_keeps_the_previous_one"
          "missing_inputs_fail_with_the_flag_to_fix"
          "follows_the_topology_live_and_cleans_up_on_sigterm"
          # the host's /etc/ld.so.cache and ldconfig; the sandbox's /etc is bare.
          "ldcache::tests::agrees_with_ldconfig"
          # ldd on a host binary; not on the sandbox's PATH.
          "closure::tests::matches_ldd_for_a_host_binary"
          # writes the generated kind config under the cache directory's
          # scratch/ (`<cache>/scratch/<cluster>`), which the sandbox's HOME
          # cannot hold.
          "cluster::tests::a_pair_of_node_images_goes_into_the_config_and_each_node_is_checked_by_its_role"
          # README.md, which the source filter leaves out (a README edit
          # rebuilds nothing).
          "ci::nonroot::tests::readme_quick_start_is_what_ci_runs"
          # the workspace's debug build of imex-double and imex-shim, which
          # the check phase does not build.
          "scenarios::double_tests::scenario2_passes_twice_against_the_double_and_is_named_so"
          "scenarios::double_tests::scenario2_fails_with_the_output_of_the_double_ctl_failing_after_b_stops"
          "scenarios::double_tests::scenario2_fails_with_the_output_of_the_double_ctl_hanging_after_b_stops"
          # root (CAP_MKNOD), as the stager tests above.
          "an_imex_payload_is_staged_into_the_driver_root_and_removed_without_it"
          # runs the host's /bin/echo as the carried daemon; the sandbox has no /bin/echo.
          "a_shim_carrying_its_daemon_execs_it_from_its_own_end"
          # resolves `localhost` through the host's /etc/hosts and binds loopback addresses.
          "empty_name_slots_wait_and_do_not_keep_the_domain_from_up"
          # README.md and docs/, which the source filter leaves out.
          "docs_check::tests::every_documented_xtask_command_is_one_xtask_accepts"
          "docs_check::tests::every_relative_link_in_the_docs_points_at_a_file"
        ];
        # The mock library under cargo's name (the image spec's artifact) and
        # under its SONAME.
        postInstall = ''
          install -Dm755 "$(find target -path '*release/libnvidia_ml.so' | head -n 1)" \
            $out/lib/libnvidia_ml.so
          ln -s libnvidia_ml.so $out/lib/libnvidia-ml.so.1
        '';
        meta = {
          description = "ComputeDomain simulation: mock NVML, NRI plugin, stager, xtask";
          license = lib.licenses.asl20;
          mainProgram = "xtask";
        };
      }
      // overrides
    );

  imexArch =
    if pkgs.stdenv.hostPlatform.isAarch64 then
      {
        path = pins.imex.aarch64_path;
        sha256 = pins.imex.aarch64_sha256;
      }
    else
      {
        path = pins.imex.x86_64_path;
        sha256 = pins.imex.x86_64_sha256;
      };
in
{
  inherit cdsimWith;
  cdsim = cdsimWith { };

  # NVIDIA's proprietary IMEX daemon. Images that contain it are for local use
  # only: never push them to a registry.
  nvidia-imex = pkgs.stdenv.mkDerivation {
    pname = "nvidia-imex";
    inherit (pins.imex) version;
    src = pkgs.fetchurl {
      url = pins.imex.base_url + imexArch.path;
      inherit (imexArch) sha256;
    };
    nativeBuildInputs = [ pkgs.autoPatchelfHook ];
    buildInputs = [ pkgs.stdenv.cc.cc.lib ];
    installPhase = ''
      runHook preInstall
      # The payload's own layout, which the image spec names; bin/ for users.
      install -Dm755 usr/bin/nvidia-imex $out/usr/bin/nvidia-imex
      install -Dm755 usr/bin/nvidia-imex-ctl $out/usr/bin/nvidia-imex-ctl
      install -Dm644 etc/nvidia-imex/config.cfg $out/etc/nvidia-imex/config.cfg
      ln -s usr/bin $out/bin
      runHook postInstall
    '';
    meta = {
      description = "NVIDIA IMEX daemon (proprietary; images containing it are for local use only)";
      license = lib.licenses.unfree;
      platforms = [
        "x86_64-linux"
        "aarch64-linux"
      ];
    };
  };
}
