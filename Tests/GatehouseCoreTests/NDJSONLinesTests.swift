import Foundation
import Testing

@testable import GatehouseCore

/// The import's line reader: one line at a time, numbered as an editor numbers them, a line too
/// long skipped to its newline, whatever the file's size.
@Suite struct NDJSONLinesTests {
    static func lines(_ bytes: [UInt8]) throws -> [String] {
        let path = NSTemporaryDirectory() + "gatehouse-ndjson-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try NDJSONLines(path: path)
        var result: [String] = []
        while let line = try reader.next() {
            switch line {
            case .text(let number, let bytes): result.append("\(number):\(String(decoding: bytes, as: UTF8.self))")
            case .tooLong(let number): result.append("\(number):too long")
            }
        }
        return result
    }

    @Test func linesAreNumberedFromOneWithBlankLinesAndCRLFAndNoFinalNewline() throws {
        #expect(try Self.lines(Array("a\r\n\n  \nb\nc".utf8)) == ["1:a", "2:", "3:  ", "4:b", "5:c"])
        #expect(try Self.lines(Array("a\n".utf8)) == ["1:a"])
        #expect(try Self.lines([]) == [])
        #expect(NDJSONLines.isBlank(Array(" \t".utf8)) && !NDJSONLines.isBlank(Array(" x".utf8)))
    }

    @Test func aLineTooLongIsSkippedToItsNewlineAndTheNextOnesRead() throws {
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: NDJSONLines.maxLineBytes * 2 + 5)
        #expect(try Self.lines(Array("first\n".utf8) + long + Array("\nafter\n".utf8) + long) == ["1:first", "2:too long", "3:after", "4:too long"])
        let exact = [UInt8](repeating: UInt8(ascii: "y"), count: NDJSONLines.maxLineBytes)
        #expect(try Self.lines(exact + [10]).first?.count == NDJSONLines.maxLineBytes + 2)
    }

    @Test func linesSpanningReadChunksComeBackWhole() throws {
        let lines = (0..<5_000).map { "{\"email\": \"user\($0)@example.com\"}" }
        let read = try Self.lines(Array(lines.joined(separator: "\n").utf8))
        #expect(read == lines.enumerated().map { "\($0.offset + 1):\($0.element)" })
    }

    @Test func anImportLineIsCheckedWithTheAPIsRules() throws {
        let now: Int64 = 1_800_000_000_000
        let line = try ImportLine.decode(
            ["email": " Ada@Example.COM ", "email_verified": true, "first_name": " Ada ", "created_at": 1_600_000_000_000,
             "identities": [["provider": "apple", "subject": "001.a"]]], firebase: nil, now: now)
        #expect(line.email == "ada@example.com" && line.emailVerified && line.firstName == "Ada" && line.createdAt == 1_600_000_000_000)
        #expect(line.identities.map(\.provider) == [.apple])
        func fields(_ json: JSON) -> [String] {
            do {
                _ = try ImportLine.decode(json, firebase: nil, now: now)
                return []
            } catch { return error.fieldErrors.map(\.field) }
        }
        #expect(fields(["email": "a@example.com", "created_at": 1_900_000_000_000]) == ["created_at"])
        #expect(fields(["email": "a@example.com", "created_at": "yesterday"]) == ["created_at"])
        #expect(fields(["identities": [["provider": "google", "subject": "1"], ["provider": "google", "subject": "2"]]]) == ["identities[1].provider"])
        #expect(fields(["identities": [["provider": "google", "subject": " 1"]]]) == ["identities[0].subject"])
        #expect(fields(["identities": [["provider": "google"]]]) == ["identities[0].subject"])
        #expect(fields(["email": "a@example.com", "email_verified": "yes", "display_name": 7]) == ["email_verified", "display_name"])
        // Without an email, `email_verified` means nothing and is not kept.
        #expect(try ImportLine.decode(["identities": [["provider": "google", "subject": "1"]], "email_verified": true], firebase: nil, now: now).emailVerified == false)
    }

    @Test func createdAtReadsRFC3339WithFractionsAndOffsetsAndNothingElse() {
        #expect(ImportLine.rfc3339Millis("2021-03-04T05:06:07Z") == 1_614_834_367_000)
        #expect(ImportLine.rfc3339Millis("2021-03-04T05:06:07.25Z") == 1_614_834_367_250)
        #expect(ImportLine.rfc3339Millis("2021-03-04T14:06:07.123456+09:00") == 1_614_834_367_123)
        #expect(ImportLine.rfc3339Millis("2021-03-03T23:06:07-06:00") == 1_614_834_367_000)
        for bad in ["2021-02-30T00:00:00Z", "2021-03-04T05:06:07", "2021-03-04 05:06:07Z", "2021-03-04T05:06:07.Z", "2021-03-04T05:06:07+0900",
                    "21-03-04T05:06:07Z", "2021-03-04T05:06:07Zjunk", "yesterday", ""] {
            #expect(ImportLine.rfc3339Millis(bad) == nil, "\(bad)")
        }
    }
}
