import Testing

@testable import GatehouseKit

/// The portable SHA-256 (what Linux uses) against NIST's examples (FIPS 180-4 / the SHAVS
/// examples) and messages around the padding boundaries, hashed once with an independent
/// implementation (Python's hashlib) and written down here.
@Suite("SHA-256")
struct SHA256Tests {
    static func hex(_ bytes: [UInt8]) -> String { SHA256Hashing.hex(bytes) }

    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        (
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
        ),
    ])
    func nistVectors(_ message: String, _ digest: String) {
        #expect(Self.hex(PortableSHA256.hash(Array(message.utf8))) == digest)
        #expect(Self.hex(SHA256Hashing.hash(Array(message.utf8))) == digest, "the platform's pick agrees")
    }

    @Test
    func oneMillionTimesA() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(Self.hex(PortableSHA256.hash(message)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test(arguments: [
        (1, "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        (55, "8af594de0e003fdee5c8bb088216c824349b4137070f559574f4a4bddd27b714"),
        (56, "db81bc2bfd43620591df192139062da77d4c376f1888ea3d2190bd07c8d901f9"),
        (57, "4d95ad65f5ec430c9a97ae9243b87d4d6fa0c474288c93cecfbfe9257e711780"),
        (63, "bd535b38bf0d0d1a09d370b7e34b2696cea3767801a45d5611a4aaa6954e8527"),
        (64, "292be91abe8c0909fe3d26575af5755eee74d23816dc68c3ba41765136967654"),
        (65, "ba65aedf7884642499a59ae124894611d986cf429e69f569488048af3a99e25a"),
        (111, "8e2fd1aa2d84835ec4d8c415fdcddff613de1c716daaf658078f10474736e639"),
        (112, "6636edfe65fc8ecc85cf96ef838fc95086867aef6123859e9b9f20805b247cbc"),
        (119, "d367ab298e74477421127b0b448667c37c006c636f5738f081c39388756e5fad"),
        (120, "be7beb9c82089eb08da8fe6eb30c13b9d56869014e228a8c3eb0fdfe832efab2"),
        (127, "770cba7b80c7615a327db5812ccd3f80895d801b587448fcd0b2c1a10f5c88a3"),
        (128, "cb5311e1d7aa8e11d6af7081f3ffc3e4efa008c7483a1a791fe170bf37546ba7"),
        (129, "b9e17b1020711e1a6f25633f677a750b3d54399773eb191acac2cb8c7c8b2541"),
        (1000, "59425e4412e296fc74736673ce067027f384203f59c0d2c3e6be7b13347b3ffc"),
    ])
    func paddingBoundaries(_ length: Int, _ digest: String) {
        let message = (0..<length).map { UInt8($0 * 7 % 251) }
        #expect(Self.hex(PortableSHA256.hash(message)) == digest)
        // Fed in uneven pieces, the same digest.
        var hasher = PortableSHA256()
        var offset = 0
        var piece = 1
        while offset < message.count {
            let end = min(message.count, offset + piece)
            hasher.update(Array(message[offset..<end]))
            offset = end
            piece = piece * 3 % 71 + 1
        }
        #expect(Self.hex(hasher.finalize()) == digest)
    }
}
