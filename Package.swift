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
    // macOS for the server; the others are GatehouseKit's (an app adds this package by URL).
    platforms: [.macOS(.v15), .iOS(.v15), .tvOS(.v15), .watchOS(.v8), .visionOS(.v1)],
    products: [
        .executable(name: "gatehouse", targets: ["gatehouse"]),
        // The Swift client: `.package(url: "<this repository>", …)` and `.product(name:
        // "GatehouseKit", package: "gatehouse")`. Building it builds none of the server's targets.
        .library(name: "GatehouseKit", targets: ["GatehouseKit"]),
    ],
    targets: [
        // The Swift client's sources, which Clients/swift also builds as a package of its own (for
        // its pure tests). A target here, not a path dependency: a package fetched by URL may not
        // depend on a local path.
        .target(
            name: "GatehouseKit", path: "Clients/swift/Sources/GatehouseKit", swiftSettings: [.enableUpcomingFeature("ExistentialAny")]),
        system("CPostgres", pkgConfig: "libpq", apt: "libpq-dev"),
        system("COpenSSL", pkgConfig: "libcrypto", apt: "libssl-dev"),
        system("CCurl", pkgConfig: "libcurl", apt: "libcurl4-openssl-dev"),
        system("CSQLite", pkgConfig: "sqlite3", apt: "libsqlite3-dev"),
        system("CMicroHTTPD", pkgConfig: "libmicrohttpd", apt: "libmicrohttpd-dev"),
        system("CArgon2", pkgConfig: "libargon2", apt: "libargon2-dev"),
        system("CCbor", pkgConfig: "libcbor", apt: "libcbor-dev"),
        // bcrypt of imported password hashes through libxcrypt's crypt_rn (ADR 0030).
        system("CCrypt", pkgConfig: "libcrypt", apt: "libcrypt-dev"),

        .target(name: "GatehouseCrypto", dependencies: ["COpenSSL", "CArgon2", "CCrypt"], swiftSettings: strict),
        // libvips, opened at the first photo (dlopen) rather than linked (ADR 0025).
        .target(name: "CVips", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        // Photos decoded and encoded anew (ADR 0025).
        .target(name: "GatehouseImaging", dependencies: ["CVips"], swiftSettings: strict),
        // WebAuthn (passkeys): CBOR decoded by libcbor, keys and signatures by OpenSSL (ADR 0028).
        .target(name: "GatehouseWebAuthn", dependencies: ["GatehouseCrypto", "CCbor", "COpenSSL"], swiftSettings: strict),
        .target(name: "GatehouseCore", dependencies: ["GatehouseCrypto", "GatehouseImaging", "GatehouseWebAuthn"], swiftSettings: strict),
        .target(
            name: "GatehouseMigrations", path: "Migrations",
            exclude: [], resources: [.copy("sql")], swiftSettings: strict),
        .target(name: "GatehouseSQL", dependencies: ["GatehouseCore", "GatehouseMigrations"], swiftSettings: strict),
        .target(name: "SQLiteDriver", dependencies: ["GatehouseCore", "GatehouseSQL", "CSQLite"], swiftSettings: strict),
        .target(name: "PostgresDriver", dependencies: ["GatehouseSQL", "CPostgres"], swiftSettings: strict),
        .target(name: "GatehouseHTTP", dependencies: ["GatehouseCore", "GatehouseCrypto", "CMicroHTTPD"], swiftSettings: strict),
        // Everything that leaves the process over libcurl: the HTTP client and its address policy, the
        // webhook transport, and the blob stores that are not SQL (S3, a folder).
        .target(name: "GatehouseOutbound", dependencies: ["GatehouseCore", "GatehouseCrypto", "CCurl"], swiftSettings: strict),
        .target(
            name: "GatehouseProviders", dependencies: ["GatehouseCore", "GatehouseCrypto", "GatehouseOutbound", "CCurl"],
            swiftSettings: strict),
        .target(
            name: "GatehouseMail", dependencies: ["GatehouseCore", "GatehouseCrypto", "GatehouseOutbound", "CCurl"],
            resources: [.copy("Templates")], swiftSettings: strict),
        // The web console's HTML, CSS and JavaScript modules (docs/console.md), compiled into the
        // executable: a fixed table of files, nothing read from disk at run time.
        .target(
            name: "GatehouseConsole", path: "Console", exclude: ["test"],
            resources: ["index.html", "console.css", "console.js", "api.js", "ui.js", "settings.js", "users.js", "activity.js", "platform.js"].map {
                .embedInCode($0)
            }, swiftSettings: strict),
        // The HTTP API: thin handlers over the domain; no driver, no outbound client.
        .target(name: "GatehouseAPI", dependencies: ["GatehouseCore", "GatehouseCrypto", "GatehouseHTTP", "GatehouseConsole"], swiftSettings: strict),
        // The composition root: builds the whole application from its configuration (drivers, stores,
        // providers, mail, outbox, API), with its logs, metrics and backup.
        .target(
            name: "GatehouseApp",
            dependencies: [
                "GatehouseCore", "GatehouseCrypto", "GatehouseHTTP", "GatehouseSQL", "GatehouseMigrations", "SQLiteDriver", "PostgresDriver",
                "GatehouseOutbound", "GatehouseProviders", "GatehouseMail", "GatehouseAPI",
            ],
            swiftSettings: strict),
        .executableTarget(name: "gatehouse", dependencies: ["GatehouseApp"], swiftSettings: strict),
        // bench/upload-rss.py's server: the HTTP layer alone, streamed against buffered uploads.
        .executableTarget(
            name: "upload-bench-server", dependencies: ["GatehouseHTTP", "GatehouseCrypto"], path: "bench/upload-server", swiftSettings: strict),
        // bench/run's BENCH_ONLY=maintenance: bounded storage after 200,000 refreshes, through the store.
        .executableTarget(
            name: "maintenance-bench", dependencies: ["GatehouseApp", "GatehouseSQL", "SQLiteDriver", "PostgresDriver"], path: "bench/maintenance",
            swiftSettings: strict),
        // bench/run's BENCH_ONLY=outbox: the outbox worker's items/s with a no-op handler, against single-row write transactions/s.
        .executableTarget(
            name: "outbox-bench", dependencies: ["GatehouseApp", "GatehouseCore", "GatehouseSQL", "SQLiteDriver", "PostgresDriver"], path: "bench/outbox",
            swiftSettings: strict),
        .target(
            name: "GatehouseTesting",
            dependencies: ["GatehouseApp", "GatehouseAPI", "GatehouseMail", "GatehouseImaging", "GatehouseWebAuthn", "CCurl"],
            swiftSettings: strict),

        // The domain's services in process, below HTTP, on both databases (GatehouseTesting's CoreWorld).
        .testTarget(name: "GatehouseCoreTests", dependencies: ["GatehouseCore", "GatehouseImaging", "GatehouseTesting"], swiftSettings: strict),
        .testTarget(name: "GatehouseCryptoTests", dependencies: ["GatehouseCrypto", "CArgon2"], swiftSettings: strict),
        .testTarget(name: "GatehouseWebAuthnTests", dependencies: ["GatehouseWebAuthn", "GatehouseCrypto", "GatehouseTesting"], swiftSettings: strict),
        .testTarget(
            name: "GatehouseStoreTests",
            dependencies: ["GatehouseSQL", "SQLiteDriver", "PostgresDriver", "GatehouseTesting"],
            swiftSettings: strict),
        .testTarget(name: "GatehouseHTTPTests", dependencies: ["GatehouseHTTP", "GatehouseTesting"], swiftSettings: strict),
        .testTarget(
            name: "GatehouseProvidersTests", dependencies: ["GatehouseProviders", "GatehouseOutbound", "GatehouseTesting"],
            swiftSettings: strict),
        .testTarget(name: "GatehouseMailTests", dependencies: ["GatehouseMail", "GatehouseOutbound", "GatehouseTesting"], swiftSettings: strict),
        .testTarget(
            name: "GatehouseKitTests", dependencies: ["GatehouseKit", "GatehouseTesting", "GatehouseApp"],
            swiftSettings: strict),
        .testTarget(
            name: "GatehouseAPITests",
            dependencies: ["GatehouseAPI", "GatehouseApp", "GatehouseTesting", "GatehouseMail", "GatehouseProviders", "GatehouseOutbound", "GatehouseImaging"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
