import Foundation

/// A PostgreSQL cluster of one test's own (`scripts/postgres-test-server` with its own folder and
/// port), which the test may stop and start: the shared test server must never go down under the
/// other tests. Removed by `destroy()`.
public final class OwnPostgres: @unchecked Sendable {
    public let url: String
    private let root: String
    private let port: Int

    private static var script: String {
        // Sources/GatehouseTesting/OwnPostgres.swift → the package root.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/postgres-test-server").path
    }

    /// `GATEHOUSE_PG_BIN`, else the newest installed major version's folder (Debian 12 ships 15,
    /// Debian 13 ships 17), as scripts/postgres-test-server chooses it.
    private static var bin: String {
        if let bin = ProcessInfo.processInfo.environment["GATEHOUSE_PG_BIN"] { return bin }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let newest = versions.compactMap(Int.init).filter { FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\($0)/bin/pg_ctl") }.max()
        return "/usr/lib/postgresql/\(newest ?? 15)/bin"
    }

    public init() throws {
        root = NSTemporaryDirectory() + "gatehouse-own-pg-" + UUID().uuidString.prefix(8).lowercased()
        // Below Linux's ephemeral range (32768–60999), where clients' ports come from; another
        // cluster may hold one, so a few tries.
        var attempt = 0
        while true {
            let port = Int.random(in: 20_000..<32_000)
            do {
                url = try Self.run(root: root, port: port).trimmingCharacters(in: .whitespacesAndNewlines)
                self.port = port
                break
            } catch {
                attempt += 1
                if attempt == 3 { throw error }
            }
        }
    }

    /// Starts it again (after `stop`), returning once it accepts connections.
    public func start() throws {
        do { _ = try Self.run(root: root, port: port) } catch { throw TestHTTPClient.Failure(description: "\(error)\n\(logTail)") }
    }

    /// Stops it (`pg_ctl stop -m fast`: every session is told and closed), returning once it is down.
    public func stop() throws { try pgCtl("stop", "-m", "fast") }

    public func destroy() {
        try? pgCtl("stop", "-m", "immediate")
        try? FileManager.default.removeItem(atPath: root)
    }

    /// The end of the server's log, for a failure's message.
    public var logTail: String {
        let text = (try? String(contentsOfFile: root + "/server.log", encoding: .utf8)) ?? ""
        return String(text.suffix(2_000))
    }

    private func pgCtl(_ arguments: String...) throws {
        let command = ["\(Self.bin)/pg_ctl", "-D", root + "/data", "-w"] + arguments
        if getuid() == 0 {
            _ = try ExternalProgram.run("/usr/sbin/runuser", ["-u", "postgres", "--"] + command)
        } else {
            _ = try ExternalProgram.run(command[0], Array(command.dropFirst()))
        }
    }

    private static func run(root: String, port: Int) throws -> String {
        try ExternalProgram.run("/usr/bin/env", ["GATEHOUSE_PG_ROOT=\(root)", "GATEHOUSE_PG_PORT=\(port)", script])
    }
}
