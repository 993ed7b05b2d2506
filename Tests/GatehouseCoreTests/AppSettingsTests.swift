import GatehouseCore
import GatehouseTesting
import Testing

/// Settings changes against the stored version: a stale reading never overwrites a newer change.
@Suite struct AppSettingsTests {
    @Test(arguments: TestDatabase.kinds)
    func patchesFromOneStaleReadingBothLandAndEachBumpsTheVersion(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let stale = try world.createApp()
            _ = try world.apps.update(stale, patch: ["name": "Renamed"])
            // Made from the reading before the rename: applied to the stored settings, not to it.
            let updated = try world.apps.update(stale, patch: ["password_min_length": 12])
            #expect(updated.settings.name == "Renamed")
            #expect(updated.settings.passwordMinLength == 12)
            #expect(updated.record.version == stale.record.version + 2)
            #expect(try world.events(stale, .appSettingsChanged).count == 2)
            // The new minimum holds at once on this node.
            expectRefusal(.weakPassword) {
                _ = try world.passwords.signUp(app: updated, email: "short@example.com", password: "elevenchars", firstName: nil, lastName: nil, origin: origin)
            }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aWriteAtAVersionNoLongerCurrentChangesNothing(kind: TestDatabaseKind) throws {
        try CoreWorld.with(kind) { world in
            let stale = try world.createApp()
            let renamed = try world.apps.update(stale, patch: ["name": "Renamed"])
            let data = world.store.app(stale.id)
            let now = world.clock.nowMillis()
            let refused = try data.settings.updateSettings(
                json: stale.record.settingsJSON, allowedOrigins: [], sourceChecksum: nil, expectedVersion: stale.record.version, now: now)
            #expect(refused == nil)
            #expect(try world.apps.latest(stale).settings.name == "Renamed")
            let accepted = try data.settings.updateSettings(
                json: stale.record.settingsJSON, allowedOrigins: [], sourceChecksum: nil, expectedVersion: renamed.record.version, now: now)
            #expect(accepted?.version == renamed.record.version + 1)
            #expect(try world.apps.latest(stale).settings.name == "Test App")
        }
    }
}
