extension Gatehouse {
    /// This build's version: `gatehouse --version` and the `gatehouse_build_info` metric. Raised
    /// with each release (semantic versioning; see docs/operations.md, "Upgrades").
    public static let version = "0.1.0"
}
