import GatehouseCore
import GatehouseTesting
import Testing

/// The admin's export below HTTP (``UserExport``): one export per app at a time, pages of the
/// configured size in id order, the hash gate and the audit record. Both databases.
@Suite struct UserExportTests {
    @Test(arguments: TestDatabase.kinds)
    func anAppExportsOneAtATimeAndOtherAppsAreNotHeldBack(_ kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind, configure: { $0.exportPageSize = 2 }) { world in
            let app = try world.createApp(["name": "One"])
            let other = try world.createApp(["name": "Two"])
            let first = try world.userExport.start(app: app, includeHashes: false)
            // A second export of the same app waits for the first to be sent: 429 with Retry-After.
            do {
                _ = try world.userExport.start(app: app, includeHashes: false)
                Issue.record("a second export of the app started")
            } catch let error as GatehouseError {
                #expect(error.code == .tooManyRequests && error.retryAfter != nil)
            }
            // Another app's is not held back.
            let theirs = try world.userExport.start(app: other, includeHashes: false)
            theirs.end()
            first.end()
            first.end()  // twice is once
            let again = try world.userExport.start(app: app, includeHashes: false)
            again.end()
            // A ticket let go without end() frees the slot too.
            _ = try world.userExport.start(app: app, includeHashes: false)
            try world.userExport.start(app: app, includeHashes: false).end()
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func theExportIsWrittenAPageAtATimeInIDOrder(_ kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind, configure: { $0.exportPageSize = 2 }) { world in
            let app = try world.createApp(["name": "Pages", "rate_limits": ["auth_per_minute_per_ip": 1000]])
            var ids: [String] = []
            for name in ["a", "b", "c", "d", "e"] { ids.append(try world.signUp(app, "\(name)@example.com").user.id.rawValue) }
            let ticket = try world.userExport.start(app: app, includeHashes: false)
            defer { ticket.end() }
            var pages: [[String]] = []
            let count = try world.userExport.write(ticket, origin: origin) { bytes in
                let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
                pages.append(try lines.compactMap { try JSON.parse(Array($0.utf8))["id"]?.stringValue })
            }
            #expect(count == 5)
            #expect(pages.map(\.count) == [2, 2, 1], "one sink call a page of the configured size")
            #expect(pages.flatMap { $0 } == ids.sorted())
            let recorded = try #require(try world.events(app, .usersExported).first)
            #expect(recorded.data == ["by": "admin", "include_hashes": false, "count": 5])
            #expect(recorded.ip == origin.ip)
            // Hashes need the app's allow_hash_export.
            expectRefusal(.hashExportDisabled) { _ = try world.userExport.start(app: app, includeHashes: true) }
        }
    }
}
