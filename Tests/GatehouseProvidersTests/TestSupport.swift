import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseOutbound
import GatehouseProviders
import GatehouseTesting
import Testing

/// The three fakes, a manual clock they share with the cache and the verifier, and a verifier
/// reading keys from the fakes.
final class ProviderFixture {
    let clock = ManualClock()
    let client = OutboundHTTPClient(timeoutSeconds: 5)
    let apple: FakeApple
    let google: FakeGoogle
    let firebase: FakeFirebase
    let cache: JWKSCache
    let verifier: ProviderVerifier

    init(appleKeysMaxAge: Int? = 3600) throws {
        apple = try FakeApple(clock: clock, keysMaxAge: appleKeysMaxAge)
        google = try FakeGoogle(clock: clock)
        firebase = try FakeFirebase(clock: clock)
        cache = JWKSCache(client: client, clock: clock)
        verifier = ProviderVerifier(
            jwks: cache, clock: clock, appleKeysURL: apple.keysURL, googleKeysURL: google.keysURL,
            firebaseKeysURL: firebase.keysURL)
    }

    deinit {
        apple.stop()
        google.stop()
        firebase.stop()
    }

    var now: Int64 { clock.nowSeconds }
    var fakeErrors: [String] { apple.errors + google.errors + firebase.errors }
}

/// The reason of an `.invalidToken` failure, or `nil` when `body` succeeded or failed otherwise.
func invalidTokenReason<T>(_ body: () throws -> T) -> String? {
    if case .invalidToken(let reason)? = providerError(body) { return reason }
    return nil
}

/// The error `body` threw, or `nil`.
func providerError<T>(_ body: () throws -> T) -> ProviderError? {
    do {
        _ = try body()
        return nil
    } catch let error as ProviderError {
        return error
    } catch {
        Issue.record("not a ProviderError: \(error)")
        return nil
    }
}

extension ProviderError {
    var isUnavailable: Bool { if case .unavailable = self { true } else { false } }
    var isRejected: Bool { if case .rejected = self { true } else { false } }
}

/// `token` with its claims replaced by `change(claims)`, keeping the original header and signature.
func tamper(_ token: String, _ change: (inout [String: JSON]) -> Void) -> String {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    var claims = (try? JSON.parse(Base64URL.decode(parts[1]) ?? []))?.objectValue ?? [:]
    change(&claims)
    return parts[0] + "." + Base64URL.encode(JSON.object(claims).serialized()) + "." + parts[2]
}

/// A TCP listener on 127.0.0.1 that never answers: connections complete in the kernel's backlog
/// and then nothing is ever read or written.
final class SilentListener {
    let port: UInt16
    private let fd: Int32

    /// With `backlog: 0` and one connection waiting (``fillBacklog()``), the kernel drops further
    /// SYNs: a connect to it never completes.
    init(backlog: Int32 = 16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(fd, socketAddress, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, socketAddress, &length) == 0
            }
        }
        guard fd >= 0, bound else { throw POSIXError(.EADDRNOTAVAIL) }
        port = UInt16(bigEndian: address.sin_port)
    }

    /// Connections waiting in the backlog, accepted (and closed) now without waiting.
    func acceptedConnections() -> Int {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var count = 0
        while true {
            let connection = accept(fd, nil, nil)
            guard connection >= 0 else { return count }
            close(connection)
            count += 1
        }
    }

    private var fillers: [Int32] = []

    /// Opens connections that are never accepted until the accept queue is full.
    func fillBacklog() {
        for _ in 0..<3 {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(filler)
            usleep(50_000)
        }
    }

    deinit {
        for filler in fillers { close(filler) }
        close(fd)
    }
}
