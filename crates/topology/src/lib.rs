//! The cluster topology document: NVLink domains, cliques and their member nodes; parsing, validation, resolution and generators.
