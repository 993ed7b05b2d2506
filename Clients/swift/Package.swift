// swift-tools-version:6.0
import PackageDescription

// GatehouseKit: the Swift client of Gatehouse. Foundation (URLSession) only, no dependency on the
// server's targets, so it builds for iOS, macOS and Linux.
let package = Package(
    name: "GatehouseKit",
    platforms: [.iOS(.v15), .macOS(.v12), .tvOS(.v15), .watchOS(.v8), .visionOS(.v1)],
    products: [
        .library(name: "GatehouseKit", targets: ["GatehouseKit"]),
    ],
    targets: [
        .target(name: "GatehouseKit", swiftSettings: [.enableUpcomingFeature("ExistentialAny")]),
        // The README's snippets, exactly as printed there, so that they keep compiling
        // (GatehouseKitUnitTests checks the two stay equal).
        .target(name: "GatehouseKitReadme", dependencies: ["GatehouseKit"]),
        .testTarget(name: "GatehouseKitUnitTests", dependencies: ["GatehouseKit"]),
    ],
    swiftLanguageModes: [.v6]
)
