import GatehouseCore
import GatehouseKit
import Testing

/// GatehouseKit's codes are the server's: the same catalogue on both sides.
@Suite("GatehouseKit error catalogue")
struct CatalogueTests {
    @Test
    func theClientKnowsEveryCodeTheServerHasAndNoOther() {
        let server = Set(GatehouseCore.ErrorCode.all.map(\.rawValue))
        let client = Set(KitCode.documented.map(\.rawValue))
        #expect(server.subtracting(client).sorted() == [])
        #expect(client.subtracting(server).sorted() == [])
    }
}
