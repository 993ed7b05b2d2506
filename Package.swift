// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

func system(_ name: String, pkgConfig: String, apt: String) -> Target {
    .systemLibrary(name: name, path: "Sources/\(name)", pkgConfig: pkgConfig, providers: [.apt([apt])])
}

let package = Package(
    name: "gatehouse",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gatehouse", targets: ["gatehouse"]),
    ],
    // The Swift client, tested here against the real server (GatehouseKitTests); it depends on
    // none of the server's targets.
    dependencies: [.package(path: "Clients/swift")],
    targets: [
        system("CPostgres", pkgConfig: "libpq", apt: "libpq-dev"),
        system("COpenSSL", pkgConfig: "libcrypto", apt: "libssl-dev"),
        system("CCurl", pkgConfig: "libcurl", apt: "libcurl4-openssl-dev"),
        system("CSQLite", pkgConfig: "sqlite3", apt: "libsqlite3-dev"),
        system("CMicroHTTPD", pkgConfig: "libmicrohttpd", apt: "libmicrohttpd-dev"),
        system("CArgon2", pkgConfig: "libargon2", apt: "libargon2-dev"),
        system("CVips", pkgConfig: "vips", apt: "libvips-dev"),

        .target(name: "GatehouseCrypto", dependencies: ["COpenSSL", "CArgon2"], swiftSettings: strict),
        // Photos decoded and encoded anew (ADR 0025).
        .target(name: "GatehouseImaging", dependencies: ["CVips"], swiftSettings: strict),
        .target(name: "GatehouseCore", dependencies: ["GatehouseCrypto", "GatehouseImaging"], swiftSettings: strict),
        .target(
            name: "GatehouseMigrations", path: "Migrations",
            exclude: [], resources: [.copy("sql")], swiftSettings: strict),
        .target(name: "GatehouseSQL", dependencies: ["GatehouseCore", "GatehouseMigrations"], swiftSettings: strict),
        .target(name: "SQLiteDriver", dependencies: ["GatehouseCore", "GatehouseSQL", "CSQLite"], swiftSettings: strict),
        .target(name: "PostgresDriver", dependencies: ["GatehouseSQL", "CPostgres"], swiftSettings: strict),
        .target(name: "GatehouseHTTP", dependencies: ["GatehouseCore", "GatehouseCrypto", "CMicroHTTPD"], swiftSettings: strict),
        .target(name: "GatehouseCurl", dependencies: ["CCurl"], swiftSettings: strict),
        .target(
            name: "GatehouseProviders", dependencies: ["GatehouseCore", "GatehouseCrypto", "GatehouseCurl", "CCurl"],
            swiftSettings: strict),
        .target(
            name: "GatehouseMail", dependencies: ["GatehouseCore", "GatehouseCrypto", "GatehouseCurl", "CCurl"],
            resources: [.copy("Templates")], swiftSettings: strict),
        .target(
            name: "GatehouseAPI",
            dependencies: ["GatehouseCore", "GatehouseHTTP", "GatehouseSQL", "SQLiteDriver", "PostgresDriver", "GatehouseProviders", "GatehouseMail"],
            swiftSettings: strict),
        .executableTarget(name: "gatehouse", dependencies: ["GatehouseAPI"], swiftSettings: strict),
        // bench/upload-rss.py's server: the HTTP layer alone, streamed against buffered uploads.
        .executableTarget(
            name: "upload-bench-server", dependencies: ["GatehouseHTTP", "GatehouseCrypto"], path: "bench/upload-server", swiftSettings: strict),
        // bench/run's BENCH_ONLY=maintenance: bounded storage after 200,000 refreshes, through the store.
        .executableTarget(
            name: "maintenance-bench", dependencies: ["GatehouseAPI", "GatehouseSQL", "SQLiteDriver", "PostgresDriver"], path: "bench/maintenance",
            swiftSettings: strict),
        // bench/run's BENCH_ONLY=outbox: the outbox worker's items/s with a no-op handler, against single-row write transactions/s.
        .executableTarget(
            name: "outbox-bench", dependencies: ["GatehouseAPI", "GatehouseCore", "GatehouseSQL", "SQLiteDriver", "PostgresDriver"], path: "bench/outbox",
            swiftSettings: strict),
        .target(
            name: "GatehouseTesting",
            dependencies: ["GatehouseAPI", "GatehouseMail", "GatehouseImaging", "CCurl"],
            swiftSettings: strict),

        // The domain's services in process, below HTTP, on both databases (GatehouseTesting's CoreWorld).
        .testTarget(name: "GatehouseCoreTests", dependencies: ["GatehouseCore", "GatehouseTesting"], swiftSettings: strict),
        .testTarget(name: "GatehouseCryptoTests", dependencies: ["GatehouseCrypto", "CArgon2"], swiftSettings: strict),
        .testTarget(
            name: "GatehouseStoreTests",
            dependencies: ["GatehouseSQL", "SQLiteDriver", "PostgresDriver", "GatehouseTesting"],
            swiftSettings: strict),
        .testTarget(name: "GatehouseHTTPTests", dependencies: ["GatehouseHTTP", "GatehouseTesting"], swiftSettings: strict),
        .testTarget(
            name: "GatehouseProvidersTests", dependencies: ["GatehouseProviders", "GatehouseCurl", "GatehouseTesting"],
            swiftSettings: strict),
        .testTarget(name: "GatehouseMailTests", dependencies: ["GatehouseMail", "GatehouseTesting"], swiftSettings: strict),
        .testTarget(
            name: "GatehouseKitTests", dependencies: [.product(name: "GatehouseKit", package: "swift"), "GatehouseTesting", "GatehouseAPI"],
            swiftSettings: strict),
        .testTarget(name: "GatehouseAPITests", dependencies: ["GatehouseAPI", "GatehouseTesting", "GatehouseMail", "GatehouseProviders", "GatehouseImaging"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
