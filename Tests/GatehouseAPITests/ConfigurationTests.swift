import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

@Suite("Configuration from the environment")
struct ConfigurationTests {
    @Test
    func defaultsAreSafeForLocalUse() throws {
        let config = try Configuration.fromEnvironment([:])
        #expect(config.database == .sqlite(path: "./data/gatehouse.db"))
        #expect(config.listenHost == "127.0.0.1")
        #expect(config.listenPort == 8080)
        #expect(config.publicURL == "http://127.0.0.1:8080")
        #expect(config.smtpURL == "log:")
        #expect(config.adminToken == nil)
        #expect(config.masterKey == nil)
        #expect(config.refreshGraceSeconds == 10)
        #expect(config.allowPrivateOutbound == false)
    }

    @Test
    func s3BlobStorageNeedsAnEndpointBucketAndKeysAndNeverShowsTheSecret() throws {
        let base = [
            "GATEHOUSE_BLOB_STORE": "s3", "GATEHOUSE_S3_ENDPOINT": "https://s3.example.com", "GATEHOUSE_S3_BUCKET": "gh-files",
            "GATEHOUSE_S3_ACCESS_KEY_ID": "AKIDEXAMPLE", "GATEHOUSE_S3_SECRET_ACCESS_KEY": "very-secret-value",
        ]
        let config = try Configuration.fromEnvironment(base)
        let expected = Configuration.S3Settings(
            endpoint: "https://s3.example.com", bucket: "gh-files", region: "us-east-1", accessKeyID: "AKIDEXAMPLE", secretAccessKey: "very-secret-value")
        #expect(config.blobStorage == .s3(expected))
        #expect(!"\(config.blobStorage)".contains("very-secret-value"))
        #expect(!String(reflecting: config.blobStorage).contains("very-secret-value"))
        // From a file, in another region.
        let file = NSTemporaryDirectory() + "gh-s3-secret-" + UUID().uuidString
        try "from-a-file\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        var fromFile = base
        fromFile["GATEHOUSE_S3_SECRET_ACCESS_KEY"] = nil
        fromFile["GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE"] = file
        fromFile["GATEHOUSE_S3_REGION"] = "eu-west-3"
        guard case .s3(let s3) = try Configuration.fromEnvironment(fromFile).blobStorage else {
            Issue.record("not s3")
            return
        }
        #expect(s3.secretAccessKey == "from-a-file" && s3.region == "eu-west-3")
        #expect(try Configuration.fromEnvironment(base.merging(["GATEHOUSE_S3_ENDPOINT": "http://127.0.0.1:9000"]) { $1 }).blobStorage != .database)
        for (name, wrong) in [
            ("GATEHOUSE_S3_ENDPOINT", "http://s3.example.com"), ("GATEHOUSE_S3_ENDPOINT", "https://s3.example.com/path"),
            ("GATEHOUSE_S3_ENDPOINT", "ftp://s3.example.com"), ("GATEHOUSE_S3_ENDPOINT", ""), ("GATEHOUSE_S3_BUCKET", "a/b"),
            ("GATEHOUSE_S3_BUCKET", "Upper"), ("GATEHOUSE_S3_BUCKET", ""), ("GATEHOUSE_S3_ACCESS_KEY_ID", ""), ("GATEHOUSE_S3_SECRET_ACCESS_KEY", ""),
            ("GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE", "/nonexistent"), ("GATEHOUSE_S3_REGION", "us east"), ("GATEHOUSE_BLOB_DIRECTORY", "/tmp/x"),
        ] {
            do {
                _ = try Configuration.fromEnvironment(base.merging([name: wrong]) { $1 })
                Issue.record("\(name)=\(wrong) was accepted")
            } catch {
                #expect(!error.description.contains("very-secret-value"))
            }
        }
    }

    @Test
    func privateOutboundConnectionsAreAllowedOnlyByAnExplicitTrue() throws {
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_ALLOW_PRIVATE_OUTBOUND": "true"]).allowPrivateOutbound)
        #expect(try !Configuration.fromEnvironment(["GATEHOUSE_ALLOW_PRIVATE_OUTBOUND": "false"]).allowPrivateOutbound)
        for wrong in ["yes", "1", "TRUE", "on"] {
            #expect(throws: ConfigurationError.self, "\(wrong)") {
                try Configuration.fromEnvironment(["GATEHOUSE_ALLOW_PRIVATE_OUTBOUND": wrong])
            }
        }
    }

    /// The web console is on unless `GATEHOUSE_CONSOLE=off`; off, its routes are not in the table
    /// (docs/console.md; Console/test checks the answers).
    @Test
    func theConsoleIsOnUnlessTurnedOff() throws {
        #expect(try Configuration.fromEnvironment([:]).console)
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_CONSOLE": "on"]).console)
        #expect(try !Configuration.fromEnvironment(["GATEHOUSE_CONSOLE": "off"]).console)
        for wrong in ["true", "0", "OFF", "no"] {
            #expect(throws: ConfigurationError.self, "\(wrong)") { try Configuration.fromEnvironment(["GATEHOUSE_CONSOLE": wrong]) }
        }
        let off = try TestServer(.sqlite) { $0.console = false }
        defer { off.stop() }
        #expect(!off.gatehouse.operations.contains { $0.pattern.hasPrefix("/console") })
        #expect(try off.request("GET", "/console/").status == 404)
        let on = try TestServer(.sqlite)
        defer { on.stop() }
        let page = try on.request("GET", "/console/")
        #expect(page.status == 200)
        #expect(page.header("Content-Security-Policy")?.contains("script-src 'self'") == true)
    }

    /// The default mailer prints codes to the log: warned about always, and behind an https
    /// address refused unless asked for by name.
    @Test
    func theLogMailerIsForDevelopmentAndRefusedByDefaultBehindHTTPS() throws {
        let local = try Configuration.fromEnvironment([:])
        #expect(local.startWarnings.contains { $0.contains("mail is printed to the log") })
        let https = ["GATEHOUSE_PUBLIC_URL": "https://auth.example.com"]
        let refused = #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment(https) }
        #expect(refused?.problems.contains { $0.contains("GATEHOUSE_SMTP_URL is required when GATEHOUSE_PUBLIC_URL is https") } == true)
        let explicit = try Configuration.fromEnvironment(https.merging(["GATEHOUSE_SMTP_URL": "log:"]) { $1 })
        #expect(explicit.smtpURL == "log:" && explicit.startWarnings.contains { $0.contains("mail is printed to the log") })
        let real = try Configuration.fromEnvironment(https.merging(["GATEHOUSE_SMTP_URL": "smtps://smtp.example.com"]) { $1 })
        #expect(real.startWarnings.isEmpty)
        let open = try Configuration.fromEnvironment(["GATEHOUSE_SMTP_URL": "smtp://127.0.0.1:25", "GATEHOUSE_ALLOW_PRIVATE_OUTBOUND": "true"])
        #expect(open.startWarnings.count == 1 && open.startWarnings[0].contains("GATEHOUSE_ALLOW_PRIVATE_OUTBOUND=true"))
    }

    /// A per-app outbox cap as large as the lanes lets one app hold them all: warned about at start.
    @Test
    func aPerAppOutboxCapAsLargeAsTheLanesIsWarnedAbout() throws {
        let smtp = ["GATEHOUSE_SMTP_URL": "smtp://mail.example.com"]
        let fair = try Configuration.fromEnvironment(smtp)
        #expect(fair.outboxConcurrency == 4 && fair.outboxPerAppInFlight == 2 && fair.startWarnings.isEmpty)
        let unfair = try Configuration.fromEnvironment(smtp.merging(["GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT": "4"]) { $1 })
        #expect(unfair.startWarnings.count == 1 && unfair.startWarnings[0].contains("GATEHOUSE_OUTBOX_PER_APP_IN_FLIGHT (4)"))
    }

    @Test
    func theMailCapMaximumIsTenThousandAndSettable() throws {
        #expect(try Configuration.fromEnvironment([:]).maxMailPerHour == 10_000)
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_MAX_MAIL_PER_HOUR": "50"]).maxMailPerHour == 50)
        for wrong in ["0", "-1", "lots", "1000001"] {
            #expect(throws: ConfigurationError.self, "\(wrong)") { try Configuration.fromEnvironment(["GATEHOUSE_MAX_MAIL_PER_HOUR": wrong]) }
        }
    }

    /// `GATEHOUSE_DATABASE_POOLER`: none by default, `transaction` with PostgreSQL only (ADR 0034).
    @Test
    func theDatabasePoolerIsNoneUnlessATransactionPoolerIsNamedForPostgreSQL() throws {
        let postgres = ["GATEHOUSE_DATABASE_URL": "postgres://gatehouse@pgbouncer:6432/gatehouse", "GATEHOUSE_MASTER_KEY": String(repeating: "ab", count: 32)]
        #expect(try Configuration.fromEnvironment(postgres).databasePooler == .none)
        #expect(try Configuration.fromEnvironment(postgres.merging(["GATEHOUSE_DATABASE_POOLER": "transaction"]) { $1 }).databasePooler == .transaction)
        #expect(try Configuration.fromEnvironment(postgres.merging(["GATEHOUSE_DATABASE_POOLER": "none"]) { $1 }).databasePooler == .none)
        let session = #expect(throws: ConfigurationError.self) {
            try Configuration.fromEnvironment(postgres.merging(["GATEHOUSE_DATABASE_POOLER": "session"]) { $1 })
        }
        #expect(session?.problems == ["GATEHOUSE_DATABASE_POOLER must be none or transaction."])
        let sqlite = #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment(["GATEHOUSE_DATABASE_POOLER": "transaction"]) }
        #expect(sqlite?.problems == ["GATEHOUSE_DATABASE_POOLER=transaction is only for PostgreSQL (a postgres:// GATEHOUSE_DATABASE_URL)."])
    }

    @Test
    func theMaintenanceIntervalIsFiveMinutesAndRefusesNonsense() throws {
        #expect(try Configuration.fromEnvironment([:]).maintenanceIntervalSeconds == 300)
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS": "60"]).maintenanceIntervalSeconds == 60)
        // The periodic-jobs thread looks every minute: a shorter interval would not be kept.
        for wrong in ["0", "59", "-300", "86401", "5m", "1e3"] {
            do {
                _ = try Configuration.fromEnvironment(["GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS": wrong])
                Issue.record("GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS=\(wrong) was accepted")
            } catch {
                #expect(error.problems == ["GATEHOUSE_MAINTENANCE_INTERVAL_SECONDS must be a whole number from 60 to 86400."])
            }
        }
    }

    @Test
    func providerThreadsAreSizedToTheCoresAndSettable() throws {
        #expect(try Configuration.fromEnvironment([:]).providerThreads == max(4, 4 * ProcessInfo.processInfo.activeProcessorCount))
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_PROVIDER_THREADS": "32"]).providerThreads == 32)
        for wrong in ["0", "-1", "many"] {
            #expect(throws: ConfigurationError.self, "\(wrong)") { try Configuration.fromEnvironment(["GATEHOUSE_PROVIDER_THREADS": wrong]) }
        }
    }

    @Test
    func theUploadSpoolDirectoryDefaultsToTheSystemsAndMustBeAWritableFolder() throws {
        #expect(try Configuration.fromEnvironment([:]).uploadSpoolDirectory == nil)
        let folder = NSTemporaryDirectory()
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_UPLOAD_SPOOL_DIR": folder]).uploadSpoolDirectory == folder)
        #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment(["GATEHOUSE_UPLOAD_SPOOL_DIR": "/nonexistent/spool"]) }
        #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment(["GATEHOUSE_UPLOAD_SPOOL_DIR": "/etc/hostname"]) }
    }

    @Test
    func everyProblemIsReportedAtOnce() {
        #expect {
            try Configuration.fromEnvironment([
                "GATEHOUSE_DATABASE_URL": "mysql://x", "GATEHOUSE_LISTEN": "nowhere", "GATEHOUSE_MASTER_KEY": "short",
                "GATEHOUSE_ADMIN_TOKEN": "tiny", "GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8, not-an-ip", "GATEHOUSE_REFRESH_GRACE_SECONDS": "ten",
            ])
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.problems.count == 6
        }
    }

    @Test
    func postgresNeedsAMasterKey() {
        #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment(["GATEHOUSE_DATABASE_URL": "postgres://localhost/x"]) }
    }

    @Test
    func masterKeysAreBase64OrHex() throws {
        let hex = String(repeating: "ab", count: 32)
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_MASTER_KEY": hex]).masterKey == Array(repeating: 0xAB, count: 32))
        let b64 = "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_MASTER_KEY": b64]).masterKey == Array(repeating: 0xAB, count: 32))
        let urlSafe = "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s"
        #expect(try Configuration.fromEnvironment(["GATEHOUSE_MASTER_KEY": urlSafe]).masterKey == Array(repeating: 0xAB, count: 32))
    }

    @Test
    func listenAndPublicURL() throws {
        let v6 = try Configuration.fromEnvironment(["GATEHOUSE_LISTEN": "[::1]:9000"])
        #expect(v6.listenHost == "::1")
        #expect(v6.publicURL == "http://[::1]:9000")
        let explicit = try Configuration.fromEnvironment([
            "GATEHOUSE_LISTEN": "0.0.0.0:80", "GATEHOUSE_PUBLIC_URL": "https://auth.example.com//", "GATEHOUSE_SMTP_URL": "smtp://127.0.0.1:25",
        ])
        #expect(explicit.publicURL == "https://auth.example.com")
        for bad in ["::1:9000", "127.0.0.1:0", "127.0.0.1:65536", "[::1]9000"] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try Configuration.fromEnvironment(["GATEHOUSE_LISTEN": bad]) }
        }
        // A URL with credentials would put them in every issuer and in the log.
        #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment(["GATEHOUSE_PUBLIC_URL": "https://user:pw@auth.example.com"]) }
    }

    @Test
    func trustedProxyRanges() throws {
        let range = try #require(IPRange("10.1.0.0/16"))
        #expect(range.contains("10.1.200.3"))
        #expect(!range.contains("10.2.0.1"))
        #expect(range.contains("::ffff:10.1.0.9"))
        #expect(try #require(IPRange("2001:db8::/32")).contains("2001:db8::1"))
        #expect(IPRange("10.0.0.0/33") == nil)
    }
}

@Suite("Client address behind proxies")
struct ClientAddressTests {
    let proxies = [IPRange("10.0.0.0/8")!, IPRange("::1")!]

    @Test
    func forwardedForIsBelievedOnlyFromTrustedProxies() {
        #expect(ClientAddress.resolve(peer: "203.0.113.9", forwardedFor: "1.2.3.4", trustedProxies: proxies) == "203.0.113.9")
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "1.2.3.4", trustedProxies: proxies) == "1.2.3.4")
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: nil, trustedProxies: proxies) == "10.0.0.2")
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "1.2.3.4", trustedProxies: []) == "10.0.0.2")
    }

    @Test
    func theRightMostUntrustedHopIsTheClient() {
        // The client wrote "6.6.6.6" itself; the proxies appended the rest.
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "6.6.6.6, 198.51.100.7, 10.0.0.9", trustedProxies: proxies) == "198.51.100.7")
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "not-an-ip", trustedProxies: proxies) == "10.0.0.2")
    }

    @Test
    func aForwardedAddressComesOutInOneSpelling() {
        // An IPv4 client written as IPv4-mapped IPv6 is that IPv4 client (else every such client
        // would share one /64 limiter bucket), and IPv6 is written one way.
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "::ffff:198.51.100.7", trustedProxies: proxies) == "198.51.100.7")
        // A proxy that writes itself mapped is still a trusted proxy, skipped.
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "::ffff:c633:6407, ::FFFF:10.0.0.9", trustedProxies: proxies) == "198.51.100.7")
        #expect(ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "2001:DB8:0:0::1", trustedProxies: proxies) == "2001:db8::1")
        #expect(rateLimitSubject(ip: ClientAddress.resolve(peer: "10.0.0.2", forwardedFor: "::ffff:198.51.100.8", trustedProxies: proxies)) == "198.51.100.8")
        #expect(rateLimitSubject(ip: "::ffff:198.51.100.8") == "198.51.100.8")
        #expect(rateLimitSubject(ip: "2001:db8:1:2:3::9") == "20010db800010002::/64")
    }

    @Test
    func aRangeOfMappedAddressesIsTheIPv4RangeItMaps() throws {
        let mapped = try #require(IPRange("::ffff:10.0.0.0/104"))
        #expect(mapped.contains("10.2.3.4"))
        #expect(mapped.contains("::ffff:10.2.3.4"))
        #expect(!mapped.contains("11.0.0.1"))
        #expect(!mapped.contains("::10.2.3.4"))
    }
}

@Suite("JSON")
struct JSONTests {
    @Test
    func parsesEveryKindOfValueAndKeepsBooleansApartFromNumbers() throws {
        let json = try JSON.parse(Array(#"{"t":true,"f":false,"one":1,"zero":0,"half":1.5,"big":12345678901234,"s":"é\n","n":null,"a":[1,true,"x"],"o":{"k":[]}}"#.utf8))
        #expect(json == [
            "t": true, "f": false, "one": 1, "zero": 0, "half": .double(1.5), "big": 12_345_678_901_234, "s": "é\n", "n": nil,
            "a": [1, true, "x"], "o": ["k": []],
        ])
        #expect(try JSON.parse(Array(json.serialized())) == json)
    }

    @Test
    func aMergePatchKeepsWhatItRemovedAsNulls() {
        let stored: JSON = ["name": "A", "apple": ["team_id": "T", "client_ids": ["x"]], "files": ["max_bytes": 5], "n": 1]
        let patch: JSON = ["apple": ["team_id": nil, "bogus": nil], "files": nil, "gone": nil, "n": ["k": nil], "name": "B"]
        let merged = stored.merging(patch: patch)
        #expect(merged == ["name": "B", "apple": ["client_ids": ["x"]], "n": [:]])
        // The removed names come back as nulls, nested ones too; an object that replaced a number
        // keeps its own removal; nothing else changes.
        #expect(merged.keepingRemovals(of: patch) == [
            "name": "B", "apple": ["client_ids": ["x"], "team_id": nil, "bogus": nil], "files": nil, "gone": nil, "n": ["k": nil],
        ])
    }

    @Test
    func serialisesStringsWithEveryEscapeAndCopiesTheRestAsIs() throws {
        // Quote, backslash, the named escapes, other controls and DEL as \u00XX, at the start, in
        // the middle and at the end of a string; everything else (here é and an emoji) byte for byte.
        let text = "\"a\\b\nc\rd\te\u{01}f\u{1F}g\u{7F}é😀/\""
        #expect(JSON.string(text).serializedString == #""\"a\\b\nc\rd\te\u0001f\u001fg\u007fé😀/\"""#)
        #expect(JSON.string("").serializedString == #""""#)
        #expect(JSON.string("plain").serializedString == #""plain""#)
        let everyASCII = String(decoding: Array(0...0x7F as ClosedRange<UInt8>), as: UTF8.self)
        #expect(try JSON.parse(JSON.array([.string(everyASCII)]).serialized()) == [.string(everyASCII)])
    }

    @Test
    func refusesWhatIsNotUTF8JSON() {
        for bad: [UInt8] in [Array("{".utf8), Array("{\"a\":}".utf8), [0xFF, 0xFE, 0x7B, 0x00, 0x7D, 0x00], [0x22, 0xC3, 0x28, 0x22], Array("{'a':1}".utf8)] {
            #expect(throws: JSON.ParseError.self) { try JSON.parse(bad) }
        }
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSON.ParseError.self) { try JSON.parse(Array(deep.utf8)) }
    }

    @Test
    func refusesDuplicateKeysButNotColonsInStringsOrEqualKeysOfOtherObjects() throws {
        for bad in [#"{"a":1,"a":2}"#, #"{"o":{"k":1,"k":1}}"#, #"[{"a":1,"\u0061":2}]"#, #"{"a":{"b":1},"c":2,"c":{"d":3}}"#] {
            #expect(throws: JSON.ParseError.self, "\(bad)") { try JSON.parse(Array(bad.utf8)) }
        }
        #expect(try JSON.parse(Array(#"{"a:":"b:c","d":{"a":":"}}"#.utf8)) == ["a:": "b:c", "d": ["a": ":"]])
        #expect(try JSON.parse(Array(#"[{"a":1},{"a":2},"x:y"]"#.utf8)) == [["a": 1], ["a": 2], "x:y"])
    }

    @Test
    func refusesTrailingCommasButNotCommasInStrings() throws {
        for bad in [#"{"a":1,}"#, "[1,2 ,\n]", #"{"a":[1,],"b":2}"#, #"{"a":{"b":1,}}"#] {
            #expect(throws: JSON.ParseError.self, "\(bad)") { try JSON.parse(Array(bad.utf8)) }
        }
        #expect(try JSON.parse(Array(#"{"a":",}","b":["\\",",]"]}"#.utf8)) == ["a": ",}", "b": ["\\", ",]"]])
    }
}

@Suite("Test tools")
struct TestToolTests {
    /// A checker that writes more than a pipe holds (64 KiB) to standard error and fails: its
    /// message is reported, and the run does not wait on a full pipe.
    @Test
    func aFailingProgramsLongErrorOutputIsReported() throws {
        let script = "import sys; sys.stdout.write('out'); sys.stderr.write('e' * 200000 + 'END'); sys.exit(3)"
        #expect {
            try ExternalProgram.run(ExternalProgram.python, ["-c", script])
        } throws: { error in
            let text = "\(error)"
            return text.contains("exited 3") && text.hasSuffix("END")
        }
        #expect(try ExternalProgram.run(ExternalProgram.python, ["-c", "print('fine')"]) == "fine\n")
    }
}
