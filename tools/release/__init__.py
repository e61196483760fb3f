"""The release's own file formats, written byte for byte the same from the same inputs
(tools/release.sh): deterministic tarballs, the OCI image, the SBOM, the provenance predicate.
Build-time code only: nothing here is frozen into the bundle."""
