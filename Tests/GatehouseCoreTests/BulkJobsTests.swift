import GatehouseCore
import Testing

/// Imports and exports of users share the node's bound (`BulkJobs`): one of each kind per app,
/// and a quarter of the network offload threads (at least two) across apps.
@Suite("Bulk jobs")
struct BulkJobsTests {
    static func refusal(_ body: () throws(GatehouseError) -> BulkJobs.Slot) -> GatehouseError? {
        do {
            _ = try body()
            return nil
        } catch { return error }
    }

    @Test
    func oneOfEachKindPerAppAndAQuarterOfTheThreadsAcrossApps() throws {
        let jobs = BulkJobs(offloadThreads: 8)
        #expect(jobs.limit == 2)
        #expect(BulkJobs(offloadThreads: 4).limit == 2, "at least two")
        #expect(BulkJobs(offloadThreads: 64).limit == 16)
        let (a, b, c) = (AppID(unchecked: "app_a"), AppID(unchecked: "app_b"), AppID(unchecked: "app_c"))

        let importA = try jobs.start(.userImport, app: a)
        // The same kind in the same app waits; the other kind does not.
        #expect(Self.refusal { () throws(GatehouseError) in try jobs.start(.userImport, app: a) }?.code == .tooManyRequests)
        let exportA = try jobs.start(.userExport, app: a)
        // The node is full: another app's job waits too, with a time to retry.
        let full = Self.refusal { () throws(GatehouseError) in try jobs.start(.userExport, app: b) }
        #expect(full?.code == .tooManyRequests && full?.retryAfter != nil)
        // `check` answers as `start` would, and takes nothing.
        #expect(throws: GatehouseError.self) { try jobs.check(.userExport, app: b) }
        importA.end()
        importA.end()  // a second end gives back nothing more
        try jobs.check(.userExport, app: b)
        try jobs.check(.userExport, app: b)
        let exportB = try jobs.start(.userExport, app: b)
        #expect(Self.refusal { () throws(GatehouseError) in try jobs.start(.userImport, app: c) } != nil)
        exportA.end()
        exportB.end()
        _ = try jobs.start(.userImport, app: c)
    }
}
