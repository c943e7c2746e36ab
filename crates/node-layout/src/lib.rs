//! The on-node staged tree shared by the stager and the NRI plugin: paths, proc-devices rendering, channel selectors.
